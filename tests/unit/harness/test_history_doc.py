"""docs/history-format.md is generated from checker/history.py; fail when the committed copy is stale."""

from __future__ import annotations

from pathlib import Path

from harness.history_doc import render

DOC = Path(__file__).resolve().parents[3] / "docs" / "history-format.md"


def test_history_format_doc_is_fresh() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/history-format.md is stale; regenerate with `python -m harness.history_doc > docs/history-format.md`"
    )


def test_doc_states_the_renumbering_rule() -> None:
    text = render()
    assert "process 2 continues\n   as 7" in text and "`info`" in text
