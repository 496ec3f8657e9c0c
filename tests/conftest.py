"""Suite-wide test settings.

Hypothesis's per-example deadline (200 ms by default) is a wall-clock assertion: on a busy or shared
machine an ordinary example can take longer and the test fails for no fault of the code.  Speed belongs
in bench/, so the whole suite runs with no deadline; tests still bound their work by example counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("splitbrain", deadline=None)
settings.load_profile("splitbrain")


@pytest.fixture
def browser() -> Iterator[Any]:
    """A real headless Chromium (selenium WebDriver); skips, naming what is missing, on an unset machine."""
    from harness.testing.browser import chromium, missing

    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    with chromium() as driver:
        yield driver
