"""A rise without precedent, as scripts/simulate/precedent.py defines it, on planted rises; and the delay it explains."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.simulate.precedent import (
    DAY,
    MIN_RISE,
    PRECEDENT_FACTOR,
    attributed_delay,
    causal_precedent,
    largest_rise_ratio,
    rise_events,
    rise_ratios,
    split_delay,
    without_precedent,
)

HORIZON = 5


def _flat_with_steps(days: int, steps: list[tuple[int, float]]) -> np.ndarray:
    """A flat need of 10 replicas with a step to (1 + size) times it for an hour at each (minute, size)."""
    need = np.full(days * DAY, 10.0)
    for at, size in steps:
        need[at:at + 60] *= 1.0 + size
    return need


def test_a_planted_step_is_one_rise_event_of_its_size() -> None:
    need = _flat_with_steps(1, [(600, 1.0)])
    events = rise_events(rise_ratios(need, HORIZON))
    assert len(events) == 1
    assert events[0].size == 1.0
    assert events[0].start == 600 - HORIZON and events[0].end == 599  # the minutes from which the step is within reach


def test_a_step_beyond_the_factor_times_the_fitting_days_rise_has_no_precedent() -> None:
    fit = _flat_with_steps(1, [(600, 0.4)])
    precedent = largest_rise_ratio(fit, HORIZON)
    assert abs(precedent - 0.4) < 1e-9
    small = rise_events(rise_ratios(_flat_with_steps(1, [(300, 0.55)]), HORIZON))
    large = rise_events(rise_ratios(_flat_with_steps(1, [(300, 0.65)]), HORIZON))
    assert without_precedent(small, precedent) == []  # 0.55 <= 1.5 x 0.4
    assert [e.size for e in without_precedent(large, precedent)] == [large[0].size]  # 0.65 > 0.6


def test_a_rise_below_the_minimum_is_no_event_and_a_calm_history_still_needs_the_factor() -> None:
    assert rise_events(rise_ratios(_flat_with_steps(1, [(300, MIN_RISE * 0.9)]), HORIZON)) == []
    modest = rise_events(rise_ratios(_flat_with_steps(1, [(300, MIN_RISE * PRECEDENT_FACTOR * 0.9)]), HORIZON))
    assert modest and without_precedent(modest, 0.0) == []  # a calm history does not make every rise unprecedented


def test_a_trace_precedent_is_every_earlier_day_the_first_its_own() -> None:
    need = _flat_with_steps(3, [(600, 1.0), (DAY + 600, 0.3), (2 * DAY + 600, 2.0)])
    precedent = causal_precedent(need, HORIZON)
    assert precedent[0] == 1.0 and precedent[DAY] == 1.0 and precedent[2 * DAY] == 1.0
    events = without_precedent(rise_events(rise_ratios(need, HORIZON)), precedent)
    assert [e.start // DAY for e in events] == [2]  # day 0's step is its own precedent; day 2's triples day 0's


def test_delay_is_attributed_to_a_rise_only_when_its_episode_starts_within_it_or_one_reaction_time_after() -> None:
    need = _flat_with_steps(1, [(600, 2.0)])
    rises = rise_events(rise_ratios(need, HORIZON))
    delayed = np.zeros(DAY, dtype=bool)
    delayed[601:612] = True  # the step's reaction time
    delayed[900:905] = True  # later: the rise does not explain it
    apart = attributed_delay(delayed, rises, HORIZON)
    assert apart[601:612].all() and not apart[900:905].any()


def test_a_fleet_minute_counts_apart_only_when_every_delayed_service_is_delayed_by_such_a_rise() -> None:
    need = _flat_with_steps(1, [(600, 2.0)])
    waits = {"a": np.zeros(DAY), "b": np.zeros(DAY)}
    waits["a"][601:612] = 60.0
    waits["b"][605:607] = 60.0  # b has no rise: its delay is its own
    total, apart = split_delay(waits, {"a": need, "b": np.full(DAY, 10.0)}, {"a": 0.1, "b": 0.1},
                               {"a": HORIZON, "b": HORIZON}, 30.0)
    assert total.sum() == 11
    assert apart.sum() == 9 and not apart[605:607].any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, DAY - 61), st.floats(0.0, 4.0)), max_size=6),
       st.floats(0.0, 3.0), st.floats(0.0, 3.0), st.lists(st.integers(0, DAY - 1), max_size=40))
def test_more_precedent_never_excuses_more_delay(steps: list[tuple[int, float]], p1: float, p2: float,
                                                  late: list[int]) -> None:
    """Invariants: the delay told apart is part of the total; a larger precedent never tells more apart."""
    need = _flat_with_steps(1, steps)
    wait = np.zeros(DAY)
    wait[late] = 60.0
    lo, hi = sorted((p1, p2))
    args = ({"s": need}, {"s": HORIZON}, 30.0)
    total, apart_lo = split_delay({"s": wait}, args[0], {"s": lo}, args[1], args[2])
    _, apart_hi = split_delay({"s": wait}, args[0], {"s": hi}, args[1], args[2])
    assert not (apart_lo & ~total).any()
    assert not (apart_hi & ~apart_lo).any()
