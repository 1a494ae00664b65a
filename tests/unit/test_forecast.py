"""The look-ahead floor: each term on hand-made needs with known answers; the gate's per-tick call
equals the simulator's series; the knobs come from the gate config and bad values are named."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.config import Capacity, ConfigError, ServicePolicy
from offhours.scripts.policy.forecast import (
    forecast_required,
    forecast_series,
    history_ticks,
    reaction_seconds,
    trailing_max,
)

POLICY = ServicePolicy("chat", Capacity(requests_per_second=1.0), headroom=0.0, trend=False, volatility_headroom_max=0.0)


def test_all_terms_off_gives_no_floor() -> None:
    assert forecast_series(np.array([1.0, 2.0]), POLICY, 60.0) is None
    assert forecast_required([1.0, 2.0], POLICY, 60.0) is None


def test_trend_extrapolates_the_rise_of_the_last_reaction_time() -> None:
    policy = dataclasses.replace(POLICY, trend=True)
    # Reaction 120 s = 2 ticks: at tick 3 the need rose 1 -> 3 over 2 ticks, so 3 + 2 is needed soon.
    floor = forecast_series(np.array([1.0, 1.0, 2.0, 3.0, 3.0, 3.0]), policy, 60.0, reaction=120.0)
    assert floor is not None and floor.tolist() == [1, 1, 3, 5, 4, 3]


def test_volatility_headroom_follows_the_recent_rise_within_bounds() -> None:
    policy = dataclasses.replace(POLICY, headroom=0.1, volatility_headroom_max=0.5, volatility_lookback_seconds=120.0)
    floor = forecast_series(np.array([2.0, 2.0, 4.0, 4.0, 4.0, 4.0]), policy, 60.0, reaction=60.0)
    # The 2 -> 4 rise (100%) is capped at 50% for the 2-tick lookback, then the margin falls back to 10%.
    assert floor is not None and floor.tolist() == [3, 3, 6, 6, 6, 5]


def test_time_of_day_floor_is_yesterdays_need_over_the_coming_reaction_time() -> None:
    policy = dataclasses.replace(POLICY, time_of_day_days=1)
    # 6-hour ticks: a day is 4 ticks; yesterday's 00:00-06:00 held a 5, so today's 00:00 needs 5.
    floor = forecast_series(np.array([1.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), policy, 21600.0, reaction=21600.0)
    assert floor is not None and floor.tolist() == [0, 0, 0, 1, 5, 5, 1, 1]


def test_reaction_time_is_tick_plus_grace_cap_plus_cold_start() -> None:
    assert reaction_seconds(POLICY, 60.0) == 60 + 120 + 240
    assert reaction_seconds(dataclasses.replace(POLICY, cold_start_seconds=30.0, max_grace_seconds=20.0), 15.0) == 65


def test_trailing_max_matches_the_definition() -> None:
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    for width in range(1, 10):
        assert trailing_max(x, width).tolist() == [max(x[max(0, i - width + 1):i + 1]) for i in range(len(x))]


@settings(max_examples=60, deadline=None)
@given(
    needs=st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=1, max_size=80),
    trend=st.booleans(),
    vol=st.sampled_from([0.0, 0.4, 1.5]),
    lookback=st.sampled_from([60.0, 300.0, 900.0]),
    days=st.integers(0, 2),
    headroom=st.sampled_from([0.0, 0.2, 1.0]),
)
def test_the_gates_per_tick_floor_equals_the_simulators_series(needs: list[float], trend: bool, vol: float,
                                                               lookback: float, days: int, headroom: float) -> None:
    """Invariant: the floor at tick i depends only on the last history_ticks ticks, so the gate (a tail
    of the history) and the simulator (the whole series at once) agree, and no term lowers the need."""
    policy = dataclasses.replace(POLICY, trend=trend, volatility_headroom_max=vol, volatility_lookback_seconds=lookback,
                                 time_of_day_days=days, headroom=headroom)
    tick = 1800.0  # a day is 48 ticks, so the time-of-day term has history within 80 ticks
    series = forecast_series(np.array(needs), policy, tick, reaction=3600.0)
    if series is None:
        assert not trend and vol == 0 and days == 0
        return
    keep = history_ticks(policy, tick, 3600.0)
    for i in range(len(needs)):
        assert forecast_required(needs[max(0, i + 1 - keep):i + 1], policy, tick, 3600.0) == series[i]
        if trend or vol:
            assert series[i] >= np.ceil(needs[i] * (1 + headroom) - 1e-9)


def _config(**knobs: object) -> dict[str, object]:
    return {"metrics": {"source": "direct"},
            "services": {"chat": {"capacity": {"requestsPerSecond": 1}, **knobs}}}


def test_gate_config_reads_the_look_ahead_knobs() -> None:
    chat = parse_config(_config(coldStartSeconds=45, maxGraceSeconds=30, trend=True, volatilityHeadroomMax=0.9,
                                volatilityLookbackSeconds=7200, timeOfDayDays=3)).service("chat")
    assert (chat.cold_start_seconds, chat.max_grace_seconds, chat.trend, chat.volatility_headroom_max,
            chat.volatility_lookback_seconds, chat.time_of_day_days) == (45, 30, True, 0.9, 7200, 3)
    default = parse_config(_config()).service("chat")
    assert (default.cold_start_seconds, default.trend, default.volatility_headroom_max,
            default.volatility_lookback_seconds, default.time_of_day_days) == (None, True, 1.0, 21600.0, 0)
    # the trend and volatility terms are on by default (bench/results/frontier.json's point)


@pytest.mark.parametrize("knob, value, message", [
    ("coldStartSeconds", -1, "services.chat.coldStartSeconds: -1 is less than the minimum"),
    ("trend", "yes", "services.chat.trend: 'yes' is not of type 'boolean'"),
    ("volatilityLookbackSeconds", 0, "services.chat.volatilityLookbackSeconds: 0 is less than or equal to"),
    ("timeOfDayDays", 15, "services.chat.timeOfDayDays: 15 is greater than the maximum"),
])
def test_bad_look_ahead_knob_is_named(knob: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(**{knob: value}))


# -- the cold start, measured --------------------------------------------------------------------
def test_the_cold_start_without_measurements_is_the_configured_prior_or_the_default() -> None:
    from offhours.scripts.policy.forecast import DEFAULT_COLD_START_SECONDS, cold_start_estimate

    assert cold_start_estimate(90.0, []) == 90.0
    assert cold_start_estimate(None, []) == DEFAULT_COLD_START_SECONDS


def test_a_few_fast_starts_move_the_estimate_a_little_many_move_it_to_their_high_quantile() -> None:
    from offhours.scripts.policy.forecast import cold_start_estimate

    one = cold_start_estimate(240.0, [60.0])
    assert 60.0 < one < 240.0 and one > 180.0  # one fast start does not cut the budget to a quarter
    many = cold_start_estimate(240.0, [60.0] * 27 + [100.0] * 3)  # p90 of 30 starts is 100
    assert many == (3 * 240.0 + 30 * 100.0) / 33


def test_slow_starts_lengthen_the_reaction_time_and_garbage_is_ignored() -> None:
    from offhours.scripts.policy.forecast import cold_start_estimate

    assert cold_start_estimate(240.0, [600.0] * 10) > 500.0
    assert cold_start_estimate(240.0, [float("nan"), float("inf"), -5.0]) == 240.0


def test_the_reaction_time_counts_the_check_period_not_the_tick_when_checks_run() -> None:
    policy = ServicePolicy("chat", Capacity(requests_per_second=1.0), cold_start_seconds=240.0, max_grace_seconds=30.0)
    assert reaction_seconds(policy, 60.0) == 60.0 + 30.0 + 240.0
    assert reaction_seconds(policy, 60.0, 15.0) == 15.0 + 30.0 + 240.0
