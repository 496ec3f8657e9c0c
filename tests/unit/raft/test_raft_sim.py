"""The deterministic simulator: thousands of seeded schedules with safety checks, and proof that the checks fail
on deliberately broken variants (elle ``sim-*`` style).  Replay any failure with the command it prints."""

from __future__ import annotations

import os
import re
import time

import pytest

from system_under_test.raft.sim import BUGS, main, run_seed, run_seeds

SOAK = os.environ.get("SPLITBRAIN_SOAK") == "1"


@pytest.mark.soak
def test_sim_many_seeds_three_nodes_are_safe() -> None:
    count = 20_000 if SOAK else 2_000
    totals: dict[str, int] = {}

    def add(res: object) -> None:
        for k, v in res.stats.items():  # type: ignore[attr-defined]
            totals[k] = totals.get(k, 0) + v

    t0 = time.perf_counter()
    failures = run_seeds(0, count, nodes=3, steps=200, on_result=add)
    dt = time.perf_counter() - t0
    print(f"{count} seeds x 200 steps in {dt:.1f}s ({count / dt * 60:.0f}/min); totals {totals}")
    assert not failures, "\n".join(f"seed {f.seed}: {f.violation}\n  replay: {f.replay_command()}"
                                   for f in failures[:5])
    # The schedules must actually exercise the protocol, or "no violation" means nothing.
    assert totals["elections"] > count  # more than one leader per seed on average
    assert totals["applied"] > 10 * count
    for key in ("crashes", "snapshots_sent", "reads_served", "compactions", "transfers"):
        assert totals[key] > count // 50, f"{key} too rare: {totals[key]}"


def test_sim_five_nodes_are_safe() -> None:
    failures = run_seeds(0, 150, nodes=5, steps=300)
    assert not failures, "\n".join(f"seed {f.seed}: {f.violation}\n  replay: {f.replay_command()}"
                                   for f in failures[:5])


def test_sim_long_schedules_are_safe() -> None:
    failures = run_seeds(10_000, 30, nodes=3, steps=2_000)
    assert not failures, "\n".join(f"seed {f.seed}: {f.violation}\n  replay: {f.replay_command()}"
                                   for f in failures[:5])


@pytest.mark.parametrize("seed", [0, 17, 12345])
def test_sim_is_deterministic_by_seed(seed: int) -> None:
    a = run_seed(seed, keep_trace=True)
    b = run_seed(seed, keep_trace=True)
    assert a.trace == b.trace and a.stats == b.stats and len(a.trace) > 100
    assert run_seed(seed + 1, keep_trace=True).trace != a.trace


@pytest.mark.parametrize(
    ("bug", "nodes", "max_seeds", "expected"),
    [
        ("double-vote", 3, 200, "granted votes to|vote never changes within a term"),
        ("no-log-check", 3, 500, "leader completeness|state-machine safety|log matching"),
        # Needs a crash + restart between two candidates' requests of one term: more likely with 5 nodes.
        ("forget-vote", 5, 2_500, "granted votes to|both leader"),
    ],
)
def test_checker_detects_broken_variant_within_bound(bug: str, nodes: int, max_seeds: int, expected: str) -> None:
    for seed in range(max_seeds):
        res = run_seed(seed, nodes=nodes, bug=bug)
        if not res.ok:
            assert res.violation is not None and re.search(expected, res.violation), res.violation
            assert res.trace and f"--bug {bug}" in res.replay_command()
            return
    pytest.fail(f"bug {bug!r} ({BUGS[bug][2]}) went undetected for {max_seeds} seeds")


def test_cli_prints_seed_and_replay_command_on_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "200", "--bug", "double-vote", "--stop-on-failure"]) == 1
    out = capsys.readouterr().out
    assert "FAIL seed=" in out and "replay: python -m system_under_test.raft.sim --seeds 1 --start" in out
    assert "seeds/min" in out


def test_cli_passes_on_the_real_core(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "20", "--start", "500", "--nodes", "5"]) == 0
    assert "0 failed" in capsys.readouterr().out
