"""The browser the UI tests drive is a real Chromium: it runs the page's script and renders pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.testing.browser import screenshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]

_PAGE = """<!doctype html><title>t</title>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked ' + (1 + 1)">go</button>
<p id="out">not yet</p>"""


def test_the_browser_runs_scripts_and_saves_screenshots(browser: Any, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(_PAGE)
    browser.get(page.as_uri())
    assert browser.find_element("id", "out").text == "not yet"
    browser.find_element("id", "go").click()
    assert browser.find_element("id", "out").text == "clicked 2"
    shot = screenshot(browser, tmp_path / "shots" / "page.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
