"""The cluster at another git revision: its builds, their cache, and whether the harness can speak to them.

Vocabulary:

* **revision** -- a commit of *this* repository, named as git names it (``v0.3``, ``HEAD~4``, a sha, a branch).
  :func:`resolve_revision` turns it into the full commit sha; everything below is keyed by that sha, never by
  the name (a branch moves; a build must not).
* **build** -- the cluster code of one revision, ready to run as nodes: the revision's tree exported with
  ``git archive`` into the cache (``<cache>/<sha>/src``), a virtual environment of its own beside it
  (``<cache>/<sha>/venv``) whose ``site-packages`` holds one ``.pth`` line for that source tree and one for each of
  the harness interpreter's own ``site-packages`` (where msgpack, uvloop, ... already are: nothing is downloaded),
  every module byte-compiled (a syntax error is "does not build"), and an import check run by the venv's
  interpreter in isolated mode (``-I``: no working directory, no ``PYTHONPATH``, no user site), which also proves
  that ``system_under_test`` comes from the revision's tree and not from the harness's checkout.  The nodes of a
  run then start as ``<venv>/bin/python -I -m harness.cli controller|broker ...``: the *revision's* node
  commands, while clients, nemeses, generators and checkers stay the harness's.  ``build.json`` is written last;
  a directory without it is a build that died half-way and is built again.  Concurrent builders of one
  revision (``test-all --jobs``, several Spark tasks on one host) take a file lock; the second reuses the first's.
  The docker backend builds a node image tagged with the revision from the same exported tree
  (:func:`harness.images.ensure_revision_image`); the ssh backend uploads it (:mod:`harness.control.ssh`).
* **wire compatibility** -- decided *before* the run, statically, from both revisions' own protocol tables
  (``system_under_test/protocol``: request and response codes, frame kinds, request header schemas), which the
  revision's interpreter prints as JSON (:data:`WIRE_PROBE`, which uses only names the protocol package has had
  since its first commit).  :func:`wire_differences` is the rule: a code both sides know must carry the same
  number, both directions; frame kinds must agree; for every request both know, each field the harness always
  sends (required in its schema) must be one the revision's schema accepts (servers reject unknown header fields),
  every field both know must have the same type, and each field the revision requires must be one the harness can
  send.  Any of those is a refusal naming the revision and the first differences.  Requests the harness knows and
  the revision does not, and optional fields only the harness's schema has (a newer feature's), are *not* refused
  -- a run that never sends them is fine -- but they are printed and recorded in the run's provenance
  (``sut.missing_requests``, ``sut.missing_optional_fields``), so a feature that needs one (say, guided mode's event
  observation on a revision older than it) is explained, not a mystery.  There is no handshake on connect: every
  check happens before a node starts, when a refusal costs nothing.

Errors are :class:`RevisionError`, one line naming the revision and the reason; the commands print it and exit 2.

Cache root: ``$SPLITBRAIN_SUT_CACHE``, else ``$XDG_CACHE_HOME/splitbrain/revisions``, else
``~/.cache/splitbrain/revisions``.  A build is about 2 MB and a few seconds; remove the directory to start over.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import io
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BUILD_VERSION", "REPO_ROOT", "WIRE_HISTORY", "WIRE_PROBE", "RevisionError", "SutBuild", "WireReport",
    "build_record", "cache_root", "commit_with_changes", "ensure_build", "harness_wire", "legacy_wire_version",
    "load_build", "node_command", "parse_revision_text", "resolve_revision", "source_archive", "wire_differences",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_VERSION = 3  # bump when the layout of a build changes: older builds are then rebuilt
_GIT_TIMEOUT_S = 60.0
# A revision as a user may write it: what git accepts in practice for commit-ish names, minus shell and option
# characters.  A leading '-' would be read by git as an option.
_REVISION_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.~^@{}/+-]{0,199}$")
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")

# Printed by the revision's own interpreter (and exec'd by the harness for its own side): the wire tables as
# JSON.  Only names present since the protocol package's first commit, so any revision can answer.
WIRE_PROBE = r"""
import importlib.metadata, json, sys
import system_under_test
from system_under_test.protocol import codes, frame, schemas

def _members(e):
    return {m.name: int(m.value) for m in e}

def _fields(spec):
    return {name: [f.type, bool(f.required), bool(f.nullable)] for name, f in spec.items()}

def _node_flags(command):
    try:
        import argparse
        import harness.cli as cli
        parser = cli.build_parser([command])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return sorted(s for a in sub.choices[command]._actions for s in a.option_strings)
    except Exception:
        return None

try:
    _version = importlib.metadata.version("splitbrain")
except importlib.metadata.PackageNotFoundError:
    _version = None
wire = {
    "request": _members(codes.RequestCode),
    "response": _members(codes.ResponseCode),
    "kinds": _members(frame.Kind),
    "schemas": {code.name: _fields(spec) for code, spec in schemas.SCHEMAS.items()},
    "wire_version": getattr(codes, "WIRE_VERSION", None),
    "node_flags": {c: _node_flags(c) for c in ("controller", "broker")},
    "module_file": system_under_test.__file__,
    "python": sys.version.split()[0],
    "version": _version,
}
print(json.dumps(wire, sort_keys=True))
"""


class RevisionError(ValueError):
    """A revision that cannot run under this harness: it does not exist, does not build, or cannot be spoken to.
    The message is one line naming the revision and the reason."""


# -- pure ----------------------------------------------------------------------------------------------------


def parse_revision_text(text: object, *, where: str) -> str:
    """The revision name as written, checked for shape only (existence is :func:`resolve_revision`'s job).

    Raises:
        RevisionError: not a string, empty, or characters git names do not use (naming ``where``).
    """
    if not isinstance(text, str) or not _REVISION_RE.match(text):
        raise RevisionError(f"{where}: {text!r} is not a git revision name (a sha, tag, branch or an expression "
                            "such as HEAD~2: letters, digits and _ . ~ ^ @ {{ }} / + -, not starting with '-')")
    return text


@dataclass(frozen=True, slots=True)
class WireReport:
    """What :func:`wire_differences` found: ``problems`` refuse the revision; ``missing_requests`` and
    ``missing_optional_fields`` (``REQUEST.field``) do not."""

    problems: tuple[str, ...]
    missing_requests: tuple[str, ...]
    missing_optional_fields: tuple[str, ...] = ()

    @property
    def compatible(self) -> bool:
        return not self.problems


def _code_problems(what: str, ours: Mapping[str, int], theirs: Mapping[str, int]) -> list[str]:
    out = [f"{what} {name} is {ours[name]} here but {theirs[name]} there"
           for name in sorted(ours.keys() & theirs.keys()) if ours[name] != theirs[name]]
    by_number = {v: k for k, v in theirs.items()}
    out += [f"{what} number {num} is {name} here but {by_number[num]} there"
            for name, num in sorted(ours.items(), key=lambda kv: kv[1])
            if num in by_number and by_number[num] != name and name not in theirs]
    return out


def wire_differences(harness: Mapping[str, Any], sut: Mapping[str, Any],
                     used_flags: Mapping[str, Collection[str]] | None = None) -> WireReport:
    """Can the harness's clients speak to a cluster whose wire tables are ``sut``, and can the harness start its
    nodes?  (Rule: module docstring.)

    Both tables are :data:`WIRE_PROBE` outputs (``request``, ``response``, ``kinds``, ``schemas``,
    ``wire_version``, ``node_flags``); ``used_flags`` are the options the harness passes to each node command
    (:func:`harness.cluster.node_flags_used`), checked against the revision's ``node_flags`` when given.
    """
    problems: list[str] = []
    optional: list[str] = []
    if harness.get("wire_version") != sut.get("wire_version"):
        problems.append(f"wire version {sut.get('wire_version')} (message bodies or frames differ from this "
                        f"harness's version {harness.get('wire_version')})")
    problems += _code_problems("request", harness["request"], sut["request"])
    problems += _code_problems("response", harness["response"], sut["response"])
    if dict(harness["kinds"]) != dict(sut["kinds"]):
        problems.append(f"frame kinds differ ({dict(harness['kinds'])} here, {dict(sut['kinds'])} there)")
    ours_s: Mapping[str, Mapping[str, list[Any]]] = harness["schemas"]
    theirs_s: Mapping[str, Mapping[str, list[Any]]] = sut["schemas"]
    for name in sorted(ours_s.keys() & theirs_s.keys()):
        ours, theirs = ours_s[name], theirs_s[name]
        for field in sorted(ours):
            if field not in theirs:
                if ours[field][1]:  # required: the harness always sends it, and the revision's servers reject it
                    problems.append(f"{name}: field {field!r} is always sent by the harness but is not in the "
                                    "revision's schema (its servers reject unknown fields)")
                else:  # optional and newer than the revision: only a feature that sends it would be refused
                    optional.append(f"{name}.{field}")
            elif ours[field][0] != theirs[field][0]:
                problems.append(f"{name}: field {field!r} is {ours[field][0]} here but {theirs[field][0]} there")
        for field in sorted(theirs):
            if theirs[field][1] and field not in ours:
                problems.append(f"{name}: the revision requires field {field!r}, which the harness never sends")
    for command, flags in sorted((used_flags or {}).items()):
        known = (sut.get("node_flags") or {}).get(command)
        if known is None:
            problems.append(f"its {command} command's options cannot be listed (harness.cli.build_parser)")
            continue
        lacking = sorted(set(flags) - set(known))
        if lacking:
            problems.append(f"its {command} command does not take {', '.join(lacking)}, which the harness passes")
    missing = tuple(sorted(set(harness["request"]) - set(sut["request"])))
    return WireReport(tuple(problems), missing, tuple(optional))


# Wire versions of the commits made before ``WIRE_VERSION`` existed in system_under_test/protocol/codes.py: a
# revision that lacks the constant speaks the highest version whose commit it contains (0 if none).  Each row is
# the commit that changed message bodies or frames.
WIRE_HISTORY: tuple[tuple[int, str], ...] = (
    (1, "374781fca45a33b0489eb1d1ba7b0b05af01697a"),  # PULL_MESSAGE replies carry raw record frames, not a list
)


def legacy_wire_version(contains: Callable[[str], bool]) -> int:
    """The wire version of a revision without ``WIRE_VERSION``: ``contains(sha)`` says whether it has that commit."""
    return max((v for v, sha in WIRE_HISTORY if contains(sha)), default=0)


@dataclass(frozen=True, slots=True)
class SutBuild:
    """One revision's build in the cache (see the module docstring)."""

    revision: str  # the full commit sha
    directory: Path  # <cache>/<sha>
    version: str  # the revision's pyproject version
    missing_requests: tuple[str, ...]
    missing_optional_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _SHA_RE.match(self.revision):
            raise ValueError(f"SutBuild.revision: expected a full 40-hex-digit commit sha, got {self.revision!r}")

    @property
    def python(self) -> Path:
        return self.directory / "venv" / "bin" / "python"

    @property
    def source(self) -> Path:
        return self.directory / "src"

    @property
    def short(self) -> str:
        return self.revision[:12]


def node_command(python: str) -> list[str]:
    """How a node starts the revision's node commands: its interpreter in isolated mode (``-I``: the working
    directory and ``PYTHONPATH`` -- which the docker backend points at the harness's checkout -- are ignored)."""
    return [python, "-I", "-m", "harness.cli"]


def build_record(build: SutBuild) -> dict[str, Any]:
    """The provenance of a run's cluster build (``results.json``'s ``provenance.sut``): the revision's own
    version and commit, never dirty (it is a commit), and the requests it lacks."""
    return {"version": build.version, "revision": build.revision, "dirty": False, "revision_error": None,
            "build": "revision", "missing_requests": list(build.missing_requests),
            "missing_optional_fields": list(build.missing_optional_fields)}


# -- shell ---------------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Where builds live (module docstring); created on first use."""
    explicit = os.environ.get("SPLITBRAIN_SUT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "splitbrain" / "revisions"


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess[Any]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary,
                              timeout=_GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise RevisionError("git is not installed (not on PATH); a revision of the cluster needs it") from None
    except subprocess.TimeoutExpired:
        raise RevisionError(f"git did not answer within {_GIT_TIMEOUT_S:.0f} s in {repo}") from None


def resolve_revision(rev: str, *, repo: Path = REPO_ROOT) -> str:
    """The full sha of commit ``rev`` in ``repo``.

    Raises:
        RevisionError: a malformed name, or no such commit (one line naming ``rev``).
    """
    parse_revision_text(rev, where="revision")
    res = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    sha = res.stdout.strip() if res.returncode == 0 else ""
    if not _SHA_RE.match(sha):
        why = (res.stderr.strip().splitlines() or ["no such commit"])[-1]
        raise RevisionError(f"revision {rev}: not a commit of the repository at {repo} ({why})")
    return sha


def source_archive(sha: str, *, repo: Path = REPO_ROOT) -> bytes:
    """``git archive`` of commit ``sha`` as an uncompressed tar (what every backend's build starts from)."""
    res = _git(repo, "archive", "--format=tar", sha, binary=True)
    if res.returncode != 0:
        why = res.stderr.decode("utf-8", "replace").strip().splitlines() or ["git archive failed"]
        raise RevisionError(f"revision {sha[:12]}: cannot export its tree ({why[-1]})")
    return bytes(res.stdout)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pyproject_version(src: Path, rev: str) -> str:
    import tomllib

    try:
        return str(tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise RevisionError(f"revision {rev}: does not build: pyproject.toml has no project.version ({exc})") from None


def _harness_site_dirs() -> list[str]:
    """The harness interpreter's site-packages, where the revision finds its dependencies."""
    dirs = [*site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def _probe(python: Path, rev: str) -> dict[str, Any]:
    """Run :data:`WIRE_PROBE` with the build's interpreter, isolated, from a neutral directory."""
    try:
        res = subprocess.run([str(python), "-I", "-c", WIRE_PROBE], capture_output=True, text=True, timeout=120,
                             cwd=python.parent, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RevisionError(f"revision {rev}: does not build: its interpreter did not run ({exc})") from None
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise RevisionError(f"revision {rev}: does not build: importing its protocol failed ({last})")
    try:
        out: dict[str, Any] = json.loads(res.stdout)
    except ValueError:
        raise RevisionError(f"revision {rev}: does not build: its protocol probe printed no JSON") from None
    return out


def _build(directory: Path, sha: str, rev: str, repo: Path) -> dict[str, Any]:
    """Build ``sha`` into ``directory`` (emptied first); returns the facts ``build.json`` records."""
    if directory.exists():
        shutil.rmtree(directory)
    src = directory / "src"
    src.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(source_archive(sha, repo=repo)), mode="r:") as tar:
        tar.extractall(src, filter="data")
    if not (src / "system_under_test").is_dir():
        raise RevisionError(f"revision {rev}: does not build: its tree has no system_under_test package")
    version = _pyproject_version(src, rev)
    bad: list[str] = []
    for pkg in ("system_under_test", "harness"):
        if (src / pkg).is_dir() and not compileall.compile_dir(str(src / pkg), quiet=2, workers=1):
            bad.append(pkg)
    if bad:
        raise RevisionError(f"revision {rev}: does not build: {', '.join(bad)} has files that do not compile")
    venv = directory / "venv"
    res = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True,
                         timeout=120, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise RevisionError(f"revision {rev}: cannot create its virtual environment: {res.stderr.strip()[-300:]}")
    purelib = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    # Sorted first: the revision's tree, then the harness's site-packages (dependencies only: .pth files there,
    # such as the harness checkout's editable finder, are not run for directories a .pth line adds).
    Path(purelib, "_splitbrain_sut.pth").write_text(
        "\n".join([str(src), *_harness_site_dirs()]) + "\n", encoding="utf-8")
    wire = _probe(venv / "bin" / "python", rev)
    if not str(wire.get("module_file", "")).startswith(str(src) + os.sep):
        raise RevisionError(f"revision {rev}: does not build: its interpreter imported system_under_test from "
                            f"{wire.get('module_file')}, not from the revision's tree")
    return {"build_version": BUILD_VERSION, "revision": sha, "version": version, "wire": wire}


def commit_with_changes(changes: Mapping[str, bytes], *, message: str, base: str = "HEAD",
                        repo: Path = REPO_ROOT) -> str:
    """A new commit object whose tree is ``base``'s with the files in ``changes`` (repository-relative path ->
    new content) replaced, made with git's plumbing in a temporary index: the work tree, the real index and every
    ref are left as they are.  Returns its sha, a revision :func:`ensure_build` can build (tests make throwaway
    regressions this way; ``git gc`` may drop an unreferenced one after its grace period).

    Raises:
        RevisionError: ``base`` is not a commit, a path is not in its tree, or git failed.
    """
    import tempfile

    parent = resolve_revision(base, repo=repo)
    with tempfile.TemporaryDirectory(prefix="splitbrain-index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}

        def git(*args: str, data: bytes | None = None) -> str:
            res = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, env=env,
                                 timeout=_GIT_TIMEOUT_S, check=False)
            if res.returncode != 0:
                raise RevisionError(f"revision {base}: git {args[0]} failed while making a commit: "
                                    f"{res.stderr.decode('utf-8', 'replace').strip()[-300:]}")
            return res.stdout.decode("utf-8").strip()

        git("read-tree", parent)
        for path, content in changes.items():
            listed = git("ls-files", "-s", "--", path).split()
            if not listed:
                raise RevisionError(f"revision {base}: {path} is not a file of its tree")
            blob = git("hash-object", "-w", "--stdin", data=content)
            git("update-index", "--cacheinfo", f"{listed[0]},{blob},{path}")
        tree = git("write-tree")
        ident = {"GIT_AUTHOR_NAME": "splitbrain", "GIT_AUTHOR_EMAIL": "splitbrain@localhost",
                 "GIT_COMMITTER_NAME": "splitbrain", "GIT_COMMITTER_EMAIL": "splitbrain@localhost"}
        env.update({k: os.environ.get(k, v) for k, v in ident.items()})
        return git("commit-tree", tree, "-p", parent, data=message.encode("utf-8"))


def harness_wire() -> dict[str, Any]:
    """The harness's own wire tables (the same probe, run in this process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(WIRE_PROBE, "<wire probe>", "exec"), {"__name__": "__wire_probe__"})
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


def _contains(repo: Path, sha: str, commit: str) -> bool:
    """Whether commit ``sha`` has ``commit`` in its history (itself included)."""
    return _git(repo, "merge-base", "--is-ancestor", commit, sha).returncode == 0


def load_build(sha: str, *, cache: Path | None = None) -> SutBuild | None:
    """The finished build of ``sha`` in the cache, or None (not built, half-built, or an older layout)."""
    directory = (cache or cache_root()) / sha
    try:
        rec = json.loads((directory / "build.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if rec.get("build_version") != BUILD_VERSION or rec.get("revision") != sha:
        return None
    return SutBuild(sha, directory, str(rec.get("version")), tuple(rec.get("missing_requests") or ()),
                    tuple(rec.get("missing_optional_fields") or ()))


def ensure_build(rev: str, *, repo: Path = REPO_ROOT, cache: Path | None = None,
                 node_flags: Mapping[str, Collection[str]] | None = None) -> SutBuild:
    """The build of revision ``rev``, made once per sha and reused (module docstring).

    ``node_flags``: the options the harness passes to each node command (:func:`harness.cluster.node_flags_used`),
    checked against the revision's when it is first built.

    Raises:
        RevisionError: ``rev`` is not a commit, does not build, or speaks a wire protocol the harness's clients
            cannot (one line naming the revision and the reason; nothing is left half-built under the sha).
    """
    sha = resolve_revision(rev, repo=repo)
    cache = cache or cache_root()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RevisionError(f"revision {rev}: cannot create the build cache {cache} ({exc.strerror}); "
                            "set SPLITBRAIN_SUT_CACHE to a writable directory") from None
    name = rev if rev.startswith(sha[:7]) else f"{rev} ({sha[:12]})"
    with _locked(cache / f"{sha}.lock"):
        build = load_build(sha, cache=cache)
        if build is not None:
            return build
        directory = cache / sha
        try:
            rec = _build(directory, sha, name, repo)
            if rec["wire"].get("wire_version") is None:
                rec["wire"]["wire_version"] = legacy_wire_version(lambda c: _contains(repo, sha, c))
            report = wire_differences(harness_wire(), rec["wire"], node_flags)
            if not report.compatible:
                shown = "; ".join(report.problems[:3])
                more = f" (and {len(report.problems) - 3} more)" if len(report.problems) > 3 else ""
                raise RevisionError(f"revision {name}: its wire protocol is not the harness's: {shown}{more}")
            rec["missing_requests"] = list(report.missing_requests)
            rec["missing_optional_fields"] = list(report.missing_optional_fields)
            (directory / "build.json").write_text(json.dumps(rec, indent=1, sort_keys=True), encoding="utf-8")
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
    built = load_build(sha, cache=cache)
    assert built is not None, f"build.json of {sha} was just written"
    return built
