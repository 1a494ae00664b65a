"""The operator's metrics: `/metrics` of the console, in Prometheus text format 0.0.4, `offhours_` prefix.

Gauges come straight from the read model at scrape time. Counters (admissions, preemptions) and
the reclaim-to-ready histogram need memory across reads, which the objects do not keep: a
`MetricsState` remembers which workflows it has already counted (by UID) and which reclaim
decisions are still waiting for their replicas to be Ready, so the counters only go up within
the life of the console process (Prometheus' `rate`/`increase` handle its restarts).

The reclaim latency is measured from the gate's reclaim decision (`lastDecision.at` with action
`reclaim`) to the first read that finds the Deployment with every replica it asks for Ready; its
resolution is the console's read interval.

Every `service` label value comes from a bounded set: the gate configuration's services when the
console knows them, else the services read from the serving namespace (the gate's state ConfigMaps
and the labelled Deployments, which no tenant writes). A workflow's `offhours.io/service` label is
tenant-written: a value outside that set is counted under the one `service="unknown"` series, so
inventing services adds no series. The memory is bounded the same way: per known service, and per
workflow only while the workflow exists.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from offhours.scripts.names import UNKNOWN_SERVICE
from offhours.scripts.pool.model import ADMITTED, PREEMPTED, RUNNING, WAITING, Pool
from offhours.scripts.pool.usage import service_lent_unused_gpus

FORGET = timedelta(hours=24)
# A bucket edge at the dashboard's default return bound (400 s: two checks, the grace cap, the cold start, slack),
# so its p90 is on the side of the bound the returns are: a bucket across it reads every return in it as one value.
RECLAIM_BUCKETS = (15.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 400.0, 450.0, 600.0, 900.0, 1800.0)
JOB_STATES = (WAITING, ADMITTED, RUNNING, PREEMPTED, "succeeded", "failed", "cancelled")


@dataclass
class Histogram:
    """Cumulative buckets, count and sum, as Prometheus exposes them."""

    buckets: tuple[float, ...] = RECLAIM_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * len(RECLAIM_BUCKETS))
    count: int = 0
    total: float = 0.0

    def observe(self, value: float) -> None:
        """Add one observation."""
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.count += 1
        self.total += value


@dataclass
class MetricsState:
    """What the counters and the histogram remember between reads; `services`: the gate configuration's, if known."""

    services: frozenset[str] | None = None
    admitted: dict[str, datetime] = field(default_factory=dict)  # workflow key -> the last read that saw it
    preempted: dict[str, datetime] = field(default_factory=dict)
    admissions: dict[str, int] = field(default_factory=dict)
    preemptions: dict[str, int] = field(default_factory=dict)
    pending_reclaims: dict[str, datetime] = field(default_factory=dict)
    last_reclaim: dict[str, datetime] = field(default_factory=dict)
    reclaim_seconds: dict[str, Histogram] = field(default_factory=dict)

    def known(self, pool: Pool) -> frozenset[str]:
        """Return the service label values `/metrics` may show for `pool`."""
        if self.services is not None:
            return self.services
        return frozenset(s.name for s in pool.services)

    def label(self, service: str, known: frozenset[str]) -> str:
        """Return `service` if it is known, else the one unknown value."""
        return service if service in known else UNKNOWN_SERVICE

    def update(self, pool: Pool) -> None:
        """Count what is new in `pool`: admissions, preemptions, reclaims decided, reclaims made good."""
        known = self.known(pool)
        for job in pool.jobs:
            key = job.uid or f"{job.namespace}/{job.name}"
            service = self.label(job.service, known)
            if job.admitted is not None:
                if key not in self.admitted:
                    self.admissions[service] = self.admissions.get(service, 0) + 1
                self.admitted[key] = pool.read_at
            if job.is_preemption:  # the one definition (a stop before admission is none), as usage and report count
                if key not in self.preempted:
                    self.preemptions[service] = self.preemptions.get(service, 0) + 1
                self.preempted[key] = pool.read_at
        # A deleted workflow never comes back under its UID: forget it once no read has seen it for FORGET
        # (a failed or partial read in between does not make every workflow count again).
        for seen in (self.admitted, self.preempted):
            for key in [k for k, at in seen.items() if pool.read_at - at > FORGET]:
                del seen[key]
        for s in pool.services:
            if s.name not in known:
                continue
            if s.action == "reclaim" and s.decided_at is not None and self.last_reclaim.get(s.name) != s.decided_at:
                self.last_reclaim[s.name] = s.decided_at
                self.pending_reclaims.setdefault(s.name, s.decided_at)  # the first unfinished reclaim starts the clock
            started = self.pending_reclaims.get(s.name)
            if started is not None and s.replicas is not None and s.ready is not None and s.ready >= s.replicas:
                seconds = max(0.0, (pool.read_at - started).total_seconds())
                self.reclaim_seconds.setdefault(s.name, Histogram()).observe(seconds)
                del self.pending_reclaims[s.name]


def _labels(pairs: dict[str, str]) -> str:
    if not pairs:
        return ""
    escaped = (f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + "n").replace(chr(34), chr(92) + chr(34))}"'
               for k, v in pairs.items())
    return "{" + ",".join(escaped) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Page:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]],
               suffix: str = "") -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.lines += [f"{name}{suffix}{_labels(labels)} {_number(value)}" for labels, value in samples]


def exposition(pool: Pool, state: MetricsState) -> str:
    """Render the `/metrics` page for `pool` (call `state.update(pool)` first)."""
    page = _Page()
    known = state.known(pool)
    services = [s for s in pool.services if s.name in known]

    def per_service(attr: str) -> list[tuple[dict[str, str], float]]:
        return [({"service": s.name}, float(v)) for s in services if (v := getattr(s, attr)) is not None]

    page.family("offhours_service_baseline_replicas", "gauge", "Replicas the service runs with when nothing is lent.",
                per_service("baseline"))
    page.family("offhours_service_replicas", "gauge", "Replicas in service (the Deployment's spec.replicas).",
                per_service("replicas"))
    page.family("offhours_service_ready_replicas", "gauge", "Ready replicas of the service's Deployment.",
                per_service("ready"))
    page.family("offhours_service_required_replicas", "gauge", "Replicas the gate's last decision says serving needs.",
                per_service("required"))
    page.family("offhours_service_lent_replicas", "gauge", "Replicas lent to research at the gate's last decision.",
                per_service("lent"))
    page.family("offhours_service_lent_gpus", "gauge", "GPUs lent to research (lent replicas x GPUs per replica).",
                per_service("gpus_lent"))
    page.family("offhours_service_lendable_replicas", "gauge", "Replicas still lendable: baseline - required - lent.",
                per_service("lendable"))
    # hook: placement - lent GPUs no work pod runs on (usage.unused_span); `report` shows their GPU-minutes.
    page.family("offhours_service_lent_unused_gpus", "gauge",
                "GPUs lent to research workflows of the service none of whose work pods has run yet (lent but unused).",
                [({"service": s.name}, float(lent_unused_gpus(s, pool))) for s in services if s.gpus_lent is not None])
    page.family("offhours_gate_last_decision_timestamp_seconds", "gauge", "Unix time of the gate's last decision.",
                [({"service": s.name}, s.decided_at.timestamp()) for s in services if s.decided_at])
    page.family("offhours_gate_tick_age_seconds", "gauge", "Seconds since the gate's last decision, at the read.",
                [({"service": s.name}, max(0.0, (pool.read_at - s.decided_at).total_seconds()))
                 for s in services if s.decided_at])
    page.family("offhours_gate_failed_ticks", "gauge", "Consecutive gate ticks without usable load data.",
                [({"service": s.name}, float(s.failed_ticks)) for s in services])
    counts: dict[tuple[str, str], int] = {}
    for job in pool.jobs:
        key = (state.label(job.service, known), job.state)
        counts[key] = counts.get(key, 0) + 1
    # The unknown series appears once something is counted there, and stays (a counter never vanishes).
    unknown = any(service == UNKNOWN_SERVICE for service, _ in counts) or UNKNOWN_SERVICE in state.admissions \
        or UNKNOWN_SERVICE in state.preemptions
    names = sorted(known | ({UNKNOWN_SERVICE} if unknown else set()))
    page.family("offhours_jobs", "gauge", "Research workflows by service and state.",
                [({"service": n, "state": st}, float(counts.get((n, st), 0))) for n in names for st in JOB_STATES])
    page.family("offhours_admissions_total", "counter", "Workflows admitted (seen admitted by this process).",
                [({"service": n}, float(state.admissions.get(n, 0))) for n in names])
    page.family("offhours_preemptions_total", "counter",
                "Workflows stopped for a reclaim while they held lent GPUs (seen by this process; a stop before "
                "admission is none).",
                [({"service": n}, float(state.preemptions.get(n, 0))) for n in names])
    _histogram(page, "offhours_reclaim_ready_seconds",
               "Seconds from a reclaim decision to every replica of the service being Ready.",
               [(n, state.reclaim_seconds.get(n) or Histogram()) for n in names])
    page.family("offhours_read_problems", "gauge", "Objects the console could not read at its last read.",
                [({}, float(len(pool.problems) + sum(1 for s in services if s.problem)))])
    return "\n".join(page.lines) + "\n"


def lent_unused_gpus(service: Any, pool: Pool) -> int:
    """GPUs of `service` lent for nothing now: usage's one definition, whose integral `report` shows."""
    return service_lent_unused_gpus(pool, service.name)


def _histogram(page: _Page, name: str, help_text: str, series: Sequence[tuple[str, Histogram]]) -> None:
    page.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for service, hist in series:
        for bound, count in zip(hist.buckets, hist.counts):
            page.lines.append(f"{name}_bucket{_labels({'service': service, 'le': _number(bound)})} {count}")
        page.lines.append(f"{name}_bucket{_labels({'service': service, 'le': '+Inf'})} {hist.count}")
        page.lines.append(f"{name}_sum{_labels({'service': service})} {_number(hist.total)}")
        page.lines.append(f"{name}_count{_labels({'service': service})} {hist.count}")
