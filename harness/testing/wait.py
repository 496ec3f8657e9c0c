"""Waiting for something a test expects to happen, with a bound for hangs."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(pred: Callable[[], object], timeout_s: float, what: str, *, poll_s: float = 0.2) -> None:
    """Poll ``pred()`` until it is true; fail naming ``what`` after ``timeout_s``.  The bound is for hangs,
    not a speed: the property a test checks with it is that the thing happens at all."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(poll_s)
