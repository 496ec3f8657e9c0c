"""docs/protocol.md is generated from the tables and must not go stale."""

from pathlib import Path

from system_under_test.protocol.doc import render


def test_committed_protocol_doc_is_current() -> None:
    path = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
    fix = "python -m system_under_test.protocol.doc > docs/protocol.md"
    assert path.read_text() == render(), f"docs/protocol.md is stale: run {fix}"
