"""Suite-wide test settings.

Hypothesis's per-example deadline (200 ms by default) is a wall-clock assertion: on a busy or shared
machine an ordinary example can take longer and the test fails for no fault of the code.  Speed belongs
in bench/, so the whole suite runs with no deadline; tests still bound their work by example counts.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("splitbrain", deadline=None)
settings.load_profile("splitbrain")
