"""The rule that picks the policy defaults from a sweep over several traces (pure; bench/bench_frontier.py runs it).

A point is one setting of the policy grid; on each trace it scores four figures: the share of the fixed
reference's GPU-hours lent (more is better), minutes with queueing delay above the target, SLO-minutes and
preemptions (fewer is better). The traces are the shipped ones (real traffic the project bundles) and the
stress traces (synthetic loads no shipped trace shows). The rule:

1. Frontier: keep the points that no other point dominates on any shipped trace. A point dominates another
   on a trace when it lends at least as much with no more delay-minutes, SLO-minutes and preemptions, and
   is better in one. (If every point is dominated somewhere, keep those dominated on the fewest traces.)
2. Safety: of those, keep the points with zero delay-minutes outside rises without precedent
   (scripts/simulate/precedent.py) on every shipped trace, and on each stress trace no more such minutes
   than its bound (the previous defaults' there: a new default is no worse under stress than the one it
   replaces). (If none is left, keep those with the fewest such minutes summed over the shipped traces.)
3. Choice: the best worst-trace share over every trace, shipped and stress; ties go to fewer preemptions
   summed over the traces, then fewer SLO-minutes, then the larger headroom.

A first version asked for step 1 on the stress traces too and for zero such minutes on every trace where
some point had zero; on the 216-point grid only 3 points (all at headroom 0.3) were undominated on all six
traces and none of them kept the shipped traces free of such delay, so it fell back to a point with 29 and
23 such minutes on m-small and m-mid (bench/results/frontier.json keeps that outcome under `firstRule`).
"""

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

P = TypeVar("P", bound=Hashable)


@dataclass(frozen=True)
class Figures:
    """What one point gave and risked on one trace."""

    share: float
    delay_minutes: int
    slo_minutes: int
    preemptions: int
    delay_without_precedent: int = 0  # of delay_minutes, those only rises without precedent explain

    @property
    def delay_with_precedent(self) -> int:
        """Delay-minutes a setting is answerable for: all but those rises without precedent explain."""
        return self.delay_minutes - self.delay_without_precedent


def dominates(a: Figures, b: Figures) -> bool:
    """Whether `a` lends at least as much as `b` with no more delay, SLO-minutes and preemptions, better in one."""
    no_worse = (a.share >= b.share and a.delay_minutes <= b.delay_minutes and a.slo_minutes <= b.slo_minutes
                and a.preemptions <= b.preemptions)
    better = (a.share > b.share or a.delay_minutes < b.delay_minutes or a.slo_minutes < b.slo_minutes
              or a.preemptions < b.preemptions)
    return no_worse and better


def dominated_on(point: P, results: Mapping[str, Mapping[P, Figures]]) -> list[str]:
    """Return the traces on which some other point dominates `point`."""
    return [trace for trace, row in results.items()
            if any(dominates(other, row[point]) for q, other in row.items() if q != point)]


def frontier_of(row: Mapping[P, Figures]) -> list[P]:
    """Return the points of one trace that no other point dominates there."""
    return [p for p, f in row.items() if not any(dominates(o, f) for q, o in row.items() if q != p)]


@dataclass(frozen=True)
class Choice:
    """The point chosen, and the sets each step of the rule kept."""

    point: Hashable
    undominated: tuple[Hashable, ...]
    safe: tuple[Hashable, ...]
    fallback: tuple[str, ...]  # the steps that had to fall back, in words (empty: none did)


def choose_default(points: Sequence[P], results: Mapping[str, Mapping[P, Figures]], headroom: Mapping[P, float],
                   shipped: Sequence[str], bounds: Mapping[str, int] | None = None) -> Choice:
    """Apply the rule of this module's docstring to `results` (trace -> point -> figures).

    `shipped`: the traces of steps 1 and 2; `bounds`: per other trace, the most delay-minutes outside rises
    without precedent a point may have there (a trace without a bound has none).
    """
    if not points or not shipped or any(t not in results for t in shipped):
        raise ValueError("the rule needs points and shipped traces that the results hold")
    bounds = bounds or {}
    fallback = []
    front = {t: results[t] for t in shipped}
    counts = {p: len(dominated_on(p, front)) for p in points}
    pool = [p for p in points if counts[p] == 0]
    if not pool:
        least = min(counts.values())
        pool = [p for p in points if counts[p] == least]
        fallback.append(f"every point is dominated on some shipped trace: kept those dominated on {least} trace(s)")

    def within(p: P) -> bool:
        return (all(results[t][p].delay_with_precedent == 0 for t in shipped)
                and all(results[t][p].delay_with_precedent <= bound for t, bound in bounds.items()))

    safe = [p for p in pool if within(p)]
    if not safe:
        def summed(p: P) -> int:
            return sum(results[t][p].delay_with_precedent for t in shipped)
        least = min(summed(p) for p in pool)
        safe = [p for p in pool if summed(p) == least]
        fallback.append("no undominated point keeps the shipped traces free of delay outside unprecedented rises "
                        f"and the stress traces within their bounds: kept the fewest on the shipped traces ({least})")

    def key(p: P) -> tuple[float, int, int, float]:
        rows = [row[p] for row in results.values()]
        return (min(f.share for f in rows), -sum(f.preemptions for f in rows), -sum(f.slo_minutes for f in rows),
                headroom[p])

    best = max(safe, key=key)
    return Choice(best, tuple(pool), tuple(safe), tuple(fallback))
