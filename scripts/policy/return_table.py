"""The return path's table, per service and phase: reclaims served, p50, p95, from histogram buckets. Pure, no I/O.

The one place the gate's `offhours_return_phase_seconds` buckets are decoded into quantiles: `offhours
report`, the console and `calibrate` all read them through `quantile` here, so they never disagree on
what a bucket means. A quantile is read as Prometheus' `histogram_quantile` reads it (linear inside a
bucket, from 0 below the first edge); one in the +Inf bucket is the highest finite edge, marked
`capped` (a lower bound), never a number made up past the buckets.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from offhours.scripts.policy.return_phases import PHASE_LABELS

Buckets = Sequence[tuple[float, float]]  # (le, cumulative count), in any order; +Inf included
TABLE_QUANTILES = (0.5, 0.95)


class HistogramError(ValueError):
    """Buckets that are not a histogram this can read (no +Inf bucket); names what is wrong."""


def quantile(buckets: Buckets, q: float) -> tuple[float, bool] | None:
    """Return (seconds, capped) at quantile `q` of cumulative (le, count) buckets; None without an observation.

    `capped`: the quantile fell in the +Inf bucket, so the value is the highest finite edge (a lower bound).
    """
    if not 0 < q < 1:
        raise ValueError(f"quantile {q!r}: expected a number between 0 and 1")
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        raise HistogramError("a histogram without its +Inf bucket cannot be read")
    total = ordered[-1][1]
    if not total > 0:
        return None
    rank = q * total
    lower_edge, lower_count = 0.0, 0.0
    for edge, count in ordered:
        if count >= rank:
            if math.isinf(edge):
                return lower_edge, True
            if count == lower_count:
                return edge, False
            return lower_edge + (edge - lower_edge) * (rank - lower_count) / (count - lower_count), False
        lower_edge, lower_count = edge, count
    return lower_edge, True  # counts that fall (a reset inside the range): the highest edge read


@dataclass(frozen=True)
class PhaseRow:
    """One line of the table: a service's phase, the reclaims served in the range, and its quantiles."""

    service: str
    phase: str
    served: int
    p50: tuple[float, bool] | None  # (seconds, capped); None: no reclaim served
    p95: tuple[float, bool] | None


def phase_rows(by_service: Mapping[str, Mapping[str, Buckets]]) -> list[PhaseRow]:
    """Return every service's row for every phase (in `PHASE_LABELS` order): a phase never seen is 0 served, no p50/p95."""
    rows = []
    for service, phases in by_service.items():
        for phase in PHASE_LABELS:
            counts = phases.get(phase, [])
            served = round(max((c for _, c in counts), default=0.0))
            p50, p95 = (quantile(counts, q) if served else None for q in TABLE_QUANTILES)
            rows.append(PhaseRow(service, phase, served, p50, p95))
    return rows


def seconds_text(value: tuple[float, bool] | None) -> str:
    """Write a quantile as the table shows it: '-' for none, '>' before a capped one (a lower bound)."""
    if value is None:
        return "-"
    return f"{'>' if value[1] else ''}{value[0]:.1f}"
