"""Which part of a service's history an estimate may replay: after its last hole of more than a few minutes."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.estimate import MAX_BRIDGED_MINUTES, usable_from


def known(length: int, *holes: tuple[int, int]) -> np.ndarray:
    mask = np.ones(length, dtype=np.bool_)
    for first, last in holes:
        mask[first:last + 1] = False
    return mask


def test_a_history_without_holes_is_used_whole() -> None:
    assert usable_from(known(100)) == 0


def test_short_holes_are_bridged_and_a_long_one_cuts_everything_before_it() -> None:
    assert usable_from(known(100, (10, 10 + MAX_BRIDGED_MINUTES - 1))) == 0
    assert usable_from(known(100, (10, 10 + MAX_BRIDGED_MINUTES))) == 11 + MAX_BRIDGED_MINUTES
    assert usable_from(known(200, (0, 49), (120, 125))) == 50  # the service's first sample, then a blip
    assert usable_from(known(200, (0, 49), (120, 150))) == 151  # the last long hole counts


def test_a_history_that_is_all_hole_has_nothing_to_use() -> None:
    assert usable_from(known(40, (0, 39))) == 40
    assert usable_from(known(40, (20, 39))) == 40  # nothing sampled lately: nothing after the hole


@given(st.lists(st.booleans(), min_size=1, max_size=300))
def test_what_is_used_holds_no_long_hole_and_starts_right_after_one(mask: list[bool]) -> None:
    sampled = np.array(mask, dtype=np.bool_)
    first = usable_from(sampled)
    rest = sampled[first:]
    run = 0
    for value in rest:
        run = 0 if value else run + 1
        assert run <= MAX_BRIDGED_MINUTES
    if first:
        assert not sampled[first - MAX_BRIDGED_MINUTES - 1:first].any()
