"""The web UI is a view of stored runs: it reads them through harness.runs/harness.store and never imports a
command (commands/serve.py starts the web UI, so the dependency runs one way: commands -> web)."""

from __future__ import annotations

import ast
from pathlib import Path

WEB = Path(__file__).resolve().parents[3] / "harness" / "web"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, lazy and TYPE_CHECKING imports included (absolute form)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against harness.web
                base = ".".join(["harness", "web"][: 3 - node.level] + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def test_the_web_ui_never_imports_a_command() -> None:
    files = sorted(WEB.glob("*.py"))
    assert files
    bad = {f.name: sorted(m for m in _imports(f) if m == "harness.commands" or m.startswith("harness.commands."))
           for f in files}
    assert not {k: v for k, v in bad.items() if v}
