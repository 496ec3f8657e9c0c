"""The failing window of an invalid linearizability result (``checker/linearizable/_html.py``): the failing op,
the previous ok op and the linearized calls with their states, as JSON data the web UI draws."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from checker.linearizable import check, render_html
from checker.linearizable._html import failure_window
from checker.linearizable.gen import kv_history
from checker.models import make_model
from checker.timeline import window_svg


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_window_of_an_invalid_kv_history(seed: int) -> None:
    try:
        history = kv_history(random.Random(seed), clients=6, ops=120, keys=2, linearizable=False)
    except ValueError:  # the generator found no get to make stale in so few ops
        assume(False)
    res = check(history, make_model("kv"))
    w = failure_window(res)
    if res.valid is not False:
        assert w is None
        return
    assert w is not None and json.loads(json.dumps(w)) == w
    calls = {c["id"]: c for c in w["calls"]}
    fail = calls[w["failing"]]
    assert res.op is not None and fail["index"] == res.op.index
    if res.previous_ok is not None:
        assert calls[w["previous_ok"]]["index"] == res.previous_ok.index
    assert w["reason"] == (res.reason or "") and w["linearized_total"] == len(res.linearization)
    assert [t["k"] for t in w["linearized_tail"]] == list(range(len(res.linearization) - len(w["linearized_tail"]) + 1,
                                                               len(res.linearization) + 1))
    for c in w["calls"]:  # every shown call ends after the window starts and starts before the failing op returns
        assert c["start_ns"] <= fail["end_ns"]
    assert w["states"], w
    svg = window_svg(w)
    assert 'class="call failing"' in svg and "Why it cannot fit" in svg


def test_valid_result_has_no_window_and_the_page_has_the_picture(tmp_path: Path) -> None:
    ok = check(kv_history(random.Random(1), clients=4, ops=60, keys=2), make_model("kv"))
    assert ok.valid is True and failure_window(ok) is None
    for seed in range(50):
        bad = check(kv_history(random.Random(seed), clients=4, ops=200, keys=2, linearizable=False), make_model("kv"))
        if bad.valid is False:
            break
    page = render_html(bad, tmp_path / "t.html").read_text()
    assert '<svg' in page and 'class="call failing"' in page and "<script" not in page
