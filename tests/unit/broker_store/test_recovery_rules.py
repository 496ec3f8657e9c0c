"""What a store trusts when it opens (``broker/store/recovery.py``): the clamped confirm offset, durable losses."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from system_under_test.broker.store.recovery import DurableLoss, durable_loss_after, recovered_confirm_offset

offsets = st.integers(min_value=0, max_value=10**9)


@given(stored=st.one_of(st.none(), offsets), lo=offsets, span=offsets)
def test_the_recovered_confirm_offset_lies_inside_the_recovered_log(stored: int | None, lo: int, span: int) -> None:
    hi = lo + span
    confirm = recovered_confirm_offset(stored, lo, hi)
    assert lo <= confirm <= hi
    if stored is not None and lo <= stored <= hi:
        assert confirm == stored, "a confirm offset inside the log is kept as it was"


def test_a_log_cut_below_its_confirm_offset_takes_the_confirm_offset_down_with_it() -> None:
    # the checkpoint confirmed 900 bytes, the log came back with 640: replication must not find 640..900
    # already confirmed when it refills them
    assert recovered_confirm_offset(900, 0, 640) == 640
    assert recovered_confirm_offset(None, 128, 640) == 128


@given(end=offsets, durable=offsets)
def test_a_log_ending_below_its_durable_offset_lost_records(end: int, durable: int) -> None:
    loss = durable_loss_after(None, end, durable, lambda off: 7)
    if end >= durable:
        assert loss is None
    else:
        assert loss == DurableLoss(durable, end, 7)


def test_an_earlier_larger_claim_stands_with_its_epoch() -> None:
    known = DurableLoss(1000, 400, 3)
    assert durable_loss_after(known, 300, 600, lambda off: 9) == DurableLoss(1000, 300, 3)
    assert durable_loss_after(known, 300, 1200, lambda off: 9) == DurableLoss(1200, 300, 9)
    assert durable_loss_after(DurableLoss(None, 5), 300, 1200, None) == DurableLoss(None, 300, None)
    assert durable_loss_after(known, 1200, 1200, None) is None, "no new loss: the known one is kept by the caller"
