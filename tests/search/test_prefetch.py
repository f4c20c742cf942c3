"""prefetched(): items prepared in a background thread, handed over in order, errors at their item."""

from __future__ import annotations

import threading

import pytest

from longembed.search.prefetch import prefetched
from longembed.search.stages import StageTimes


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_every_item_comes_back_once_in_order(depth: int) -> None:
    got = list(prefetched(range(50), lambda i: i * i, StageTimes(), depth=depth))
    assert got == [(i, i * i) for i in range(50)]


def test_an_error_in_prepare_is_raised_at_its_item() -> None:
    def prepare(i: int) -> int:
        if i == 3:
            raise ValueError("item 3 is bad")
        return i

    seen = []
    with pytest.raises(ValueError, match="item 3 is bad"):
        for item, _ in prefetched(range(10), prepare, StageTimes(), depth=2):
            seen.append(item)
    assert seen == [0, 1, 2]


def test_a_consumer_that_stops_early_stops_the_thread() -> None:
    before = threading.active_count()
    for item, _ in prefetched(range(1000), lambda i: i, StageTimes(), depth=2):
        if item == 2:
            break
    assert threading.active_count() == before
    assert not any(t.name == "longembed-prefetch" for t in threading.enumerate())


def test_prepare_runs_ahead_of_the_consumer_by_at_most_depth_items() -> None:
    prepared: list[int] = []
    for item, _ in prefetched(range(20), prepared.append, StageTimes(), depth=2):
        # item handed over; at most depth more are queued, and one more may be in prepare
        threading.Event().wait(0.01)
        assert len(prepared) <= item + 1 + 2 + 1
