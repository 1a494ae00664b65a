"""Targets that look ahead: a floor on the replicas a service needs soon, from its own recent history.

Pure. `decide` reacts to the load it reads now; by the time reclaimed replicas serve, one reaction
time (a tick to see the rise, the research pod's grace, the vLLM cold start) has passed. Three
optional terms, each a policy knob, look over that reaction time and give `decide` a floor through
its `forecast_required` parameter (a floor can only reclaim earlier or lend less):

- trend (`trend`): the rise over the last reaction time, extrapolated over the next one;
- volatility-aware headroom (`volatilityHeadroomMax` > 0): the margin follows the largest rise
  within one reaction time seen over the last `volatilityLookbackSeconds`, between the policy's
  `headroom` and that maximum;
- time of day (`timeOfDayDays` > 0): the largest need over the coming reaction time at the same
  time on each of the previous days.

The input is the service's need per tick (fractional replicas, from the rates, before headroom),
oldest first. `forecast_series` computes the floor for every tick of a history at once (the
simulator); `forecast_required` the floor for the last tick (the gate). The value at tick i uses
only ticks i-`history_ticks`+1..i, so both give the same answer from the same history.
"""

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from offhours.scripts.policy.config import ServicePolicy

DAY_SECONDS = 86400.0
DEFAULT_COLD_START_SECONDS = 240.0
COLD_START_QUANTILE = 0.9  # of the measured starts: the slow starts are the ones serving waits for
COLD_START_PRIOR_WEIGHT = 3  # the configured value counts as this many measured starts


def reaction_seconds(policy: ServicePolicy, tick_seconds: float, detect_seconds: float | None = None) -> float:
    """Seconds from a rise to the reclaimed replicas serving: seeing it, the grace cap, the cold start.

    A rise is seen within `detect_seconds` (the reclaim check's period) where given, else within a tick.
    """
    return (tick_seconds if detect_seconds is None else detect_seconds) + return_seconds(policy)


def return_seconds(policy: ServicePolicy) -> float:
    """Seconds from a reclaim's decision to its replicas serving: the victims' grace cap, then the cold start.

    The gate's one return bound: the look-ahead budgets it after a rise is seen, and a lending window's end
    is met by starting the return this long before it (`window.opening`).
    """
    cold = policy.cold_start_seconds if policy.cold_start_seconds is not None else DEFAULT_COLD_START_SECONDS
    return policy.max_grace_seconds + cold


def cold_start_estimate(prior: float | None, starts: list[float]) -> float:
    """Return the cold start to plan with: a high quantile of measured replica starts, drawn toward the prior.

    With no measurement it is the prior (or DEFAULT_COLD_START_SECONDS); each measured start weighs
    as much as a `1 / COLD_START_PRIOR_WEIGHT` of the prior, so a few fast starts do not shorten the
    reaction time the look-ahead budgets for, and many do. Values that are not finite and >= 0 are ignored.
    """
    base = DEFAULT_COLD_START_SECONDS if prior is None else prior
    good = sorted(s for s in starts if isinstance(s, (int, float)) and math.isfinite(s) and s >= 0)
    if not good:
        return base
    measured = float(np.quantile(np.asarray(good), COLD_START_QUANTILE, method="higher"))
    return (COLD_START_PRIOR_WEIGHT * base + len(good) * measured) / (COLD_START_PRIOR_WEIGHT + len(good))


def _ticks(seconds: float, tick_seconds: float) -> int:
    return max(1, math.ceil(seconds / tick_seconds - 1e-9))


def enabled(policy: ServicePolicy) -> bool:
    """Whether any look-ahead term is on."""
    return policy.trend or policy.volatility_headroom_max > 0 or policy.time_of_day_days > 0


def history_ticks(policy: ServicePolicy, tick_seconds: float, reaction: float) -> int:
    """Ticks of history (the current one included) the floor of one tick depends on."""
    horizon = _ticks(reaction, tick_seconds)
    need = 1
    if policy.trend:
        need = max(need, horizon + 1)
    if policy.volatility_headroom_max > 0:
        need = max(need, _ticks(policy.volatility_lookback_seconds, tick_seconds) + horizon + 1)
    if policy.time_of_day_days > 0:
        need = max(need, policy.time_of_day_days * _ticks(DAY_SECONDS, tick_seconds) + 1)
    return need


def exact_ticks(policy: ServicePolicy, tick_seconds: float, reaction: float) -> int:
    """Ticks of history the trend and volatility terms read tick by tick (the time-of-day term reads maxima)."""
    return history_ticks(replace(policy, time_of_day_days=0), tick_seconds, reaction)


def _shift(x: np.ndarray, by: int, fill: float) -> np.ndarray:
    """Return x moved `by` places later (x[i - by] at i), `fill` where that is before the start."""
    if by <= 0:
        return x
    out = np.full_like(x, fill)
    if by < x.shape[0]:
        out[by:] = x[:-by]
    return out


def trailing_max(x: np.ndarray, width: int) -> np.ndarray:
    """max(x[i-width+1..i]) for every i (fewer at the start), in O(n log width); NaN (a gap) is no value."""
    out, span = x.astype(np.float64), 1
    while span * 2 <= width:
        out = np.fmax(out, _shift(out, span, -np.inf))
        span *= 2
    if span < width:
        out = np.fmax(out, _shift(out, width - span, -np.inf))
    return out


def _whole(need: np.ndarray, headroom: float | np.ndarray) -> np.ndarray:
    return np.ceil(need * (1.0 + headroom) - 1e-9)


def forecast_series(needs: np.ndarray, policy: ServicePolicy, tick_seconds: float,
                    reaction: float | None = None) -> np.ndarray | None:
    """Return the floor (whole replicas) at every tick of `needs`, or None if no term is on."""
    if not enabled(policy):
        return None
    reaction = reaction_seconds(policy, tick_seconds) if reaction is None else reaction
    needs = np.asarray(needs, dtype=np.float64)
    horizon = _ticks(reaction, tick_seconds)
    floor = np.zeros(needs.shape[0])
    if policy.trend:
        before = _shift(needs, horizon, np.nan)
        rise = np.where(np.isnan(before), 0.0, np.maximum(0.0, needs - before))
        floor = np.maximum(floor, _whole(needs + rise, policy.headroom))
    if policy.volatility_headroom_max > 0:
        # The rise of each tick over the lowest need of the reaction time before it; its maximum over
        # the lookback sets the margin, within [headroom, volatilityHeadroomMax].
        low = -trailing_max(-_shift(needs, 1, np.inf), horizon)
        some = np.isfinite(low) & (low > 1e-6)  # a rise from (almost) nothing has no ratio
        rise = np.where(some, needs / np.where(some, low, 1.0) - 1.0, 0.0)
        recent = trailing_max(rise, _ticks(policy.volatility_lookback_seconds, tick_seconds) + 1)
        margin = np.clip(recent, policy.headroom, max(policy.headroom, policy.volatility_headroom_max))
        floor = np.maximum(floor, _whole(needs, margin))
    if policy.time_of_day_days > 0:
        day = _ticks(DAY_SECONDS, tick_seconds)
        ahead = trailing_max(needs, horizon + 1)  # at i + horizon: the max over i..i+horizon
        for d in range(1, policy.time_of_day_days + 1):
            # The need over the coming reaction time, `d` days ago: ahead[i - d*day + horizon].
            past = _shift(ahead, d * day - horizon, -np.inf) if d * day > horizon else ahead
            floor = np.maximum(floor, np.where(np.isfinite(past), _whole(np.maximum(past, 0.0), policy.headroom), 0.0))
    return floor


def forecast_required(history: np.ndarray | Sequence[float | None], policy: ServicePolicy, tick_seconds: float,
                      reaction: float | None = None) -> int | None:
    """Return the floor for the last tick of `history` (needs per tick, oldest first), or None if off.

    `history` should hold the last `history_ticks(...)` ticks; a shorter one is treated as the
    start of the service's history (terms that lack data add nothing). A tick the gate missed is None
    (or NaN): a gap, which no term reads as a need, and which moves nothing before it out of its place.
    """
    needs = history.astype(np.float64) if isinstance(history, np.ndarray) else \
        np.asarray([math.nan if n is None else n for n in history], dtype=np.float64)
    series = forecast_series(needs, policy, tick_seconds, reaction)
    if series is None or series.shape[0] == 0 or not math.isfinite(series[-1]):
        return None
    return int(series[-1])
