"""Rises without precedent, and the queueing delay they cause, told apart from the rest (pure, numpy only).

The definition, fixed before any result was looked at (issue 34):

- The *rise* at minute m is how far the service's need (fractional replicas, before headroom) climbs over
  the next reaction time, relative to its level at m: max(need[m+1 .. m+R]) / need[m] - 1, R the reaction
  time in whole minutes. A level below `LEVEL_FLOOR` of the median need (of the minutes with any need) has no
  meaningful ratio and counts as no rise.
- A *rise event* is a maximal run of minutes whose rise is above `MIN_RISE`; its size is the largest rise in it.
- The *precedent* of a minute is the largest rise of the days the policy was fitted on: for `tune`, the fold's
  fitting days; for a whole trace (the frontier benchmark), every earlier whole day of the same trace, the
  first day being its own precedent (it must be seen before anything is excused, so none of its rises is).
- A rise event is *without precedent* when its size exceeds `PRECEDENT_FACTOR` times its start's precedent
  (and never when it is below `MIN_RISE` times that factor): no headroom fitted on those days stood for it.
- Queueing delay is *attributed* to such a rise when its episode (a maximal run of minutes with delay above the
  target) starts between the event's first minute and one reaction time after its last: the delay a rise no
  history foresaw costs is bounded by the reaction time, not by a knob, so it is reported apart, always
  beside the total.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DAY = 1440
LEVEL_FLOOR = 0.05  # of the median need: below it a level has no meaningful ratio
MIN_RISE = 0.2  # a climb of less than +20% within one reaction time is not a rise event
PRECEDENT_FACTOR = 1.5  # a rise more than 1.5x the largest the fitting days held has no precedent


@dataclass(frozen=True)
class RiseEvent:
    """A run of minutes from which the need climbs more than `MIN_RISE` within one reaction time."""

    start: int
    end: int  # last minute of the run (inclusive)
    size: float  # the largest rise in the run, relative to the level (0.5: +50%)


def rise_ratios(need: np.ndarray, horizon: int) -> np.ndarray:
    """Return each minute's rise over the next `horizon` minutes, relative to its level (0 where none)."""
    need = np.asarray(need, dtype=np.float64)
    n = need.shape[0]
    horizon = max(1, int(horizon))
    out = np.zeros(n)
    if n <= 1:
        return out
    padded = np.concatenate((need[1:], np.repeat(need[-1:], horizon)))
    ahead = np.lib.stride_tricks.sliding_window_view(padded, horizon).max(axis=1)[:n]
    serving = need[need > 0]
    floor = LEVEL_FLOOR * max(float(np.median(serving)) if serving.size else 0.0, 1e-12)
    ok = need > floor
    out[ok] = ahead[ok] / need[ok] - 1.0
    return np.maximum(out, 0.0)


def rise_events(ratios: np.ndarray) -> list[RiseEvent]:
    """Return the rise events: maximal runs of minutes whose rise is above `MIN_RISE`."""
    above = np.asarray(ratios) > MIN_RISE
    if not above.any():
        return []
    edges = np.diff(np.concatenate(([0], above.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [RiseEvent(int(s), int(e) - 1, float(np.max(ratios[s:e]))) for s, e in zip(starts, ends)]


def largest_rise_ratio(need: np.ndarray, horizon: int) -> float:
    """Return the largest rise of `need` within `horizon` minutes: what a fitting window holds as precedent."""
    ratios = rise_ratios(need, horizon)
    return float(ratios.max()) if ratios.size else 0.0


def causal_precedent(need: np.ndarray, horizon: int) -> np.ndarray:
    """Per minute, the largest rise of every earlier whole day (the first day: its own largest)."""
    ratios = rise_ratios(need, horizon)
    n = ratios.shape[0]
    days = max(1, -(-n // DAY))
    per_day = np.array([ratios[d * DAY:(d + 1) * DAY].max(initial=0.0) for d in range(days)])
    before = np.concatenate(([per_day[0]], np.maximum.accumulate(per_day)[:-1]))
    return np.repeat(before, DAY)[:n]


def without_precedent(events: Sequence[RiseEvent], precedent: float | np.ndarray) -> list[RiseEvent]:
    """Return the events larger than `PRECEDENT_FACTOR` times their precedent (a number, or one per minute)."""
    out = []
    for event in events:
        known = float(precedent if np.ndim(precedent) == 0 else np.asarray(precedent)[event.start])
        if event.size > PRECEDENT_FACTOR * max(known, MIN_RISE):
            out.append(event)
    return out


def attributed_delay(delayed: np.ndarray, rises: Sequence[RiseEvent], horizon: int) -> np.ndarray:
    """Return the minutes of `delayed` whose episode starts within a rise of `rises` or one `horizon` after it."""
    delayed = np.asarray(delayed, dtype=np.bool_)
    out = np.zeros_like(delayed)
    if not rises or not delayed.any():
        return out
    edges = np.diff(np.concatenate(([0], delayed.astype(np.int8), [0])))
    # Events are disjoint runs: sorted by start, their windows' ends are sorted too, so the last window
    # starting at or before an episode is the only one that can hold its start.
    windows = sorted((r.start, r.end + max(1, int(horizon))) for r in rises)
    lows = [w[0] for w in windows]
    for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
        k = int(np.searchsorted(lows, s, side="right"))
        if k and s <= windows[k - 1][1]:
            out[s:e] = True
    return out


def split_delay(waits: dict[str, np.ndarray], needs: dict[str, np.ndarray], precedent: dict[str, float | np.ndarray],
                horizon: dict[str, int], target_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (minutes with some service's delay above target, those only rises without precedent explain).

    Per service: its delayed minutes, and among them those attributed to its own rises without precedent;
    a fleet minute counts apart only if every service delayed in it is delayed by such a rise.
    """
    n = next(iter(waits.values())).shape[0] if waits else 0
    total = np.zeros(n, dtype=np.bool_)
    explained_only = np.zeros(n, dtype=np.bool_)
    other = np.zeros(n, dtype=np.bool_)
    for name, wait in waits.items():
        delayed = wait > target_seconds
        rises = without_precedent(rise_events(rise_ratios(needs[name], horizon[name])), precedent[name])
        apart = attributed_delay(delayed, rises, horizon[name])
        total |= delayed
        explained_only |= apart
        other |= delayed & ~apart
    return total, explained_only & ~other
