"""One run directory as rows: the pure parsing behind ingestion (no Spark, no file reads here).

A *run* is ``<results>/<test>/<ts>/`` holding ``test.yaml`` (the spec), ``history.jsonl`` (the ops) and
``results.json`` (the verdicts).  :func:`parse_run` takes the three files' texts (``None`` when a file is
missing) and returns a :class:`ParsedRun`: the run summary row, the fault windows, the anomaly and checker
rows, and the parsed ops, from which :func:`op_rows` derives the ``ops`` table rows.

Run ``status`` (one table, :data:`STATUSES`; the first that applies wins):

* ``malformed`` -- a file is present but unreadable: test.yaml is not YAML or not a mapping, results.json is
  not a JSON object, or a history line other than a torn last line is not a JSON op;
* ``crashed``   -- results.json says the run crashed (``crashed`` is set);
* ``partial``   -- the run is half-written: results.json or history.jsonl is missing, or the history's last
  line is torn (the writer died mid-line; the torn line is dropped);
* ``ok``        -- everything is present and readable.

``problems`` lists every finding in words, so the ingest job can report them.  Parsing never raises on
bad content: a bad run becomes a row with a status, never a crashed job.

A run directory holding :data:`LOST_ATTEMPT_FILE` is not a run at all: it is an attempt whose host was lost
mid-run, which the fleet ran again with the same seed (:mod:`harness.fleet`).  Discovery skips it, so it is never
ingested, gated or counted twice.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import yaml

from spark_analysis.faults import FaultWindow, fault_windows
from spark_analysis.recovery import WindowRecovery, window_recovery

__all__ = [
    "LOST_ATTEMPT_FILE", "STATUSES", "OpColumns", "ParsedRun", "RunTexts", "availability_field",
    "fault_figures_field", "mode_fields",
    "op_columns", "op_rows", "parse_history_text", "parse_run", "provenance_fields", "run_href", "spec_fields",
    "verdict_text",
]

STATUSES = ("ok", "crashed", "partial", "malformed")
LOST_ATTEMPT_FILE = "lost-attempt.json"  # the mark of a lost attempt's run directory (module docstring)
_TIMING_KEYS = ("time_s", "elapsed_s", "duration_s", "check_time_s")
_VERSION_KEYS = ("cluster_version", "version")
_GIT_KEYS = ("git_revision", "git_rev", "revision", "git_commit", "commit")


@dataclass(frozen=True, slots=True)
class RunTexts:
    """The raw contents of a run's files (None: the file does not exist)."""

    test_yaml: str | None
    results_json: str | None
    history_jsonl: str | None


@dataclass
class ParsedRun:
    run: dict[str, Any]
    ops: list[dict[str, Any]] = field(default_factory=list)
    raws: list[str] = field(default_factory=list)  # the history line of each op, as recorded
    faults: list[FaultWindow] = field(default_factory=list)
    recovery: list[WindowRecovery] = field(default_factory=list)  # one per fault window, same order
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)


def verdict_text(valid: Any) -> str:
    """``"true"`` / ``"false"`` / ``"unknown"`` for a results.json ``valid`` value."""
    if valid is True:
        return "true"
    if valid is False:
        return "false"
    return "unknown"


def run_href(run_id: str) -> str:
    """Where ``splitbrain serve`` shows the run ``<test>/<ts>``: ``/run/<run dir relative to the results root>/``.

    Root-relative, so the link works from the dashboard wherever ``serve`` hosts it (``/dashboard/``).
    """
    return f"/run/{quote(run_id, safe='/')}/"


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _first(d: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = d.get(k)
        if v is not None and v != "":
            return v
    return None


def _names(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, Mapping):
        if "name" in raw:
            return [str(raw["name"])]
        if "packages" in raw:
            return _names(raw["packages"])
        return [str(k) for k in raw]
    if isinstance(raw, list | tuple):
        out: list[str] = []
        for x in raw:
            out.extend(_names(x))
        return out
    return [str(raw)]


def _num(x: Any, cast: type) -> Any:
    try:
        return None if x is None or isinstance(x, bool) else cast(x)
    except (TypeError, ValueError):
        return None


def spec_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec columns of a run row from a test.yaml mapping (missing keys give None / empty lists)."""
    workloads = _names(spec.get("workloads", spec.get("workload")))
    packages = _names(spec.get("nemesis"))
    cluster = _mapping(spec.get("cluster"))
    git = _mapping(spec.get("git"))
    canonical = {k: v for k, v in spec.items() if k not in ("seed", "source")}
    return {
        "name": None if spec.get("name") is None else str(spec.get("name")),
        "workloads": workloads,
        "workload": "+".join(workloads) or ("none" if spec else "unknown"),
        "nemesis_packages": packages,
        "nemesis": "+".join(packages) or ("none" if spec else "unknown"),
        "backend": None if spec.get("backend") is None else str(spec.get("backend")),
        "seed": _num(spec.get("seed"), int),
        "concurrency": _num(spec.get("concurrency"), int),
        "rate": _num(spec.get("rate"), float),
        "time_limit_s": _num(spec.get("time_limit_s", spec.get("time_limit")), float),
        "cluster_version": _first(spec, _VERSION_KEYS) or _first(cluster, ("version",) + _VERSION_KEYS),
        "git_revision": _first(spec, _GIT_KEYS) or _first(git, ("commit", "revision")),
        "spec_key": hashlib.sha1(json.dumps(canonical, sort_keys=True, default=str).encode()).hexdigest()[:16],
    }


def availability_field(res: Mapping[str, Any]) -> str | None:
    """The availability checker's verdict (``true`` / ``false`` / ``unknown``) from results.json, None when the run
    was judged without it (turned off, or a run from before the verdict existed)."""
    entry = _mapping(res.get("checkers")).get("availability")
    return verdict_text(entry.get("valid")) if isinstance(entry, Mapping) else None


def fault_figures_field(res: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> str | None:
    """The run's figures per fault kind as JSON (``{kind: {recovery_s, unavailable_s, p99_latency_ms}}``): the
    per-run checker's own (results.json ``perf.by_fault_kind``), or for a run recorded before it wrote them the same
    function on the history (:func:`checker.perf.fault_kind_figures`); None when the run had no fault window."""
    recorded = _mapping(res.get("perf")).get("by_fault_kind")
    if isinstance(recorded, Mapping):
        return json.dumps(recorded, sort_keys=True) if recorded else None
    # imported here: checker.perf also holds the plots, and matplotlib would slow every `import spark_analysis`
    from checker.perf import WRITE_FS, fault_kind_figures, latency_points, nemesis_windows

    client = [o for o in ops if "process" in o and "type" in o and "f" in o and "time" in o and "index" in o]
    try:
        figures = fault_kind_figures(latency_points(client), nemesis_windows(client), write_fs=WRITE_FS,
                                     end_s=max((float(o["time"]) / 1e9 for o in client), default=0.0))
    except (TypeError, ValueError, KeyError):
        return None  # a history too damaged to pair ops: no figures, never a failed ingest
    return json.dumps({k: v.to_dict() for k, v in figures.items()}, sort_keys=True) if figures else None


def mode_fields(spec: Mapping[str, Any], res: Mapping[str, Any]) -> dict[str, Any]:
    """``nemesis_mode`` (results.json's, else the spec's ``nemesis.mode``, else ``random``: runs from before
    guided mode were random) and ``coverage_points`` (None when the run observed no events)."""
    mode = res.get("nemesis_mode") or _mapping(spec.get("nemesis")).get("mode") or "random"
    return {"nemesis_mode": str(mode), "coverage_points": _num(_mapping(res.get("coverage")).get("points"), int)}


def provenance_fields(res: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance columns of a run row from results.json's ``provenance`` object (None when absent).

    Keys: sut_version, revision_dirty, harness_version, harness_revision, host, backend (the harness's
    shape: :mod:`harness.provenance`).  A ``revision`` of ``"unknown"`` stays ``"unknown"``.
    """
    prov = _mapping(res.get("provenance"))
    sut, harness = _mapping(prov.get("sut")), _mapping(prov.get("harness"))

    def text(x: Any) -> str | None:
        return None if x is None or x == "" else str(x)

    dirty = sut.get("dirty")
    return {
        "sut_version": text(sut.get("version")), "revision_dirty": dirty if isinstance(dirty, bool) else None,
        "harness_version": text(harness.get("version")), "harness_revision": text(harness.get("revision")),
        "host": text(prov.get("host")), "backend": text(prov.get("backend")),
    }


def _parse_time(x: Any) -> _dt.datetime | None:
    if isinstance(x, int | float) and not isinstance(x, bool):
        return _dt.datetime.fromtimestamp(float(x), _dt.UTC)
    if isinstance(x, str):
        for fmt in ("%Y%m%dT%H%M%S.%fZ", "%Y%m%dT%H%M%SZ"):
            try:
                return _dt.datetime.strptime(x.split("-")[0] if x.count("-") == 1 else x, fmt).replace(tzinfo=_dt.UTC)
            except ValueError:
                pass
        try:
            t = _dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
            return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)
        except ValueError:
            return None
    return None


def _op_ok(d: Any, pos: int) -> dict[str, Any]:
    if not isinstance(d, dict) or "type" not in d or "f" not in d:
        raise ValueError("not an op object with 'type' and 'f'")
    d["index"] = int(d.get("index", pos))
    d["time"] = int(d.get("time", 0))
    return d


def parse_history_text(text: str, problems: list[str]) -> tuple[list[dict[str, Any]], list[str], bool, bool]:
    """(ops, raw lines, torn, malformed).  Only a last line without a newline may be torn.

    Fast path: the whole file is decoded as one JSON array (one C call instead of one per line); any
    failure falls back to line by line, which locates the bad line.
    """
    lines = text.split("\n")
    raws = [ln for ln in lines if ln.strip()]
    try:
        arr = json.loads("[" + ",".join(raws) + "]")
        if len(arr) == len(raws):
            return [_op_ok(d, i) for i, d in enumerate(arr)], raws, False, False
    except (ValueError, TypeError, RecursionError):
        pass
    ops: list[dict[str, Any]] = []
    kept: list[str] = []
    torn = malformed = False
    last = len(lines) - 1  # the element after the final newline ("" for a complete file)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = _op_ok(json.loads(line), len(ops))
        except (ValueError, TypeError, RecursionError) as exc:
            if i == last:
                torn = True
                problems.append(f"history.jsonl: torn last line {i + 1} dropped")
                break
            malformed = True
            problems.append(f"history.jsonl:{i + 1}: not a JSON op ({exc}); history cut here")
            break
        ops.append(d)
        kept.append(line)
    return ops, kept, torn, malformed


def _checks_and_anomalies(run_id: str, res: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    checkers = _mapping(res.get("checkers"))
    checks = []
    summed: dict[str, int] = {}
    for name, c in checkers.items():
        c = c if isinstance(c, Mapping) else {}
        stats = _mapping(c.get("stats"))
        counts = _mapping(c.get("anomaly_counts"))
        for t, n in counts.items():
            summed[str(t)] = summed.get(str(t), 0) + (_num(n, int) or 0)
        checks.append({
            "run_id": run_id, "checker": str(name), "valid": verdict_text(c.get("valid")),
            "time_s": _num(_first(stats, _TIMING_KEYS) or _first(c, _TIMING_KEYS), float),
            "anomaly_count": sum(int(_num(n, int) or 0) for n in counts.values()),
        })
    top = res.get("anomaly_counts") if isinstance(res.get("anomaly_counts"), Mapping) else summed
    assert isinstance(top, Mapping)
    examples = _mapping(res.get("anomaly_examples"))
    anomalies = []
    for t, n in sorted(top.items()):
        count = _num(n, int) or 0
        if count <= 0:
            continue
        ex = examples.get(t)
        example = json.dumps(ex[0], sort_keys=True, default=str) if isinstance(ex, list) and ex else None
        anomalies.append({"run_id": run_id, "type": str(t), "count": count, "example": example})
    return checks, anomalies


def parse_run(run_id: str, root: str, path: str, texts: RunTexts, *, batch_id: str = "") -> ParsedRun:
    """Parse one run's files into rows.  Never raises on bad content (see the module docstring)."""
    problems: list[str] = []
    malformed = partial = crashed = False
    spec: Mapping[str, Any] = {}
    if texts.test_yaml is None:
        problems.append("test.yaml: missing")
        partial = True
    else:
        try:
            loaded = yaml.safe_load(texts.test_yaml)
            if not isinstance(loaded, Mapping):
                raise ValueError(f"expected a mapping, found {type(loaded).__name__}")
            spec = loaded
        except (yaml.YAMLError, ValueError) as exc:
            malformed = True
            problems.append(f"test.yaml: not a YAML mapping ({str(exc).splitlines()[0]})")
    res: Mapping[str, Any] = {}
    if texts.results_json is None:
        problems.append("results.json: missing (run unfinished or crashed before writing it)")
        partial = True
    else:
        try:
            loaded = json.loads(texts.results_json)
            if not isinstance(loaded, Mapping):
                raise ValueError(f"expected an object, found {type(loaded).__name__}")
            res = loaded
        except ValueError as exc:
            malformed = True
            problems.append(f"results.json: not a JSON object ({exc})")
    if res.get("crashed"):
        crashed = True
        problems.append(f"results.json: run crashed: {str(res.get('crashed'))[:200]}")
    ops: list[dict[str, Any]] = []
    raws: list[str] = []
    if texts.history_jsonl is None:
        problems.append("history.jsonl: missing")
        partial = True
    else:
        ops, raws, torn, bad = parse_history_text(texts.history_jsonl, problems)
        partial = partial or torn
        malformed = malformed or bad
    status = "malformed" if malformed else "crashed" if crashed else "partial" if partial else "ok"

    fields = spec_fields(spec)
    test, _, ts = run_id.rpartition("/")
    if not fields["cluster_version"]:
        fields["cluster_version"] = _first(res, _VERSION_KEYS)
    if not fields["git_revision"]:
        fields["git_revision"] = _first(res, _GIT_KEYS)
    prov = provenance_fields(res)
    if not fields["backend"]:
        fields["backend"] = prov.pop("backend")
    prov.pop("backend", None)
    start = _parse_time(_first(res, ("start_time", "started_at"))) or _parse_time(ts)
    last_ns = ops[-1]["time"] if ops else 0
    duration_s = _num(res.get("duration_s"), float)
    if duration_s is None and ops:
        duration_s = last_ns / 1e9
    windows = fault_windows((o for o in ops if o.get("process") == "nemesis"), last_time_ns=last_ns)
    checks, anomalies = _checks_and_anomalies(run_id, res)
    accounted = [o for o in ops if o.get("process") == "nemesis" and o.get("type") != "invoke" and "effective" in o]
    run = {
        "run_id": run_id, "test": test, "ts": ts, "root": root, "path": path, "href": run_href(run_id),
        **{k: v for k, v in fields.items()},
        "start_time": start, "date": start.strftime("%Y-%m-%d") if start else "unknown",
        "duration_s": duration_s, "valid": verdict_text(res.get("valid")) if res else "unknown",
        "status": status, "problems": problems, "op_count": len(ops),
        "client_op_count": sum(1 for o in ops if o.get("process") != "nemesis"),
        "fault_count": len(windows),
        "faults_requested": len(accounted) if accounted else None,  # None: a run from before fault accounting
        "faults_not_effective": sum(1 for o in accounted if o.get("effective") is False) if accounted else None,
        "anomaly_count": sum(a["count"] for a in anomalies), "batch_id": batch_id,
        **prov, **mode_fields(spec, res), "availability": availability_field(res),
        "fault_figures": fault_figures_field(res, ops),
    }
    if not run["name"]:
        run["name"] = test
    return ParsedRun(run=run, ops=ops, raws=raws, faults=windows, recovery=window_recovery(ops, windows),
                     anomalies=anomalies, checks=checks)


def _json_or_none(x: Any) -> str | None:
    return None if x is None else x if isinstance(x, str) else json.dumps(x, separators=(",", ":"), default=str)


OpColumns = dict[tuple[str, str], list[list[Any]]]
_N_COLS = 14  # OPS columns before the partition columns (date, workload)


def op_columns(parsed: ParsedRun) -> OpColumns:
    """The ``ops`` table of a run, column-wise, per (date, workload) partition.

    Columns in :data:`spark_analysis.tables.OPS` order without ``date`` and ``workload``.  ``op_json`` is the
    op's history line as recorded.  Each completion carries ``latency_ns`` and ``invoke_ns`` (its invoke's
    time); ``fault_seq`` is the epoch of the op's own time; ``fault_kind`` is the kind of a window containing
    the op's invoke time (the op ran *under fault*), else None.
    """
    run = parsed.run
    starts = [w.start_ns for w in parsed.faults]
    windows = parsed.faults
    reach: list[int] = []  # reach[s]: the latest end of windows 0..s (stops the backward scan early)
    for w in windows:
        reach.append(max(w.end_ns, reach[-1]) if reach else w.end_ns)
    open_invokes: dict[Any, int] = {}
    run_id, date, workload = run["run_id"], run["date"], run["workload"]
    groups: OpColumns = {}
    cols: list[list[Any]] = []
    key: tuple[str, str] | None = None
    for d, raw in zip(parsed.ops, parsed.raws):
        t = d["time"]
        process = d.get("process")
        typ = d.get("type")
        is_nemesis = process == "nemesis"
        latency = invoke_ns = None
        at = t
        if not is_nemesis:
            if typ == "invoke":
                open_invokes[process] = t
            else:
                inv = open_invokes.pop(process, None)
                if inv is not None:
                    invoke_ns, latency, at = inv, t - inv, inv
        kind = None
        if starts:
            s = bisect_right(starts, at) - 1
            while s >= 0 and reach[s] >= at:
                w = windows[s]
                if w.start_ns <= at <= w.end_ns:
                    kind = w.kind
                    break
                s -= 1
        k = (date, str(d.get("workload") or workload))
        if k != key:
            key = k
            cols = groups.setdefault(k, [[] for _ in range(_N_COLS)])
        node, error = d.get("node"), d.get("error")
        for i, v in enumerate((
            run_id, d["index"], t, str(typ), str(process), str(d.get("f")),
            node if node is None or isinstance(node, str) else _json_or_none(node),
            error if error is None or isinstance(error, str) else _json_or_none(error),
            raw, is_nemesis, latency, invoke_ns, bisect_right(starts, t) - 1, kind,
        )):
            cols[i].append(v)
    return groups


def op_rows(parsed: ParsedRun) -> Iterator[tuple[Any, ...]]:
    """The ``ops`` rows of a run as tuples in :data:`spark_analysis.tables.OPS` order (see :func:`op_columns`)."""
    for (date, workload), cols in op_columns(parsed).items():
        for row in zip(*cols):
            yield (*row, date, workload)
