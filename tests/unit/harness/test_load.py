"""Load figures (harness.load): achieved rate overall and outside fault windows, per worker and per node."""

from __future__ import annotations

from typing import Any

import pytest

from harness.load import describe_load, fault_windows_s, load_figures

S = 1_000_000_000


def inv(process: Any, t_s: float, f: str = "w") -> dict[str, Any]:
    return {"type": "invoke", "process": process, "time": int(t_s * S), "f": f, "value": None}


def ok(process: Any, t_s: float, f: str = "w") -> dict[str, Any]:
    return {"type": "ok", "process": process, "time": int(t_s * S), "f": f, "value": None}


def indexed(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**o, "index": i} for i, o in enumerate(ops)]


def test_counts_rates_workers_and_nodes() -> None:
    """Main phase [1 s, 11 s), a kill window [3 s, 5 s): 2 workers on nodes a and b; ops before the phase,
    after it and nemesis ops are not client ops of the phase; process 2 is worker 0 after an info.  Worker 1's
    op invoked in the window completes at 7 s, so the window's reach is [3 s, 7 s)."""
    history = indexed([
        inv(0, 0.5), ok(0, 0.6),                      # before the main phase
        inv(0, 1.0), ok(0, 1.1), inv(1, 2.0), ok(1, 2.1),
        inv("nemesis", 3.0, "kill"), ok("nemesis", 3.1, "kill"),
        inv(0, 3.5), {**ok(0, 3.6), "type": "info"},  # inside the window
        inv(2, 4.0), ok(2, 4.1),                      # worker 0 as process 2, inside the window
        inv(1, 4.5),                                  # caught by the fault ...
        inv("nemesis", 4.9, "start"), ok("nemesis", 5.0, "start"),
        ok(1, 7.0),                                   # ... until 7 s
        inv(1, 7.5), ok(1, 7.6), inv(2, 10.5), ok(2, 10.6),
        inv(1, 11.0), ok(1, 11.1),                    # at the phase end: not in it
    ])
    fig = load_figures(history, concurrency=2, rate_hz=1.0, main_start_ns=1 * S, main_end_ns=11 * S,
                       windows_s=fault_windows_s(history), nodes=["a", "b"])
    assert fig == {
        "configured_ops_per_s": 1.0, "concurrency": 2, "main_phase_s": 10.0, "client_ops": 7,
        "achieved_ops_per_s": 0.7, "fault_windows": 1, "fault_window_s": 2.0, "outside_fault_windows_s": 8.0,
        "client_ops_outside_fault_windows": 4, "achieved_ops_per_s_outside_fault_windows": 0.5,
        "outside_fault_reach_s": 6.0, "client_ops_outside_fault_reach": 4,
        "achieved_ops_per_s_outside_fault_reach": 0.667,
        "before_first_fault_s": 2.0, "achieved_ops_per_s_before_first_fault": 1.0,
        "ops_per_worker": {"0": 4, "1": 3}, "fair_share_per_worker": 3.5, "max_worker_share": 1.143,
        "ops_per_node": {"a": 4, "b": 3},
    }
    line = describe_load(fig)
    assert "0.7 ops/s of 1 configured" in line and "0.5 outside fault windows" in line
    assert "0.7 outside their reach" in line
    assert "0:4 1:3" in line and "1.14x fair share" in line and "a:4 b:3" in line


@pytest.mark.parametrize("windows,fault_s", [
    ([(0.0, 2.0)], 1.0),                  # clipped at the phase start (1 s)
    ([(2.0, 4.0), (3.0, 5.0)], 3.0),      # overlapping faults count once
    ([(2.0, 3.0), (9.0, 20.0)], 3.0),     # clipped at the phase end (11 s)
    ([(12.0, 13.0)], 0.0),                # after the phase
], ids=["clip-start", "overlap", "clip-end", "outside"])
def test_fault_time_is_the_union_of_windows_in_the_phase(windows: list[tuple[float, float]], fault_s: float) -> None:
    fig = load_figures([], concurrency=1, rate_hz=5.0, main_start_ns=1 * S, main_end_ns=11 * S, windows_s=windows)
    assert fig["fault_window_s"] == fault_s and fig["outside_fault_windows_s"] == 10.0 - fault_s
    assert fig["client_ops"] == 0 and fig["max_worker_share"] is None and fig["ops_per_node"] == {}
    assert "n/a" in describe_load(fig)


def test_nodes_shared_by_workers_add_up() -> None:
    """5 workers over 2 nodes: worker t is on nodes[t % 2]."""
    history = indexed([inv(t, 1.0 + t) for t in range(5)])
    fig = load_figures(history, concurrency=5, rate_hz=1.0, main_start_ns=0, main_end_ns=10 * S, windows_s=[],
                       nodes=["n1", "n2"])
    assert fig["ops_per_node"] == {"n1": 3, "n2": 2} and fig["max_worker_share"] == 1.0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        load_figures([], concurrency=0, rate_hz=1.0, main_start_ns=0, main_end_ns=1, windows_s=[])
    with pytest.raises(ValueError, match="before its start"):
        load_figures([], concurrency=1, rate_hz=1.0, main_start_ns=2, main_end_ns=1, windows_s=[])
