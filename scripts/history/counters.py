"""Per-step increases of cumulative counters sampled on a grid, with what could not be read said by name.

Input: one series' counter values at grid points 0..n (NaN: no sample in that step). Output: the
increase in each of the n steps between consecutive points. Three things are not plain differences:

- a counter reset (the value falls: the process restarted): the step's increase is the new value,
  as Prometheus' own `increase` counts it, and the reset is reported;
- a gap (points missing between two samples): the counter's increase across it is known, its shape
  is not, so it is spread evenly over the gap's steps (the total stays exact) and the gap is reported;
- a series that starts after the grid's first point (a new pod) counts from its first sample:
  what it did before that sample is not known, and nothing is invented for it.
Steps before a series' first sample or after its last are not covered by it (`covered` False).
A value below zero is no counter's (a broken or forged exporter): it is no sample, and is reported.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Increases:
    """One series' per-step increases and where they came from."""

    values: np.ndarray  # increase in each step (0 where not covered)
    covered: np.ndarray  # bool: the step lies between two of the series' samples
    resets: tuple[int, ...]  # steps in which the counter fell
    gaps: tuple[tuple[int, int], ...]  # (first, last) steps, inclusive, spread evenly across a missing stretch
    invalid: tuple[int, ...] = ()  # grid points whose value was below zero: read as no sample


def increases(points: np.ndarray) -> Increases:
    """Return the per-step increases of a counter sampled at grid points (NaN where no sample)."""
    n = points.shape[0] - 1
    values = np.zeros(max(n, 0))
    covered = np.zeros(max(n, 0), dtype=np.bool_)
    finite = np.isfinite(points)
    negative = finite & (np.where(finite, points, 0.0) < 0)
    present = np.flatnonzero(finite & ~negative)
    resets: list[int] = []
    gaps: list[tuple[int, int]] = []
    for a, b in zip(present[:-1].tolist(), present[1:].tolist()):
        before, after = float(points[a]), float(points[b])
        rise = after - before
        if rise < 0:  # restarted in between: everything it shows now was counted since
            rise = after
            resets.append(b - 1)
        values[a:b] = rise / (b - a)
        covered[a:b] = True
        if b - a > 1:
            gaps.append((a, b - 1))
    return Increases(values, covered, tuple(resets), tuple(gaps), tuple(np.flatnonzero(negative).tolist()))


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Return the (first, last) indices, inclusive, of each run of True in `mask`."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def fill_line(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Replace the unknown steps by a straight line between the nearest known ones (flat at the ends)."""
    if known.all() or not known.any():
        return values.copy()
    at = np.flatnonzero(known)
    return np.interp(np.arange(values.shape[0]), at, values[at])
