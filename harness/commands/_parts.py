"""From a validated spec to the runner's :class:`~harness.runner.TestParts`.

Vocabulary: a *workload* (``workloads.registry``) contributes a client, a main generator, an optional final
generator, named checkers and the op ``fs`` its client handles.  Several workloads run in one test: their
generators are mixed (:func:`harness.generator.mix`), paced at the spec's ``rate`` and routed to the client
threads; each op goes to the client of the workload whose ``fs`` holds its ``f`` (:class:`CompositeClient`);
checkers are namespaced ``<workload>/<checker>`` so two workloads may both have a checker called ``queue``.

:func:`validate_spec` checks everything a run needs *before* anything starts (cluster options, nemesis
package names and targets, what they need of the system under test (its adapter's capabilities,
:mod:`systems`), workload names and options, overlapping ``fs``) and raises ``SpecError`` naming the file, the
key and the reason; :func:`prepare` also refuses what is valid but not worth running (no
``workloads:`` key, 2 controllers: :func:`runnable_problem`).
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import yaml

import systems
from harness import generator as g
from harness.protocols import DB, SystemDB, SystemOptions
from harness.revisions import RevisionError, SutBuild, ensure_build, revision_system_of
from harness.runner import TestParts
from harness.spec import SpecError, TestSpec, load_spec

__all__ = [
    "CompositeClient", "Prepared", "RunsNodeCommands", "add_spec_arguments", "build_parts", "build_workloads",
    "check_results_root", "make_db", "namespaced_checkers", "overrides_from_args", "prepare",
    "refuse_missing_capabilities", "refuse_unservable_workloads", "runnable_problem", "system_options",
    "validate_spec",
]


# ---------------------------------------------------------------------------------------------
# Flags shared by `test`, `test-all` and `cluster up`


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The spec override flags (each maps to one key of :func:`harness.spec.apply_overrides`)."""
    p.add_argument("--nodes", help="comma list of node names (controllers first, then broker replicas)")
    p.add_argument("--time-limit", type=float, help="main phase length in seconds (spec: time_limit_s)")
    p.add_argument("--concurrency", type=int, help="client worker threads")
    p.add_argument("--rate", type=float, help="total client ops/s (mean)")
    p.add_argument("--nemesis", help="comma list of nemesis packages, or 'none'")
    p.add_argument("--nemesis-mode", choices=("random", "guided"),
                   help="random: faults planned from the seed (default); guided: chosen during the run from the "
                        "observed cluster events (spec: nemesis.mode)")
    p.add_argument("--workload", help="comma list of workload names")
    p.add_argument("--seed", type=int, help="seed of the generators and the fault schedule")
    p.add_argument("--test-count", type=int, help="run the test N times (seeds seed, seed+1, ...)")
    p.add_argument("--leave-running", action="store_true", default=None, help="leave the cluster up after the run")
    p.add_argument("--backend", help="local | docker | ssh")
    p.add_argument("--nodes-file", help="ssh backend: YAML file of node -> host (see harness.control.ssh)")
    p.add_argument("--sut-revision", metavar="REV",
                   help="the nodes run the cluster code of git revision REV of this repository (built once into a "
                        "cache); clients, nemeses and checkers stay this checkout's (spec: cluster.revision)")
    p.add_argument("--allow-weak-quorum", action="store_true",
                   help="run a spec with 2 controllers anyway (one fault leaves no quorum)")


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("nodes", "time_limit", "concurrency", "rate", "nemesis", "nemesis_mode", "workload", "seed",
            "test_count", "leave_running", "backend", "sut_revision")
    return {k: getattr(args, k, None) for k in keys if getattr(args, k, None) is not None}


# ---------------------------------------------------------------------------------------------
# Validation and workloads


def build_workloads(spec: TestSpec, db: DB) -> list[Any]:
    """Build every workload the spec names (fresh instances, seeded from the spec).

    Raises:
        SpecError: an unknown workload name or a bad option (from the registry), or two workloads
            claiming the same op ``f``.
    """
    from workloads import registry

    built = []
    owner: dict[str, str] = {}
    for i, w in enumerate(spec.workloads):
        ctx = registry.WorkloadContext(spec=spec, db=db, options=w.options, seed=spec.seed + 1000 * i, index=i)
        try:
            wl = registry.build(w.name, ctx)
        except SpecError:
            raise
        except (ValueError, TypeError) as exc:
            raise SpecError(spec.source, f"workloads[{i}]", w.name, f"a buildable workload ({exc})") from None
        for f in sorted(wl.fs):
            if f in owner:
                raise SpecError(spec.source, f"workloads[{i}].name", w.name,
                                f"workloads whose op fs do not overlap; f {f!r} is also handled by {owner[f]!r}")
            owner[f] = w.name
        built.append(wl)
    return built


def _nemesis_names(spec: TestSpec, workloads: Sequence[Any]) -> list[str]:
    names = list(spec.nemesis.packages)
    for wl in workloads:
        names += [n for n in getattr(wl, "nemesis_packages", ()) if n not in names]
    return names


@runtime_checkable
class RunsNodeCommands(Protocol):
    """A DB whose nodes run this repository's node commands, so ``cluster.revision`` can swap in a built revision's
    (:func:`harness.commands._backend.sut_node_command`); our cluster's DB is one.  ``node_flags`` names every
    option the DB may pass to each node command, so that a revision whose commands lack one is refused before a run
    (:func:`harness.revisions.ensure_build`)."""

    command: Sequence[str]

    def node_flags(self) -> Mapping[str, frozenset[str]]: ...


@runtime_checkable
class LazyStoreOptions(Protocol):
    """Options that can put the system's stores on the lazy file system (``store_fs``: ``plain`` or ``lazyfs``,
    :mod:`nemesis.lazyfs`), which the local backend mounts (:func:`store_fs_problem` says where it cannot)."""

    @property
    def store_fs(self) -> str: ...


def system_options(spec: TestSpec) -> SystemOptions:
    """The spec's ``cluster:`` map as its system's adapter parses it (:meth:`systems.System.options`).

    Raises:
        SpecError: naming ``cluster.<key>``, the value and what the system allows.
    """
    return systems.get(spec.system).options(spec.cluster, file=spec.source)


def make_db(spec: TestSpec, options: SystemOptions) -> SystemDB:
    """A fresh DB of the spec's system (:mod:`systems`; :func:`harness.spec.load_spec` already loaded its adapter)."""
    return systems.get(spec.system).make_db(spec, options)


def _no_revision(spec: TestSpec, revision: str) -> SpecError:
    return SpecError(spec.source, "cluster.revision", revision,
                     f"no revision: system {spec.system!r} does not run this repository's node commands")


def validate_spec(spec: TestSpec) -> SystemOptions:
    """Check cluster options, nemesis packages/targets, what they need of the system, and workloads without
    starting anything.

    Returns:
        the validated cluster options (what the system's adapter parsed).
    Raises:
        SpecError: naming the file, the key and the reason.
    """
    options = system_options(spec)
    store_fs_problem(spec, options)
    db = make_db(spec, options)
    if options.revision is not None and not isinstance(db, RunsNodeCommands):
        raise _no_revision(spec, options.revision)
    offered = systems.get(spec.system).capabilities
    refuse_missing_capabilities(spec, offered, spec.nemesis.packages)  # before the workloads: the system is the cause
    refuse_unservable_workloads(spec, offered)
    workloads = build_workloads(spec, db)
    from nemesis import packages

    names = _nemesis_names(spec, workloads)
    if names:
        topo = spec.nodes.topology
        try:
            packages.validate(names, spec.nemesis.targets, topo, random.Random(spec.seed),
                              options=spec.nemesis.options)
        except ValueError as exc:
            msg = str(exc)
            if msg.startswith("nemesis.options"):
                key, _, why = msg.partition(": ")
                raise SpecError(spec.source, key, _option_value(spec.nemesis.options, key),
                                f"valid package options ({why})") from None
            key = "nemesis.targets" if "unknown nemesis package" not in msg else "nemesis.packages"
            raise SpecError(spec.source, key, names if key == "nemesis.packages" else list(spec.nemesis.targets),
                            f"valid nemesis settings ({exc})") from None
    refuse_missing_capabilities(spec, offered, names)  # and the packages the workloads add
    return options


def refuse_unservable_workloads(spec: TestSpec, offered: frozenset[str]) -> None:
    """Refuse a workload that needs a capability the spec's system does not offer (``register`` needs
    ``register-client``: :func:`workloads.registry.needs`), or that talks to a node role the spec gives no node
    (``queue`` with ``broker_sets: {count: 0}``: :func:`workloads.registry.populated`), before it is built against the
    wrong DB or runs with nobody to talk to.

    Raises:
        SpecError: naming ``workloads[i].name``, the workload and the missing capabilities or the empty role.
    """
    from workloads import registry

    for i, w in enumerate(spec.workloads):
        empty = [r for r in registry.populated(w.name) if not _given_nodes(spec, r)]
        if empty:
            raise SpecError(spec.source, f"workloads[{i}].name", w.name,
                            f"a workload whose node roles have nodes: {w.name!r} talks to the node role "
                            f"{', '.join(empty)}, and nodes.{empty[0]} gives it none")
        lacking = [c for c in registry.needs(w.name) if c not in offered]
        if lacking:
            raise SpecError(spec.source, f"workloads[{i}].name", w.name,
                            f"a workload that system {spec.system!r} can serve: {w.name!r} needs "
                            f"{', '.join(lacking)}, which {spec.system!r} does not offer (it offers: "
                            f"{', '.join(sorted(offered)) or 'nothing'}; capabilities: docs/systems.md)")


def _given_nodes(spec: TestSpec, role: str) -> tuple[str, ...]:
    """The nodes ``spec`` gives the node role ``role`` (every broker set's replicas; none for a role it lacks)."""
    nodes = spec.nodes
    if role == "broker_sets":
        return tuple(n for s in nodes.broker_sets for n in s)
    if role in ("controllers", "members"):
        return nodes.controllers if role == "controllers" else nodes.members
    return next((names for row, names in nodes.others if row.name == role), ())


def refuse_missing_capabilities(spec: TestSpec, offered: frozenset[str], names: Sequence[str]) -> None:
    """Refuse a spec that asks its system for a capability it does not offer (the fault table says what each
    package, role selector, guided mode and schedule step needs: :func:`nemesis.packages.missing_capabilities`),
    instead of failing mid-run.

    Raises:
        SpecError: naming the key (``nemesis.packages``...), the package or selector, and the missing capabilities.
    """
    from nemesis import packages

    guided = spec.nemesis.mode == "guided" or "guided" in spec.nemesis.modes
    missing = packages.missing_capabilities(names, offered, targets=spec.nemesis.targets,
                                            options=spec.nemesis.options, guided=guided,
                                            schedule=spec.nemesis.schedule or ())
    if not missing:
        return
    first = missing[0]
    lacking = [m.capability for m in missing if (m.key, m.value) == (first.key, first.value)]
    what = "package" if first.key == "nemesis.packages" else "setting"
    raise SpecError(spec.source, first.key, first.value,
                    f"a {what} that system {spec.system!r} can serve: {first.value!r} needs {', '.join(lacking)}, "
                    f"which {spec.system!r} does not offer (it offers: {', '.join(sorted(offered)) or 'nothing'}; "
                    "capabilities: docs/systems.md)")


def store_fs_problem(spec: TestSpec, options: SystemOptions, *, fuse_device: str = "/dev/fuse") -> None:
    """Refuse ``cluster.store_fs: lazyfs`` where it cannot run, before anything starts (rather than mid-run).

    Raises:
        SpecError: a backend other than local (docker would need ``--device /dev/fuse`` and CAP_SYS_ADMIN in every
            broker container, ssh a FUSE-capable host: not built yet), or this machine lacks ``/dev/fuse`` or
            pyfuse3 (``scripts/setup.sh`` installs fuse3 and libfuse3-dev, then pyfuse3).
    """
    if not isinstance(options, LazyStoreOptions) or options.store_fs != "lazyfs":
        return
    if spec.backend != "local":
        raise SpecError(spec.source, "cluster.store_fs", "lazyfs",
                        f"plain with backend {spec.backend}: the lazyfs store file system is mounted by the local "
                        "backend only (docker would need --device /dev/fuse and CAP_SYS_ADMIN in each broker "
                        "container, ssh a FUSE-capable host with pyfuse3)")
    import importlib.util

    missing = [what for what, ok in ((fuse_device, Path(fuse_device).exists()),
                                     ("pyfuse3", importlib.util.find_spec("pyfuse3") is not None)) if not ok]
    if missing:
        raise SpecError(spec.source, "cluster.store_fs", "lazyfs",
                        f"plain on this machine: lazyfs needs {' and '.join(missing)} (scripts/setup.sh installs "
                        "fuse3, libfuse3-dev and pyfuse3)")


def _option_value(options: Mapping[str, Any], key: str) -> Any:
    """The value at ``nemesis.options.PKG.FIELD[I]`` (for error messages; the whole map if not found)."""
    value: Any = options
    for part in key.removeprefix("nemesis.options.").replace("[", ".").replace("]", "").split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError, TypeError):
            return dict(options)
    return value


@dataclass(frozen=True)
class Prepared:
    """A spec that passed every check, with its cluster options and, for ``cluster.revision``, the build the nodes
    run (:mod:`harness.revisions`; the spec's revision is then the build's full sha)."""

    spec: TestSpec
    options: SystemOptions
    sut: SutBuild | None = None


def runnable_problem(spec: TestSpec, *, names_workloads: bool, allow_weak_quorum: bool = False) -> SpecError | None:
    """What a spec may say for a unit test but a real run must not (pure; None when runnable).

    * no ``workloads:`` key (and no ``--workload``): nothing is assumed -- a silent default of ``queue`` made
      specs test something their author never chose;
    * exactly 2 controllers: a Raft majority of 2 is both of them, so any kill, pause or partition of a
      controller leaves no quorum and the run measures nothing but unavailability.  ``--allow-weak-quorum``
      runs it anyway (on purpose: a test of what unavailability looks like).
    """
    if not names_workloads:
        return SpecError(spec.source, "workloads", None,
                         "a list of workloads, e.g. `workloads: [queue]` (nothing is assumed; or pass --workload)")
    if len(spec.nodes.controllers) == 2 and not allow_weak_quorum:
        return SpecError(spec.source, "nodes.controllers", list(spec.nodes.controllers),
                         "1 or at least 3 controllers: 2 need both for a majority, so one fault leaves no quorum "
                         "(use 3, or pass --allow-weak-quorum to run it anyway)")
    return None


def _names_workloads(path: str, overrides: Mapping[str, Any]) -> bool:
    """Whether the spec file has a ``workloads:`` key or the command line gives ``--workload``."""
    if overrides.get("workload"):
        return True
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return True  # load_spec already accepted the file; do not invent a second error here
    return isinstance(raw, Mapping) and "workloads" in raw


def prepare(path: str, overrides: Mapping[str, Any], *, allow_weak_quorum: bool = False) -> Prepared:
    """Load, override and validate a spec file for a real run (see :func:`runnable_problem`).

    Raises:
        SpecError: naming the file, the key and what to do.
            ``cluster.revision`` included: a revision that names no commit, does not build or whose wire protocol
            the harness cannot speak (:mod:`harness.revisions`) is refused here, before anything starts.
    """
    try:
        spec = load_spec(path, overrides)
    except SpecError as exc:  # a YAML parser's message spans lines (a caret drawing): keep the error one line
        raise SpecError(exc.file, exc.key, exc.value, " ".join(exc.allowed.split())) from None
    except UnicodeDecodeError as exc:
        raise SpecError(path, "<file>", None, f"UTF-8 text ({exc.reason} at byte {exc.start})") from None
    problem = runnable_problem(spec, names_workloads=_names_workloads(path, overrides),
                               allow_weak_quorum=allow_weak_quorum)
    if problem is not None:
        raise problem
    options = validate_spec(spec)
    if options.revision is None:
        return Prepared(spec, options)
    revisions = revision_system_of(systems.get(spec.system))
    db = make_db(spec, options)
    if revisions is None or not isinstance(db, RunsNodeCommands):  # validate_spec refused it already
        raise _no_revision(spec, options.revision)
    try:
        sut = ensure_build(options.revision, system=revisions, node_flags=db.node_flags())
    except RevisionError as exc:
        raise SpecError(spec.source, "cluster.revision", options.revision,
                        f"a revision this harness can run ({exc})") from None
    if sut.revision != options.revision:  # the spec that runs (and test.yaml) names the commit, not a moving name
        spec = replace(spec, cluster={**spec.cluster, "revision": sut.revision})
        options = system_options(spec)
    return Prepared(spec, options, sut)


def check_results_root(flag: str, root: str) -> str | None:
    """Why ``root`` cannot hold results (it is created if missing), or None.  Checked before any cluster starts."""
    try:
        Path(root).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{flag} {root}: cannot create the results directory ({exc.strerror}); pass a writable directory"
    if not os.access(root, os.W_OK | os.X_OK):
        return f"{flag} {root}: the results directory is not writable; pass a writable directory"
    return None


# ---------------------------------------------------------------------------------------------
# Composite client and parts


class CompositeClient:
    """Routes each op to the client of the workload whose ``fs`` contains its ``f``.

    ``routes`` is a list of ``(fs, client)``; :meth:`open` opens every member for the worker's node.
    An op no workload handles completes as ``fail`` with an error naming the known fs (definitely not done).
    """

    def __init__(self, routes: Sequence[tuple[frozenset[str], Any]]) -> None:
        self.routes = list(routes)
        self._by_f: dict[str, Any] = {}
        for fs, client in self.routes:
            for f in fs:
                self._by_f.setdefault(f, client)

    def client_for(self, f: str) -> Any:
        return self._by_f.get(f)

    async def open(self, test: dict[str, Any], node: str) -> CompositeClient:
        opened = []
        try:
            for fs, client in self.routes:
                opened.append((fs, await client.open(test, node)))
        except BaseException:
            for _, c in opened:
                await c.close(test)
            raise
        return CompositeClient(opened)

    async def setup(self, test: dict[str, Any]) -> None:
        for _, client in self.routes:
            await client.setup(test)

    async def invoke(self, test: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
        client = self._by_f.get(op.get("f", ""))
        if client is None:
            why = f"no workload handles f {op.get('f')!r}; known: {sorted(self._by_f)}"
            return {**op, "type": "fail", "error": why}
        result: dict[str, Any] = await client.invoke(test, op)
        return result

    async def teardown(self, test: dict[str, Any]) -> None:
        for _, client in self.routes:
            await client.teardown(test)

    async def close(self, test: dict[str, Any]) -> None:
        for _, client in self.routes:
            await client.close(test)


def namespaced_checkers(workloads: Sequence[Any]) -> dict[str, Any]:
    """``{"<workload>/<checker>": checker}`` over all workloads."""
    return {f"{wl.name}/{name}": c for wl in workloads for name, c in wl.checkers.items()}


def client_generator(spec: TestSpec, workloads: Sequence[Any], dial: g.LoadDial | None = None) -> Any:
    """The workloads' main generators mixed and paced at ``spec.rate`` ops/s in total: one stream per worker at
    ``rate / concurrency``, each a pure function of (seed, worker) (:func:`harness.generator.pace`); ``dial``
    scales the rate during the run (the guided nemesis's ``guided_load_max``)."""
    gens = [wl.generator for wl in workloads if wl.generator is not None]
    if not gens:
        return None
    mixed = gens[0] if len(gens) == 1 else g.mix(gens)
    return g.pace(spec.rate, mixed, seed=spec.seed, dial=dial)


def final_generator(workloads: Sequence[Any]) -> Any:
    finals = [wl.final_generator for wl in workloads if wl.final_generator is not None]
    if not finals:
        return None
    return finals[0] if len(finals) == 1 else g.phases(*finals)


def build_parts(spec: TestSpec, options: SystemOptions) -> tuple[TestParts, DB]:
    """Fresh DB (of the spec's system), workloads and nemesis packages for one run of ``spec`` (the seed drives
    every schedule)."""
    from nemesis import packages

    db = make_db(spec, options)
    workloads = build_workloads(spec, db)
    composed = packages.build(db, _nemesis_names(spec, workloads), interval_s=spec.nemesis.interval_s,
                              targets=spec.nemesis.targets, seed=spec.seed, time_limit_s=spec.time_limit_s,
                              options=spec.nemesis.options, schedule=spec.nemesis.schedule)
    client = CompositeClient([(frozenset(wl.fs), wl.client) for wl in workloads])
    dial = None
    feed = getattr(composed.nemesis, "feed", None)  # a guided nemesis's feed
    if feed is not None and spec.nemesis.guided_load_max > 1.0:
        dial = feed.load = g.LoadDial()
        feed.load_max = spec.nemesis.guided_load_max
    parts = TestParts(
        client=client,
        checkers=namespaced_checkers(workloads),
        generator=g.clients(client_generator(spec, workloads, dial), nemesis_gen=composed.generator),
        db=db,
        nemesis=composed.nemesis,
        heal_generator=composed.heal,
        schedule=composed.schedule,
        final_generator=final_generator(workloads),
        op_timeouts={f: t for wl in workloads for f, t in wl.op_timeouts.items()},
    )
    return parts, db
