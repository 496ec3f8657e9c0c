"""One table of layer rules for the whole tree: which layer may import which, and which modules are pure cores.

The layer order is the one docs/architecture.md states, lowest first: a module may import its own layer and
those below it, never one above (lazy imports inside functions and ``TYPE_CHECKING`` imports count too: a
circle through a lazy import is still a circle).  A pure core imports no clock, randomness, OS, network or
threads at run time (``TYPE_CHECKING`` imports are annotations and never run) and no shell module of its own
package; time and randomness arrive as arguments.  This is the only import scanner in the tests.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("eventloop", "system_under_test", "checker", "harness", "nemesis", "workloads", "spark_analysis", "systems")

# Lowest first.  A module belongs to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The event loop both the nodes and the harness run on: below the system under test, so it imports nothing of
    # the project (test_the_event_loop_imports_nothing_of_the_project).
    ("event loop", ("eventloop",)),
    ("system under test", ("system_under_test",)),
    ("checkers", ("checker",)),
    ("harness core", ("harness.generator", "harness.protocols", "harness.errors", "harness.node_processes",
                      "harness.roles")),
    ("nemeses", ("nemesis",)),
    ("workloads", ("workloads",)),
    ("spark analysis", ("spark_analysis",)),
    ("systems", ("systems",)),
    # Our cluster's adapter holds its DB, options and tools and builds on the harness (its DB on
    # harness.node_processes, its options' revision on harness.revisions, its demo command); the counter's still
    # wraps harness.testing.counter.  The registry (systems/__init__.py) imports them by name only, so it stays
    # below the harness.  systems.etcd.run drives etcd through the real runner, as harness/testing/run_counter.py
    # does the counter.
    ("harness", ("harness", "systems.splitbrain", "systems.counter", "systems.etcd.run")),
)

IMPURE = frozenset({"asyncio", "socket", "os", "time", "random", "threading", "subprocess", "datetime"})


@dataclass(frozen=True)
class Core:
    """Pure modules: files matched by ``pattern`` (minus ``shells``) import nothing in IMPURE | ``also``
    except ``allowed`` (with the reason)."""

    pattern: str
    shells: tuple[str, ...] = ()
    also: frozenset[str] = frozenset()
    allowed: frozenset[str] = frozenset()
    why_allowed: str = ""


CORES: tuple[Core, ...] = (
    Core("system_under_test/raft/core.py"), Core("system_under_test/raft/log.py"),
    Core("system_under_test/raft/quorum.py"), Core("system_under_test/raft/progress.py"),
    Core("system_under_test/broker/registration/state_machine.py"),
    Core("system_under_test/broker/registration/meta_record.py"),
    Core("system_under_test/broker/registration/errors.py"), Core("system_under_test/broker/shutdown.py"),
    Core("system_under_test/broker/ha/*.py"),
    Core("system_under_test/client/controller_route.py"), Core("system_under_test/client/quiet_link.py"),
    Core("system_under_test/client/workload_requests.py"), Core("system_under_test/client/register_requests.py"),
    *(Core(f"system_under_test/broker/store/{m}.py") for m in ("record", "truncation", "_kv", "config", "errors",
                                                               "results", "recovery", "durability")),
    Core("system_under_test/broker/lease.py"),
    Core("system_under_test/controller/*.py",
         shells=("server.py", "main.py", "formation.py", "batching.py", "barrier.py")),
    Core("system_under_test/sim/*.py", allowed=frozenset({"random"}),
         why_allowed="random.Random is built only from the run's seed (World); no module-level random call"),
    Core("checker/linearizable/*.py"), Core("checker/models/*.py"),
    Core("checker/timeline/*.py", shells=("_files.py", "__init__.py"), allowed=frozenset({"datetime"}),
         why_allowed="formats the times a run recorded; never reads the clock"),
    Core("checker/perf/_colours.py"), Core("checker/perf/_stats.py"), Core("checker/availability/*.py"),
    Core("checker/invariants/*.py"), Core("checker/per_key.py"),
    Core("harness/web/views.py"),
    Core("harness/generator/*.py", allowed=frozenset({"random"}),
         why_allowed="random.Random is the type of the rng a context carries; no module-level random call"),
    Core("harness/load.py"), Core("harness/fleet_ledger.py"), Core("harness/gate_outcome.py"), Core("harness/roles.py"),
    *(Core(f"nemesis/{m}.py") for m in ("faults", "targets", "schedule", "replay", "shrink", "coverage", "guided",
                                         "disk_kinds", "packet_behavior", "grudge", "words")),
    Core("nemesis/lazyfs/core.py"),
    *(Core(f"spark_analysis/{m}.py", also=frozenset({"pyspark"}))
      for m in ("comparisons", "faults", "recovery", "regression", "sequential", "wilson")),
    Core("spark_analysis/runfiles.py", also=frozenset({"pyspark"}), allowed=frozenset({"datetime"}),
         why_allowed="parses the timestamps a run recorded; never reads the clock"),
    Core("workloads/models.py"),
    Core("systems/rabbitmq/config.py"),
)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The project module an imported dotted name lives in (None: outside the project)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@dataclass(frozen=True)
class Import:
    target: str  # dotted name as written (absolute)
    line: int
    type_checking: bool


def scan(source: str, module: str, *, is_pkg: bool = False) -> tuple[Import, ...]:
    """Every import in ``source`` (the text of ``module``): top level, inside functions, and under
    ``if TYPE_CHECKING:`` (marked), relative ones made absolute."""
    found: list[Import] = []

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = module.split(".")
        base = base if is_pkg else base[:-1]
        base = base[: len(base) - node.level + 1]
        return ".".join([*base, node.module] if node.module else base)

    def visit(node: ast.AST, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for sub in child.body:
                    visit_one(sub, True)
                for sub in child.orelse:
                    visit_one(sub, type_checking)
                continue
            visit_one(child, type_checking)

    def visit_one(child: ast.AST, type_checking: bool) -> None:
        if isinstance(child, ast.Import):
            found.extend(Import(a.name, child.lineno, type_checking) for a in child.names)
        elif isinstance(child, ast.ImportFrom):
            base = absolute(child)
            for a in child.names:
                sub = f"{base}.{a.name}"
                found.append(Import(sub if _owner(sub) == sub else base, child.lineno, type_checking))
        visit(child, type_checking)

    visit(ast.parse(source), False)
    return tuple(found)


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    path = MODULES[module]
    return scan(path.read_text(encoding="utf-8"), module, is_pkg=path.name == "__init__.py")


def layer_of(module: str) -> int:
    best, layer = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, layer = len(p), i
    assert layer >= 0, f"{module} is in no layer of the table"
    return layer


def test_every_module_is_in_a_layer() -> None:
    assert len(MODULES) > 100
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_higher_layer() -> None:
    bad = []
    for module in MODULES:
        mine = layer_of(module)
        for imp in imports_of(module):
            target = _owner(imp.target)
            if target is not None and layer_of(target) > mine:
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{imp.line} ({LAYERS[mine][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]})")
    assert not bad, "imports against the layer order (docs/architecture.md):\n" + "\n".join(bad)


def _core_files() -> list[tuple[Core, Path]]:
    out = []
    for core in CORES:
        matched = sorted(p for p in ROOT.glob(core.pattern) if p.name not in core.shells)
        assert matched, f"the table names {core.pattern}, which matches no file"
        out += [(core, p) for p in matched]
    return out


CORE_FILES = _core_files()


@pytest.mark.parametrize(("core", "path"), CORE_FILES, ids=[p.relative_to(ROOT).as_posix() for _, p in CORE_FILES])
def test_pure_cores_import_no_io_clock_or_randomness(core: Core, path: Path) -> None:
    module = next(m for m, p in MODULES.items() if p == path)
    roots = {imp.target.split(".")[0] for imp in imports_of(module) if not imp.type_checking}
    bad = roots & ((IMPURE | core.also) - core.allowed)
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: move that code to a shell, pass time/rng in"
    shells = {str((path.parent / s).relative_to(ROOT).with_suffix("")).replace("/", ".") for s in core.shells}
    into_shells = {imp.target for imp in imports_of(module) if _owner(imp.target) in shells}
    assert not into_shells, f"pure {path.relative_to(ROOT)} imports its package's shells {sorted(into_shells)}"


def test_the_generator_calls_no_module_level_random() -> None:
    for path in sorted((ROOT / "harness/generator").glob("*.py")):
        src = path.read_text(encoding="utf-8")
        assert not any(f"random.{fn}(" in src for fn in ("random", "randint", "choice", "randrange", "seed")), path


def test_the_scanner_sees_lazy_relative_and_type_checking_imports() -> None:
    source = ("import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import random\n"
              "def f():\n    import time\n    from ..generator import _core\n")
    found = scan(source, "harness.control.x")
    assert {(i.target, i.type_checking) for i in found} == {
        ("os", False), ("typing", False), ("random", True), ("time", False), ("harness.generator._core", False)}
    runtime = {i.target.split(".")[0] for i in found if not i.type_checking}
    assert runtime & IMPURE == {"os", "time"}
    assert layer_of("harness.generator._core") < layer_of("nemesis.schedule") < layer_of("harness.runner")


def _project_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package's own __init__ excluded: importing a submodule
    runs its package, which is not a dependency of the submodule's code)."""
    return {m: {t for i in imports_of(m) if (t := _owner(i.target)) is not None and t != m
                and not m.startswith(t + ".")} for m in MODULES}


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circles() -> None:
    circles = [sorted(c) for c in _circles(_project_graph())]
    assert not circles, f"import circles (lazy and TYPE_CHECKING imports count): {circles}"


def test_the_circle_finder() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(sorted(c) for c in _circles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


SYSTEM_FREE = ("checker", "nemesis")
"""Packages that must not import ``system_under_test`` at all (issue 29): a checker or nemesis reaches a system only
through the DB's capability protocols (``harness.protocols``), so it serves any system an adapter describes."""


def _imports_of_the_system_under_test(module: str) -> list[str]:
    out = []
    for imp in imports_of(module):
        target = _owner(imp.target)
        if target is not None and (target == "system_under_test" or target.startswith("system_under_test.")):
            out.append(f"{MODULES[module].relative_to(ROOT)}:{imp.line} imports {target}")
    return out


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return module in packages or module.startswith(tuple(p + "." for p in packages))


def test_checkers_and_nemeses_import_nothing_of_the_system_under_test() -> None:
    bad = [line for module in MODULES if _in(module, SYSTEM_FREE) for line in _imports_of_the_system_under_test(module)]
    assert not bad, "a checker or nemesis imports the system under test (go through a DB protocol):\n" + "\n".join(bad)


def test_the_harness_imports_nothing_of_the_system_under_test() -> None:
    """Our cluster's code lives in its adapter (``systems/splitbrain/``); what the harness needs of a system it gets
    through the adapter (``systems.System``) or a capability protocol (``harness.protocols``)."""
    bad = [line for module in MODULES if _in(module, ("harness",))
           for line in _imports_of_the_system_under_test(module)]
    assert not bad, ("a harness module imports the system under test (our cluster's code lives in systems/splitbrain/; "
                     "generic code goes through the adapter or a protocol):\n" + "\n".join(bad))



OUR_ADAPTER = "systems.splitbrain"
ADAPTER_FREE = ("harness", "nemesis")
"""Packages that must not import our cluster's adapter (issue 29): what is only our cluster's -- its selector pools
(``systems/splitbrain/selectors.py``) above all -- reaches generic code through the registry (``systems.get``,
``systems.selectors_of``) and the spec (``NodesSpec.selectors``), never by import."""


def test_the_harness_and_the_nemeses_import_nothing_of_our_adapter() -> None:
    bad = []
    for module in MODULES:
        if not _in(module, ADAPTER_FREE):
            continue
        for imp in imports_of(module):
            target = _owner(imp.target)
            if target is None or not (target == OUR_ADAPTER or target.startswith(OUR_ADAPTER + ".")):
                continue
            bad.append(f"{MODULES[module].relative_to(ROOT)}:{imp.line} imports {target}")
    assert not bad, ("generic code imports our cluster's adapter (reach it through systems.get / the spec's "
                     "NodesSpec.selectors):\n" + "\n".join(bad))


def test_the_event_loop_imports_nothing_of_the_project() -> None:
    """``eventloop`` is the one home of the loop chooser (issue 29): the system under test and the harness both
    import it, so it may import neither -- nor anything else of ours."""
    assert layer_of("eventloop") < layer_of("system_under_test") < layer_of("harness.runner")
    bad = [f"{MODULES[m].relative_to(ROOT)}:{imp.line} imports {target}" for m in MODULES if _in(m, ("eventloop",))
           for imp in imports_of(m) if (target := _owner(imp.target)) is not None and not _in(target, ("eventloop",))]
    assert not bad, "the event loop imports the project:\n" + "\n".join(bad)
