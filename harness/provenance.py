"""Provenance of a run: which build of the cluster was tested, by which harness, where.

Every ``results.json`` carries a ``provenance`` object and two flat keys the Spark warehouse groups by::

    "cluster_version": "0.3.0-rc1",      # the spec's cluster.version label, else the system under test's version
    "git_revision": "f386efd…",          # the system under test's source revision, or "unknown"
    "provenance": {
      "sut":     {"name": "splitbrain", "version": "0.1.0", "revision": "f386efd…", "dirty": false,
                  "revision_error": null, "build": "checkout"},
      "harness": {"version": "0.1.0", "revision": "f386efd…", "dirty": false, "revision_error": null},
      "cluster_version_label": "0.3.0-rc1",   # null when the spec has no cluster.version
      "host": "ci-7", "backend": "docker", "python": "3.11.2"
    }

*Revision* is ``git rev-parse HEAD`` of the checkout the code was imported from; ``dirty`` says the work tree
had uncommitted changes to tracked files (the run tested something no commit holds).  When it cannot be
known the revision is ``"unknown"`` and ``revision_error`` says why (git missing, not a checkout, timeout).
The system's part is what its adapter says (:class:`SutSource`, offered as ``sut_source``: :func:`sut_source_of`;
ours, :data:`systems.splitbrain.revision.REVISIONS`, describes the checkout ``system_under_test`` was imported
from); an adapter that says nothing gets the harness's checkout, as every run did before adapters.
The nodes run this same checkout (``"build": "checkout"``): directly on the local backend, through the node image
rebuilt whenever the work tree's source digest changes on docker, through the wheel the ssh backend installs (unless
its nodes file says ``install: false``, in which case the nodes' own install is not inspected) -- unless the spec
names ``cluster.revision``: then the nodes run that commit's build (:mod:`harness.revisions`), the cluster's part
says ``"build": "revision"`` with that commit, its version and the requests it lacks (``missing_requests``), and
the harness's part still describes this checkout.

:func:`provenance_record` is pure (it assembles the facts it is given); :func:`collect_provenance` is the
shell that asks git, the package metadata and the host.
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["DIST_NAME", "OffersSutSource", "Revision", "SutSource", "collect_provenance", "git_revision",
           "package_version", "provenance_record", "sut_source_of"]

DIST_NAME = "splitbrain"
UNKNOWN = "unknown"
_GIT_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Revision:
    """A source revision, or ``unknown`` with the reason in ``error``."""

    revision: str
    dirty: bool | None = None
    error: str | None = None


class SutSource(Protocol):
    """Where the system under test's code came from, for a run whose nodes run this checkout (no
    ``cluster.revision``); the system's adapter provides it."""

    def sut_version(self) -> str:
        """The version of the system's code."""
        ...

    def sut_revision(self) -> Revision:
        """The source revision of the system's code (``unknown`` with the reason when it cannot be known)."""
        ...


@runtime_checkable
class OffersSutSource(Protocol):
    """A system adapter that says where its code came from (``sut_source``)."""

    @property
    def sut_source(self) -> SutSource:
        ...


def sut_source_of(system: object) -> SutSource | None:
    """The :class:`SutSource` a system adapter offers, or None (the harness's checkout stands in)."""
    return system.sut_source if isinstance(system, OffersSutSource) else None


def provenance_record(*, sut_version: str, sut_revision: Revision, harness_version: str,
                      harness_revision: Revision, label: str | None, host: str, backend: str,
                      python: str) -> dict[str, Any]:
    """The ``results.json`` keys of a run's provenance (see the module docstring)."""

    def part(version: str, rev: Revision) -> dict[str, Any]:
        return {"version": version, "revision": rev.revision, "dirty": rev.dirty, "revision_error": rev.error}

    return {
        "cluster_version": label or sut_version,
        "git_revision": sut_revision.revision,
        "provenance": {
            "sut": {"name": DIST_NAME, **part(sut_version, sut_revision)},
            "harness": part(harness_version, harness_revision),
            "cluster_version_label": label, "host": host, "backend": backend, "python": python,
        },
    }


@lru_cache(maxsize=8)
def git_revision(directory: str) -> Revision:
    """``git rev-parse HEAD`` of the checkout holding ``directory`` and whether tracked files differ from it."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)

    try:
        head = git("rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            why = (head.stderr.strip().splitlines() or ["git rev-parse failed"])[-1]
            return Revision(UNKNOWN, None, f"{directory} is not in a git checkout with a commit ({why})")
        status = git("status", "--porcelain", "--untracked-files=no")
    except FileNotFoundError:
        return Revision(UNKNOWN, None, "git is not installed (not on PATH)")
    except subprocess.TimeoutExpired:
        return Revision(UNKNOWN, None, f"git did not answer within {_GIT_TIMEOUT_S:.0f} s in {directory}")
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return Revision(head.stdout.strip(), dirty, None if status.returncode == 0 else "git status failed")


@lru_cache(maxsize=1)
def package_version() -> str:
    """The installed distribution's version, else pyproject.toml's next to the code, else ``unknown``."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():  # a checkout: its own pyproject wins over whatever else is installed
        import tomllib

        try:
            return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
        except (OSError, ValueError, KeyError):
            pass
    try:
        return importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def collect_provenance(*, label: str | None, backend: str, sut_revision: str | None = None,
                       source: SutSource | None = None) -> dict[str, Any]:
    """The provenance of a run started now from this process (asks git once per process and checkout).

    ``source``: where the system's code came from (its adapter's :class:`SutSource`; None: the harness's own
    checkout).  ``sut_revision``: the full sha of the build the nodes ran (``cluster.revision``,
    :mod:`harness.revisions`); the cluster's part then describes that build (its version, its commit,
    ``"build": "revision"``) instead of this checkout, and ``git_revision`` is that commit.
    """
    import harness

    version = package_version()
    harness_revision = git_revision(str(Path(harness.__file__).resolve().parent))
    record = provenance_record(
        sut_version=version if source is None else source.sut_version(),
        sut_revision=harness_revision if source is None else source.sut_revision(),
        harness_version=version, harness_revision=harness_revision,
        label=label, host=socket.gethostname(), backend=backend, python=platform.python_version(),
    )
    if sut_revision is None:
        record["provenance"]["sut"]["build"] = "checkout"
        return record
    from harness.revisions import build_record, load_build

    build = load_build(sut_revision)
    sut = ({"version": UNKNOWN, "revision": sut_revision, "dirty": False, "build": "revision",
            "revision_error": "the build of this revision is no longer in the cache"} if build is None
           else build_record(build))
    record["provenance"]["sut"] = {"name": DIST_NAME, **sut}
    record["git_revision"] = sut_revision
    if label is None:
        record["cluster_version"] = sut["version"]
    return record
