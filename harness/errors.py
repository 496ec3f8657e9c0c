"""The error a test spec is refused with, in the harness's lowest layer.

Workloads and nemesis packages validate their own part of a spec (``workloads[i].options``,
``nemesis.*``) and raise :class:`SpecError` for it, while :mod:`harness.spec` -- which reads the whole
spec -- sits above them (it validates schedules with :mod:`nemesis.schedule`).  The error lives here so
both can use it without a circle; :mod:`harness.spec` re-exports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SpecError"]


class SpecError(ValueError):
    """An invalid test spec.  Attributes: ``file``, ``key`` (dotted path), ``value``, ``allowed``."""

    def __init__(self, file: str, key: str, value: Any, allowed: str) -> None:
        self.file, self.key, self.value, self.allowed = file, key, value, allowed
        super().__init__(f"{file}: {key}: got {value!r:.200}; expected {allowed}")
