"""A real headless Chromium for browser tests of the web UI and the dashboard.

Debian's ``chromium`` and ``chromium-driver`` packages (installed by ``scripts/setup.sh``) driven through
selenium.  The driver and the browser are named by path so selenium never tries to fetch either: the
machines this runs on reach no download site.  :func:`missing` says why a browser cannot be started, so
a test can skip with that reason on a machine that was not set up, instead of failing obscurely.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

_BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _browser_path() -> str | None:
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def missing() -> str | None:
    """Why no browser can be started here (None when one can): the package or driver that is absent."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (run scripts/setup.sh)"
    if _browser_path() is None:
        return "no chromium binary on PATH (Debian package chromium; run scripts/setup.sh)"
    if shutil.which("chromedriver") is None:
        return "no chromedriver on PATH (Debian package chromium-driver; run scripts/setup.sh)"
    return None


@contextmanager
def chromium(width: int = 1400, height: int = 1000, timeout_s: float = 30.0) -> Iterator[WebDriver]:
    """A headless Chromium WebDriver, quit on exit (also when the test fails).

    ``timeout_s`` bounds page loads and scripts so a hung page fails the test instead of hanging it.
    """
    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(_browser_path())
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--window-size={width},{height}"):
        options.add_argument(arg)
    service = Service(executable_path=str(shutil.which("chromedriver")), env=dict(os.environ))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        driver.set_page_load_timeout(timeout_s)
        driver.set_script_timeout(timeout_s)
        yield driver
    finally:
        driver.quit()


def screenshot(driver: WebDriver, path: str | Path) -> Path:
    """Save a PNG of the whole page (not just the viewport) at ``path``; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    height = int(driver.execute_script(
        "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)") or 0)
    width = int(driver.get_window_size()["width"])
    if height > 0:
        driver.set_window_size(width, min(max(height + 120, 600), 8000))
    if not driver.save_screenshot(str(out)):
        raise RuntimeError(f"could not write screenshot {out}")
    return out
