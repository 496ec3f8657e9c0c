"""Replication lag of a run: how many records each slave was behind its master, sampled over the main phase.

Vocabulary.  A *lag sample* is one master's answer about one slave at one moment (``GET_BROKER_RUNTIME_INFO``'s
``slave_lag``, asked by :class:`harness.observe.Observer` a few times a second): ``time`` (ns on the history
clock), the broker ``set``, the ``master`` node, the slave's broker id ``slave_id`` and node ``slave`` (None
when no broker of the set answered with that id in the same round), ``records_behind`` (records in the
master's log past the slave's acked offset; None when the master could not count them cheaply: no ack yet, or
far behind), ``bytes_behind`` and ``connected``.  A slave is named ``<set>/<node>`` (``<set>/id<k>`` without a
node).

Under all-ack (the safe settings) a send is acknowledged only when every SyncStateSet member has it, so lag is
what the clients wait for; a slave outside the SyncStateSet may fall arbitrarily far behind.  The summary says
how far behind each slave was: the largest and the median sample, in records and in bytes.

Pure: samples in, a JSON-ready dict out (:func:`lag_summary`); :func:`describe_lag` is its one-line text form
for the run summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["describe_lag", "lag_summary", "percentile"]


def percentile(values: list[int], q: float) -> int | None:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-int(q * 1000) * len(ordered) // 1000))  # ceil(q * n) without float drift
    return ordered[min(rank, len(ordered)) - 1]


def _slave_name(sample: Mapping[str, Any]) -> str:
    node = sample.get("slave")
    return f"{sample.get('set')}/{node if node else 'id' + str(sample.get('slave_id'))}"


def lag_summary(samples: Iterable[Mapping[str, Any]], *, start_ns: int | None = None,
                end_ns: int | None = None) -> dict[str, Any] | None:
    """Per slave: samples, ``records_max`` / ``records_p50`` / ``records_p99`` (over samples with a count),
    ``bytes_max`` / ``bytes_p50``, and how many samples had no count (``records_unknown``) or found it
    disconnected; overall ``max_records_behind`` and ``p50_records_behind`` over every counted sample.  Only
    samples in ``[start_ns, end_ns)`` count (the main phase).  None when no sample is in it."""
    per: dict[str, dict[str, list[Any]]] = {}
    for s in samples:
        t = int(s.get("time", 0))
        if (start_ns is not None and t < start_ns) or (end_ns is not None and t >= end_ns):
            continue
        d = per.setdefault(_slave_name(s), {"records": [], "bytes": [], "unknown": [], "down": []})
        rec, by = s.get("records_behind"), s.get("bytes_behind")
        if isinstance(rec, int):
            d["records"].append(rec)
        else:
            d["unknown"].append(1)
        if isinstance(by, int):
            d["bytes"].append(by)
        if not s.get("connected", True):
            d["down"].append(1)
    if not per:
        return None
    slaves: dict[str, dict[str, Any]] = {}
    every: list[int] = []
    for name in sorted(per):
        d = per[name]
        every.extend(d["records"])
        slaves[name] = {
            "samples": len(d["records"]) + len(d["unknown"]),
            "records_max": max(d["records"], default=None), "records_p50": percentile(d["records"], 0.5),
            "records_p99": percentile(d["records"], 0.99),
            "bytes_max": max(d["bytes"], default=None), "bytes_p50": percentile(d["bytes"], 0.5),
            "records_unknown": len(d["unknown"]), "disconnected": len(d["down"]),
        }
    return {"slaves": slaves, "max_records_behind": max(every, default=None),
            "p50_records_behind": percentile(every, 0.5),
            "lagging_slaves": sum(1 for v in slaves.values() if (v["records_max"] or 0) > 0)}


def describe_lag(summary: Mapping[str, Any]) -> str:
    """One line: per slave the median and largest records behind its master."""
    parts = []
    for name, v in summary["slaves"].items():
        unknown = f", {v['records_unknown']} uncounted" if v["records_unknown"] else ""
        parts.append(f"{name} p50 {v['records_p50'] if v['records_p50'] is not None else 'n/a'} "
                     f"max {v['records_max'] if v['records_max'] is not None else 'n/a'}{unknown}")
    return (f"replication lag (records behind the master, main phase): {'; '.join(parts)}"
            f" (max {summary['max_records_behind']}, {summary['lagging_slaves']} of {len(summary['slaves'])} "
            f"slaves ever behind)")
