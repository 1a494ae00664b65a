"""The return path's Prometheus metrics, as the gate's process exposes them (text format 0.0.4).

`offhours_return_phase_seconds{service,phase}`: a histogram per service and phase of every served
reclaim (scripts/policy/return_phases.py), `phase` one of its PHASE_LABELS. `offhours_return_reclaims_total
{service,outcome}`: every reclaim followed, by how it ended. Labels are bounded: `service` only from the
gate configuration given at construction (anything else is refused by `record`, so no tenant-written
value can add a series), `phase` and `outcome` from the tracker's fixed tuples.

The counts live in the gate's process: a new process starts them at zero, which Prometheus' `rate`,
`increase` and `histogram_quantile` over `increase` treat as a counter reset.
"""

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from offhours.scripts.names import RETURN_PHASE_METRIC, RETURN_RECLAIMS_METRIC
from offhours.scripts.policy.return_phases import OUTCOMES, PHASE_LABELS, SERVED, ClosedReclaim

# Phases run from well under a second (a decision) to minutes (a cold start): edges for both, and one at
# the dashboard's default return bound (400 s) so a p95 read against it falls on the right side.
BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 400.0, 600.0, 900.0, 1800.0)


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    count: int = 0
    total: float = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.count += 1
        self.total += value


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class ReturnMetrics:
    """Histograms of served reclaims' phases and counts of reclaims by outcome, per configured service."""

    def __init__(self, services: Iterable[str]) -> None:
        self.services = tuple(sorted(set(services)))
        self._lock = threading.Lock()  # `record` runs in the gate's loop, `render` in the metrics server's thread
        self._phases = {(s, p): _Histogram() for s in self.services for p in PHASE_LABELS}
        self._outcomes = {(s, o): 0 for s in self.services for o in OUTCOMES}

    def record(self, closed: ClosedReclaim) -> None:
        """Count one ended reclaim; a served one adds each phase's seconds to its histogram."""
        if closed.service not in self.services:
            raise ValueError(f"service {closed.service!r} is not one of the gate configuration's "
                             f"({', '.join(self.services) or 'none'}): it gets no series")
        if closed.outcome not in OUTCOMES:
            raise ValueError(f"outcome {closed.outcome!r} is not one of {', '.join(OUTCOMES)}")
        if closed.outcome == SERVED and set(closed.phases) != set(PHASE_LABELS):
            raise ValueError(f"a served reclaim needs every phase ({', '.join(PHASE_LABELS)}), "
                             f"got {', '.join(sorted(closed.phases))}")
        with self._lock:
            self._outcomes[(closed.service, closed.outcome)] += 1
            if closed.outcome == SERVED:
                for phase, seconds in closed.phases.items():
                    self._phases[(closed.service, phase)].observe(seconds)

    def render(self) -> str:
        """Return the metrics page: every series of every configured service, zero before its first reclaim."""
        with self._lock:
            lines = [f"# HELP {RETURN_PHASE_METRIC} Seconds of each phase of a served reclaim, on the gate's "
                     "monotonic clock (rise seen -> decision -> victims gone -> scheduled -> Ready -> serving).",
                     f"# TYPE {RETURN_PHASE_METRIC} histogram"]
            for (service, phase), hist in self._phases.items():
                labels = f'service="{service}",phase="{phase}"'
                for bound, count in zip(BUCKETS, hist.counts):
                    lines.append(f'{RETURN_PHASE_METRIC}_bucket{{{labels},le="{_number(bound)}"}} {count}')
                lines.append(f'{RETURN_PHASE_METRIC}_bucket{{{labels},le="+Inf"}} {hist.count}')
                lines.append(f"{RETURN_PHASE_METRIC}_sum{{{labels}}} {_number(hist.total)}")
                lines.append(f"{RETURN_PHASE_METRIC}_count{{{labels}}} {hist.count}")
            lines += [f"# HELP {RETURN_RECLAIMS_METRIC} Reclaims the gate followed, by how they ended.",
                      f"# TYPE {RETURN_RECLAIMS_METRIC} counter"]
            lines += [f'{RETURN_RECLAIMS_METRIC}{{service="{s}",outcome="{o}"}} {n}'
                      for (s, o), n in self._outcomes.items()]
        return "\n".join(lines) + "\n"
