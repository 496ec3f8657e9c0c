"""The packet behaviour map (pure): one table of defaults read by both mechanisms, netem and the NFQUEUE shaper."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemesis.packet_behavior import DEFAULTS, REORDER_DELAY_MS, complete, netem_args, shaper_args


def _netem_delay_ms(args: list[str]) -> float:
    return float(args[args.index("delay") + 1].removesuffix("ms"))


def _shaper(args: list[str], flag: str) -> float:
    return float(args[args.index(flag) + 1])


def test_delay_without_time_means_the_table_default_under_both_mechanisms() -> None:
    default = float(DEFAULTS["delay"]["time_ms"])
    assert default > 0
    assert _netem_delay_ms(netem_args({"delay": {}})) == default
    assert _shaper(shaper_args({"delay": {}}), "--delay-ms") == default


def test_loss_and_duplicate_without_percent_mean_the_table_default_under_both() -> None:
    for name, flag in (("loss", "--loss"), ("duplicate", "--duplicate")):
        percent = float(DEFAULTS[name]["percent"])
        netem = netem_args({name: {}})
        assert netem == [name, f"{percent:g}%"]
        assert _shaper(shaper_args({name: {}}), flag) == percent / 100


def test_reorder_alone_gets_the_reorder_delay_and_the_shaper_reorders_by_jitter() -> None:
    assert complete({"reorder": {}})["delay"]["time_ms"] == REORDER_DELAY_MS
    assert netem_args({"reorder": {}}) == ["delay", f"{REORDER_DELAY_MS}ms", "0ms", "reorder", "20%", "75%"]
    shaper = shaper_args({"reorder": {}})
    assert _shaper(shaper, "--delay-ms") == REORDER_DELAY_MS
    assert _shaper(shaper, "--jitter-ms") == REORDER_DELAY_MS / 2


@pytest.mark.parametrize(("behavior", "words"), [
    ({"teleport": {}}, "unknown behaviour(s) ['teleport']"),
    ({"delay": {"time": 5}}, "behavior.delay: unknown parameter(s) ['time']"),
    ({"loss": 5}, "behavior.loss must be a mapping"),
])
def test_bad_behaviours_are_named(behavior: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match="start-packet") as err:
        netem_args(behavior)
    assert words in str(err.value)


def test_corrupt_is_refused_by_the_shaper_only() -> None:
    assert netem_args({"corrupt": {}}) == ["corrupt", f"{float(DEFAULTS['corrupt']['percent']):g}%"]
    with pytest.raises(ValueError, match="corrupt needs the kernel's sch_netem"):
        shaper_args({"corrupt": {}})


_PARAMS = {
    "delay": st.fixed_dictionaries({}, optional={"time_ms": st.integers(0, 500), "jitter_ms": st.integers(0, 50)}),
    "loss": st.fixed_dictionaries({}, optional={"percent": st.integers(0, 100)}),
    "duplicate": st.fixed_dictionaries({}, optional={"percent": st.integers(0, 100)}),
    "reorder": st.fixed_dictionaries({}, optional={"percent": st.integers(0, 100),
                                                   "correlation": st.integers(0, 100)}),
}


@given(st.fixed_dictionaries({}, optional=_PARAMS))
def test_both_mechanisms_read_the_same_delay_loss_and_duplicate(behavior: dict[str, dict[str, int]]) -> None:
    netem, shaper = netem_args(behavior), shaper_args(behavior)
    assert _shaper(shaper, "--delay-ms") == (_netem_delay_ms(netem) if "delay" in netem else 0.0)
    for name, flag in (("loss", "--loss"), ("duplicate", "--duplicate")):
        expected = float(netem[netem.index(name) + 1].removesuffix("%")) / 100 if name in netem else 0.0
        assert _shaper(shaper, flag) == pytest.approx(expected)
