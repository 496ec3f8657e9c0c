"""What the build of a revision and a run's provenance need to know about our own cluster's code.

:mod:`harness.revisions` builds any commit of this repository into a cache and runs its node commands; what it
checks there is the system's business, and this module is our cluster's answer (:data:`REVISIONS`, a
:class:`harness.revisions.RevisionSystem` and a :class:`harness.provenance.SutSource`):

* **its package** -- ``system_under_test``: the revision's tree must hold it, it must compile, and the build's
  interpreter must import it from the revision's tree, not from the harness's checkout;
* **wire compatibility** -- decided *before* the run, statically, from both revisions' own protocol tables
  (``system_under_test/protocol``: request and response codes, frame kinds, request header schemas), which the
  revision's interpreter prints as JSON (:data:`WIRE_PROBE`, which uses only names the protocol package has had
  since its first commit).  :func:`wire_differences` is the rule: a code both sides know must carry the same
  number, both directions; frame kinds must agree; for every request both know, each field the harness always
  sends (required in its schema) must be one the revision's schema accepts (servers reject unknown header fields),
  every field both know must have the same type, and each field the revision requires must be one the harness can
  send; and the revision's node commands (``controller``, ``broker``) must take every flag the harness passes them.
  Any of those is a refusal naming the revision and the first differences.  Requests the harness knows and the
  revision does not, and optional fields only the harness's schema has (a newer feature's), are *not* refused -- a
  run that never sends them is fine -- but they are printed and recorded in the run's provenance
  (``sut.missing_requests``, ``sut.missing_optional_fields``), so a feature that needs one (say, guided mode's event
  observation on a revision older than it) is explained, not a mystery.  There is no handshake on connect: every
  check happens before a node starts, when a refusal costs nothing.  A revision from before ``WIRE_VERSION``
  existed gets its version from :data:`WIRE_HISTORY`;
* **provenance** -- the version and git revision of the checkout ``system_under_test`` was imported from, for a
  run that names no ``cluster.revision``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.provenance import Revision, git_revision, package_version
from harness.revisions import WireReport

__all__ = ["REVISIONS", "WIRE_HISTORY", "WIRE_PROBE", "SplitbrainRevisions", "legacy_wire_version",
           "wire_differences"]

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
    (:func:`systems.splitbrain.db.node_flags_used`), checked against the revision's ``node_flags`` when given.
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


@dataclass(frozen=True)
class SplitbrainRevisions:
    """Our cluster's answers to a revision's build (:class:`harness.revisions.RevisionSystem`) and to a run's
    provenance (:class:`harness.provenance.SutSource`); see the module docstring."""

    package: str = "system_under_test"
    probe: str = WIRE_PROBE

    def completed(self, probed: Mapping[str, Any], contains: Callable[[str], bool]) -> dict[str, Any]:
        """The probe's output with the wire version of a revision older than the constant (:data:`WIRE_HISTORY`)."""
        out = dict(probed)
        if out.get("wire_version") is None:
            out["wire_version"] = legacy_wire_version(contains)
        return out

    def compatibility(self, harness: Mapping[str, Any], revision: Mapping[str, Any],
                      node_flags: Mapping[str, Collection[str]] | None) -> WireReport:
        """:func:`wire_differences`."""
        return wire_differences(harness, revision, node_flags)

    def sut_version(self) -> str:
        """The version of the checkout the nodes run: this repository's (the cluster and the harness are one
        distribution)."""
        return package_version()

    def sut_revision(self) -> Revision:
        """The git revision of the checkout ``system_under_test`` was imported from."""
        import system_under_test

        return git_revision(str(Path(system_under_test.__file__).resolve().parent))


REVISIONS = SplitbrainRevisions()
"""Our cluster's code, as a revision's build and a run's provenance see it."""
