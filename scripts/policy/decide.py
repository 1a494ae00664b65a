"""The gate's decision for one service and one tick: how many replicas may be lent.

Give back fast, take slowly (ARCHITECTURE.md, serving safety rule 2): a reclaim happens on the first tick whose load needs it,
all at once; a lend needs every recommendation over the stabilisation window to allow it, and
grows by at most `max_lend_step` replicas a tick. No lending on missing, stale or partial data
(ARCHITECTURE.md, rule 1); after `failed_ticks_before_reclaim` such ticks in a row, everything is reclaimed.
The window counts only contiguous history: a gap longer than two ticks (the gate was down)
starts it again, so after an outage the gate observes a whole window before it lends.
"""

import math
from dataclasses import dataclass

from offhours.scripts.policy.capacity import Load, required_replicas
from offhours.scripts.policy.config import ServicePolicy


@dataclass(frozen=True)
class ServiceState:
    """What the gate remembers between ticks for one service (stored on the Deployment).

    `recommendations`: (time, required replicas) of the ticks inside the stabilisation window;
    `failed_ticks`: consecutive ticks without usable data.
    """

    recommendations: tuple[tuple[float, int], ...] = ()
    failed_ticks: int = 0


@dataclass(frozen=True)
class Decision:
    """The outcome of one tick for one service."""

    service: str
    action: str  # "lend", "reclaim" or "hold"
    target_lent: int
    lent: int
    required: int | None
    reason: str
    state: ServiceState
    ceiling: int = 0  # the most that stayed lendable over the whole window (>= target_lent)


def _hold_or_reclaim(service: str, lent: int, target: int, required: int | None, reason: str,
                     state: ServiceState) -> Decision:
    action = "reclaim" if target < lent else "hold"
    return Decision(service, action, min(target, lent), lent, required, reason, state)


def decide(
    *,
    now: float,
    policy: ServicePolicy,
    baseline: int,
    lent: int,
    load: Load | None,
    load_error: str | None,
    lending_allowed: bool,
    max_age_seconds: float,
    failed_ticks_before_reclaim: int,
    state: ServiceState,
    forecast_required: int | None = None,
    tick_seconds: float | None = None,
) -> Decision:
    """Decide the replicas lent after this tick.

    `forecast_required`, if given, is a floor on the replicas needed soon (e.g. ahead of a
    recurring daily ramp by the cold-start time): it can only make the gate reclaim earlier or
    lend less, never lend more. `tick_seconds`, if given, bounds the gap between two
    recommendations that still counts as one contiguous window (two ticks).
    """
    name = policy.name
    if not lending_allowed:
        return _hold_or_reclaim(name, lent, 0, None, "outside the lending window", ServiceState())

    problem = load_error
    if problem is None and load is None:
        problem = "no load data"
    if problem is None and load is not None and load.age_seconds > max_age_seconds:
        problem = f"load data is {load.age_seconds:.0f} s old (max {max_age_seconds:.0f} s)"
    if problem is None and load is not None and not load.complete:
        problem = f"partial data: {load.pods_read} of {load.pods_expected} ready pods read"
    bad = _not_finite(load) if load is not None else None
    if bad is not None:
        problem, load = f"unusable load reading: {bad}", None

    in_service = baseline - lent
    required = required_replicas(load, policy, in_service) if load is not None else None
    if required is not None and forecast_required is not None:
        required = max(required, forecast_required)

    if problem is not None:
        failed = state.failed_ticks + 1
        new_state = ServiceState((), failed)
        if failed >= failed_ticks_before_reclaim:
            return _hold_or_reclaim(name, lent, 0, required,
                                    f"{problem}; {failed} failed ticks in a row: reclaim everything", new_state)
        if required is not None and required > in_service:
            # Even a partial reading is a lower bound on the load: reclaim what it already needs.
            return _hold_or_reclaim(name, lent, max(0, baseline - required), required,
                                    f"{problem}; the part read already needs {required} replicas", new_state)
        return _hold_or_reclaim(name, lent, lent, required, f"{problem}: no lending", new_state)

    assert required is not None
    window_start = now - policy.stabilization_seconds
    # One pass over the window: the ticks still inside it, whether history reaches its start, the peak.
    max_gap = 2 * tick_seconds if tick_seconds else math.inf
    kept: list[tuple[float, int]] = []
    covered, peak, previous = False, required, None
    for rec in (*state.recommendations, (now, required)):
        if previous is not None and rec[0] - previous > max_gap:
            kept, covered, peak = [], False, required  # the gate was away: the window starts again
        previous = rec[0]
        if rec[0] <= window_start:
            covered = True
        if rec[0] >= window_start:
            kept.append(rec)
            if rec[1] > peak:
                peak = rec[1]
    new_state = ServiceState(tuple(kept), 0)
    allowed_now = max(0, baseline - required)
    if allowed_now < lent:
        return Decision(name, "reclaim", allowed_now, lent, required,
                        f"load needs {required} of {baseline} replicas", new_state)

    # Hysteresis: lend only what stays lendable with `lend_hysteresis` replicas to spare, so a load
    # that wavers by a replica does not stop and restart a research job every few minutes.
    allowed_stable = max(0, baseline - peak - policy.lend_hysteresis)
    if covered and allowed_stable > lent:
        target = min(allowed_stable, lent + policy.max_lend_step)
        return Decision(name, "lend", target, lent, required,
                        f"load has needed at most {peak} of {baseline} replicas "
                        f"for {policy.stabilization_seconds:.0f} s", new_state, ceiling=allowed_stable)
    if allowed_stable > lent:
        reason = f"load is low but not yet for {policy.stabilization_seconds:.0f} s"
    else:
        reason = f"load needs {required} of {baseline} replicas; {lent} lent"
    return Decision(name, "hold", lent, lent, required, reason, new_state)


def _not_finite(load: Load) -> str | None:
    """Name the first quantity of the load that is not a finite, non-negative number (a NaN, an overflow)."""
    for name in ("request_rate", "prompt_token_rate", "generation_token_rate", "running", "waiting", "kv_cache_usage"):
        value = getattr(load, name)
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            return f"{name} = {value}"
    return None
