"""Which controller leads, from every controller's metadata answer (systems.splitbrain.db.leader_of, pure)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from systems.splitbrain.db import leader_of

A, B, C = "10.77.1.1:9101", "10.77.1.2:9101", "10.77.1.3:9101"


def md(term: int, *, leads: bool = False, hint: str | None = None) -> dict[str, Any]:
    return {"is_leader": leads, "term": term, "leader_addr": hint}


def test_an_isolated_controller_that_knows_no_leader_does_not_hide_the_one_the_others_elected() -> None:
    # the old leader A, cut off, has stepped down and knows no leader; B leads in term 3
    assert leader_of({A: md(2), B: md(3, leads=True, hint=B), C: md(3, hint=B)}) == B


def test_the_highest_term_wins_between_two_that_claim_to_lead() -> None:
    assert leader_of({A: md(2, leads=True, hint=A), B: md(3, leads=True, hint=B)}) == B


def test_without_a_claim_the_freshest_hint_counts_and_nothing_known_is_none() -> None:
    assert leader_of({A: md(4, hint=C), B: md(2, hint=A)}) == C
    assert leader_of({A: md(1), B: md(1)}) is None and leader_of({}) is None


@given(st.dictionaries(st.sampled_from([A, B, C]), st.fixed_dictionaries({
    "is_leader": st.booleans(), "term": st.integers(0, 9) | st.none(),
    "leader_addr": st.sampled_from([A, B, C, None])})))
def test_the_answer_is_a_controller_that_claims_or_was_named(answers: dict[str, dict[str, Any]]) -> None:
    got = leader_of(answers)
    claimed = {a for a, m in answers.items() if m["is_leader"]}
    named = {m["leader_addr"] for m in answers.values() if m["leader_addr"]}
    assert got in claimed if claimed else (got in named if named else got is None)
