"""Whether the gate works, judged by its ticks (pure): what `offhours check` says of the gate's CronWorkflow.

The gate's pod exits 0 when its ticks fail (a failed tick is recorded, never a crash that would stop
the next one), so a CronWorkflow whose last run Succeeded says nothing about the gate lending or
reclaiming. What does: per service, the state record's `failedTicks` (ticks in a row without usable
load data) and the gate's `GateTickFailed` Events on the service's Deployment newer than the
record's last decision; and a record no tick renewed within its lending lease (the gate stopped ticking:
a run stuck Pending holds the next ones back, Argo's controller is down), however its last run ended.
No record and no failure at all is a gate that has not ticked yet, not a fault.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ServiceTicks:
    """What the gate recorded of one service: its failed ticks in a row, its last decision and when."""

    service: str
    failed_ticks: int = 0
    decided_at: datetime | None = None
    reason: str | None = None
    recorded: bool = False  # whether the service has a state record at all
    renewed_at: float | None = None  # when a tick last renewed the service's lending lease (epoch seconds)
    lease_seconds: float | None = None  # how long one renewal holds


@dataclass(frozen=True)
class TickFailure:
    """One `GateTickFailed` Event: when, on which service's Deployment, what the gate said."""

    at: datetime | None
    service: str
    message: str


@dataclass(frozen=True)
class Verdict:
    """The gate's health in one line: ok, what was seen, and the newest failure's message (for the fix)."""

    ok: bool
    detail: str
    failing: tuple[str, ...] = ()  # the services whose ticks fail
    newest_failure: str = ""
    stale: tuple[str, ...] = ()  # the services no tick renewed within their lease


def verdict(services: Sequence[ServiceTicks], failures: Sequence[TickFailure], now: float | None = None) -> Verdict:
    """Judge the gate by its recent ticks: any service whose ticks fail now, or (at `now`) stopped, makes it ✗."""
    newest: dict[str, TickFailure] = {}
    for failure in failures:
        known = newest.get(failure.service)
        if known is None or (failure.at is not None and (known.at is None or failure.at > known.at)):
            newest[failure.service] = failure
    bad: list[str] = []
    stale: list[str] = []
    lines: list[str] = []
    why = ""
    for s in services:
        if now is not None and s.renewed_at is not None and s.lease_seconds is not None \
                and now - s.renewed_at > s.lease_seconds:
            stale.append(s.service)
            lines.append(f"{s.service}: no tick for {now - s.renewed_at:.0f} s (its lending lease is "
                         f"{s.lease_seconds:.0f} s): the gate is not ticking")
            continue
        seen = newest.get(s.service)
        # An Event older than the last decision was followed by a tick that decided: it is not now.
        current = seen is not None and (s.decided_at is None or seen.at is None or seen.at > s.decided_at)
        if s.failed_ticks or current:
            bad.append(s.service)
            said = seen.message if current and seen is not None else (s.reason or "no usable load data")
            count = f"{s.failed_ticks} tick(s) in a row without usable load data" if s.failed_ticks else "its last tick failed"
            lines.append(f"{s.service}: {count}: {said}")
            why = why or said
    if bad or stale:
        return Verdict(False, "ticks fail: " + "; ".join(lines), tuple(bad), why, tuple(stale))
    decided = [s for s in services if s.decided_at is not None]
    if not decided:
        return Verdict(True, "no tick recorded yet")
    last = max(s.decided_at for s in decided if s.decided_at is not None)
    return Verdict(True, f"ticks decide for {len(decided)}/{len(services)} service(s); newest decision at "
                   f"{last:%Y-%m-%d %H:%M:%SZ}")


def services_ticks(records: Mapping[str, Mapping[str, object] | None]) -> list[ServiceTicks]:
    """Read each service's state record (`state.json` decoded, None when absent) into its ticks, defensively."""
    from offhours.scripts.pool.model import parse_time

    out = []
    for service, state in records.items():
        if not isinstance(state, Mapping):
            out.append(ServiceTicks(service))
            continue
        raw = state.get("failedTicks")
        failed = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0
        last = state.get("lastDecision")
        decision: Mapping[str, object] = last if isinstance(last, Mapping) else {}
        reason = decision.get("reason")
        out.append(ServiceTicks(service, failed, parse_time(decision.get("at")), str(reason) if reason else None, True,
                                _seconds(state.get("renewedAt")), _seconds(state.get("leaseSeconds"))))
    return out


def _seconds(value: object) -> float | None:
    """Return a finite, non-negative number of the record (a hand-edited one may hold anything), else None."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
