"""harness.lag: the replication-lag summary of a run's samples (pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.lag import describe_lag, lag_summary, percentile


def sample(t: int, rec: int | None, by: int | None = 0, slave: str | None = "b1-2", sid: int = 2,
           connected: bool = True) -> dict[str, Any]:
    return {"time": t, "set": "broker-0", "master": "b1-1", "slave_id": sid, "slave": slave,
            "records_behind": rec, "bytes_behind": by, "connected": connected}


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5], 0.5) == 5
    assert percentile([1, 2, 3, 4], 0.5) == 2
    assert percentile([3, 1, 2, 5, 4], 0.5) == 3
    assert percentile(list(range(1, 101)), 0.99) == 99


def test_summary_per_slave_in_the_main_phase_only() -> None:
    samples = [sample(5, 100), sample(10, 0, 0), sample(20, 4, 400), sample(30, None, 9000, connected=False),
               sample(20, 7, 70, slave=None, sid=3), sample(99, 1000)]
    s = lag_summary(samples, start_ns=10, end_ns=99)
    assert s is not None
    assert s["slaves"]["broker-0/b1-2"] == {
        "samples": 3, "records_max": 4, "records_p50": 0, "records_p99": 4, "bytes_max": 9000, "bytes_p50": 400,
        "records_unknown": 1, "disconnected": 1}
    assert s["slaves"]["broker-0/id3"]["records_max"] == 7
    assert (s["max_records_behind"], s["lagging_slaves"]) == (7, 2)
    assert "broker-0/b1-2 p50 0 max 4, 1 uncounted" in describe_lag(s)


def test_no_sample_in_the_phase_is_no_summary() -> None:
    assert lag_summary([sample(5, 1)], start_ns=10, end_ns=20) is None
    assert lag_summary([]) is None


@given(st.lists(st.tuples(st.sampled_from(["b1-2", "b1-3"]), st.integers(0, 10_000)), min_size=1, max_size=60))
def test_summary_bounds(pairs: list[tuple[str, int]]) -> None:
    """Per slave p50 <= p99 <= max = the largest sample; overall max = the largest of all; every sample counted."""
    s = lag_summary([sample(i, rec, slave=node) for i, (node, rec) in enumerate(pairs)])
    assert s is not None
    for node, v in s["slaves"].items():
        mine = [rec for n, rec in pairs if f"broker-0/{n}" == node]
        assert v["samples"] == len(mine)
        assert v["records_p50"] <= v["records_p99"] <= v["records_max"] == max(mine)
    assert s["max_records_behind"] == max(rec for _, rec in pairs)
    assert sum(v["samples"] for v in s["slaves"].values()) == len(pairs)
