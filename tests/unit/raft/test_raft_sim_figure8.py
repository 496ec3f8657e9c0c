"""Raft's figure 8 (§5.4.2) in the simulator: the schedule written out by hand, the seed draws that let the random
scheduler reach it, and the leader-aimed faults.

A leader that commits an entry of an earlier term by counting replicas (``--bug old-term-commit``, the bench's
``raft-commit-ignores-term``) was never caught because a new leader's old entries and the NOOP of its own term
left in one APPEND: the follower acknowledged both at once and the NOOP made the commit legal.  With one entry
per APPEND the old entry is acknowledged alone (docs/simulation.md, *The Raft-level simulator*)."""

from __future__ import annotations

import random

import pytest

from system_under_test.raft.sim import BATCH_SIZES, LEADER_BIASES, Cluster, SafetyViolation, main, run_seed
from system_under_test.raft.types import Message, MessageType, Role

VOTING = {MessageType.PRE_VOTE, MessageType.PRE_VOTE_RESP, MessageType.VOTE, MessageType.VOTE_RESP}


def _forget_leader(c: Cluster, voters: list[str]) -> None:
    """Tick ``voters`` past the leader-stickiness lease, losing whatever they send meanwhile."""
    for v in voters:
        for _ in range(2 * c.configs[v].election_ticks + 2):
            c.tick_node(v)
            c.drop_matching(lambda m: True)


def _elect(c: Cluster, who: str, voters: list[str]) -> int:
    group = {who, *voters}
    for _ in range(3):  # a first try may only teach ``who`` a higher term
        _forget_leader(c, voters)
        c.core(who).campaign()
        c.process(who)
        c.deliver_matching(lambda m: m.type in VOTING and m.src in group and m.dst in group)
        if c.core(who).role is Role.LEADER:
            return c.core(who).term
    raise AssertionError(f"{who} not elected: {c.core(who).describe()}")


def _figure8(bug: str, batch: int) -> str | None:
    """Figure 8 on three nodes; returns the violation or None.

    (a) n1 leads, appends x at index 2, which reaches nobody; n1 crashes.  (b) n3 is elected with n2's vote and
    appends its NOOP at index 2, which reaches nobody; n3 crashes.  (c) n1 restarts and is elected with n2's
    vote; of its APPENDs to n2 only those n2 rejects or that end at index 2 arrive: x reaches n2 only if it
    travels without n1's NOOP (index 3).  n1 crashes.  (d) n3 restarts and is elected with n2's vote.
    """
    c = Cluster(3, random.Random(0), bug=bug, max_batch_entries=batch, drop_rate=0.0, dup_rate=0.0)
    try:
        _elect(c, "n1", ["n2", "n3"])
        c.stabilize()
        c.core("n1").propose(b"x")
        c.process("n1")
        c.drop_matching(lambda m: True)
        c.crash("n1")
        _elect(c, "n3", ["n2"])
        c.drop_matching(lambda m: True)
        c.crash("n3")
        c.restart("n1")
        _elect(c, "n1", ["n2"])

        def arrives(m: Message) -> bool:
            if m.src == "n2":
                return m.dst == "n1"
            rejected = m.index > c.core("n2").last_index
            return m.dst == "n2" and m.type is MessageType.APPEND and (
                rejected or all(e.index <= 2 for e in m.entries))

        for _ in range(10):
            c.drop_matching(lambda m: not arrives(m))
            if not c.net:
                break
            c.net.append(c.net.pop(0))
            c.deliver(len(c.net) - 1)
        c.drop_matching(lambda m: True)
        c.crash("n1")
        c.restart("n3")
        _elect(c, "n3", ["n2"])
        c.stabilize()
    except SafetyViolation as exc:
        return str(exc)
    return None


def test_figure8_by_hand_kills_the_old_term_commit_with_one_entry_per_append() -> None:
    violation = _figure8("old-term-commit", batch=1)
    assert violation is not None and "leader completeness" in violation, violation


def test_figure8_by_hand_the_real_core_stays_safe() -> None:
    assert _figure8("none", batch=1) is None


def test_figure8_by_hand_is_unreachable_when_the_old_entry_travels_with_the_noop() -> None:
    # The schedule the old sweeps were limited to: x and n1's NOOP leave in one APPEND, so x never arrives alone.
    assert _figure8("old-term-commit", batch=4) is None


def test_random_scheduler_finds_the_old_term_commit_within_bound() -> None:
    for seed in range(400):
        res = run_seed(seed, steps=1000, bug="old-term-commit", max_batch_entries=1, leader_bias=0.8)
        if not res.ok:
            assert res.violation is not None
            assert "leader completeness" in res.violation or "state-machine safety" in res.violation, res.violation
            cmd = res.replay_command()
            assert "--max-batch-entries 1 --leader-bias 0.8" in cmd and "--bug old-term-commit" in cmd
            again = run_seed(seed, steps=1000, bug="old-term-commit", max_batch_entries=1, leader_bias=0.8)
            assert again.violation == res.violation and again.trace == res.trace
            return
    pytest.fail("old-term-commit undetected for 400 seeds of 1000 steps with max_batch_entries=1, leader_bias=0.8")


def test_the_real_core_is_safe_with_one_entry_per_append_and_leader_faults() -> None:
    failures = [r for r in (run_seed(s, steps=1000, max_batch_entries=1, leader_bias=0.8) for s in range(150))
                if not r.ok]
    assert not failures, f"seed {failures[0].seed}: {failures[0].violation}\n  replay: {failures[0].replay_command()}"


def test_seeds_draw_both_values_and_pinning_the_drawn_values_changes_nothing() -> None:
    drawn = {(r.max_batch_entries, r.leader_bias) for r in (run_seed(s, steps=5) for s in range(60))}
    assert drawn == {(b, p) for b in BATCH_SIZES for p in LEADER_BIASES}
    free = run_seed(7, keep_trace=True)
    pinned = run_seed(7, keep_trace=True, max_batch_entries=free.max_batch_entries, leader_bias=free.leader_bias)
    assert pinned.trace == free.trace and pinned.stats == free.stats
    assert free.trace[0].strip() == (f"config max_batch_entries={free.max_batch_entries} "
                                     f"leader_bias={free.leader_bias:g}")
    other = 4 if free.max_batch_entries == 1 else 1
    assert run_seed(7, keep_trace=True, max_batch_entries=other).trace != free.trace


def test_leader_bias_one_aims_every_crash_and_partition_at_the_leader() -> None:
    c = Cluster(3, random.Random(3), leader_bias=1.0, drop_rate=0.0, dup_rate=0.0)
    _elect(c, "n2", ["n1", "n3"])
    assert {c._victim() for _ in range(20)} == {"n2"}
    c.leader_bias = 0.0
    assert len({c._victim() for _ in range(60)}) == 3


@pytest.mark.parametrize(("flag", "value"), [("--max-batch-entries", "0"), ("--max-batch-entries", "x"),
                                             ("--leader-bias", "1.5"), ("--leader-bias", "nan?")])
def test_cli_rejects_bad_pins_with_exit_2(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--seeds", "1", flag, value])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
