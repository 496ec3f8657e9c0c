"""bench/chaos_load.py's pure parts: /proc stat parsing, CPU labels and split, the completed-op rate."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import chaos_load as cl


def test_parse_stat_counts_fields_after_the_last_paren() -> None:
    line = "42 (py (x) 3) S 7 1 1 0 -1 0 0 0 0 0 150 25 0 0 20 0 1 0 0 0 0"
    assert cl.parse_stat(line) == (7, 175)


def test_label_of_names_nodes_by_their_directory() -> None:
    assert cl.label_of(1, 1, "python -m harness.cli test x.yaml") == "harness"
    assert cl.label_of(2, 1, "python -m harness.cli broker --store-dir /tmp/a/b1-2/store --x") == "b1-2"
    assert cl.label_of(3, 1, "python -m harness.cli controller --data-dir /tmp/a/c3/data") == "c3"
    assert cl.label_of(4, 1, "ip netns exec sb-x sleep 1") == "harness"


def test_cpu_split_counts_new_pids_from_zero() -> None:
    start = {1: ("harness", 100), 2: ("b1-1", 50)}
    end = {1: ("harness", 100 + 2 * cl.CLK_TCK), 2: ("b1-1", 50 + cl.CLK_TCK), 3: ("b1-1", cl.CLK_TCK)}
    assert cl.cpu_split(start, end) == {"b1-1": 2.0, "harness": 2.0}


def test_completed_rate_counts_client_completions_in_the_window() -> None:
    ops = [{"type": "invoke", "process": 0, "time": 1}, {"type": "ok", "process": 0, "time": 2},
           {"type": "info", "process": 1, "time": 3}, {"type": "ok", "process": "nemesis", "time": 4},
           {"type": "fail", "process": 2, "time": 2_000_000_000}]
    lines = [orjson.dumps(o) for o in ops] + [b'{"torn']
    assert cl.completed_rate(lines, 0, 1_000_000_000) == (2, 2.0)
