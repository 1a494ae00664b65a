"""The phases of one reclaim's return path, timed on the gate's own monotonic clock: pure, no I/O.

A reclaim passes six milestones, in this order: the rise seen (the reading that triggered it), the
decision (the reclaim written), the victims' pods gone, the replacement replicas scheduled, Ready,
and serving (their vLLM answering). Each phase is the time from one milestone to the next, and the
total is the rise seen to serving. Every time here is the gate's `time.monotonic()` at the moment the
gate itself observed the event (a read that returned, a write that was answered): never a Prometheus
sample time nor a kubelet's timestamp, so no two clocks are ever subtracted.

The class of defect this module closes is "a phase duration that is not a duration": negative, out of
order, or not adding up to the total, from mixing clocks or from milestones observed out of order. The
mechanism: a milestone is reached at the first observation that finds it *and every one before it* true
(one found early, such as a replica scheduled on a free GPU before the victims were gone, is reached with
the one before it: a phase of 0 s), and the clock is clamped to never run backwards within a reclaim.
So the phases complete in order, each is >= 0, and they sum to the total by construction.

A reclaim ends with one named outcome: `served` (every milestone reached), `superseded` (a new reclaim
of the same service began before it was served), `cancelled` (the gate stopped following it: the
service was lent again or left the configuration) or `abandoned` (not served within `MAX_OPEN_SECONDS`).
Only a served reclaim gives phase durations to the histograms; the others are counted by outcome.

The tracker lives in the gate's process: a gate that restarts mid-reclaim starts with none open and loses
that one reclaim's partial timing (its milestones were never written anywhere); the next reclaim is timed
whole. Observations for a service with no open reclaim change nothing.
"""

import math
from dataclasses import dataclass, replace

MILESTONES = ("seen", "decided", "victims_gone", "scheduled", "ready", "serving")
PHASES = ("decision", "victims_exit", "scheduling", "start", "serving")
"""Phase i runs from MILESTONES[i] to MILESTONES[i + 1]: the label values of `phase`, with `total` beside them."""
TOTAL = "total"
PHASE_LABELS = (*PHASES, TOTAL)
SERVED, SUPERSEDED, CANCELLED, ABANDONED = "served", "superseded", "cancelled", "abandoned"
OUTCOMES = (SERVED, SUPERSEDED, CANCELLED, ABANDONED)
MAX_OPEN_SECONDS = 3600.0  # a reclaim not served within an hour is not a return time any more: closed, counted


class PhaseError(ValueError):
    """Bad input to the tracker: names what is wrong; the tracker is left as it was."""


@dataclass(frozen=True)
class Observation:
    """What one read of the gate found for a service after its reclaim (each: reached now or earlier)."""

    victims_gone: bool
    scheduled: bool
    ready: bool
    serving: bool

    def reached(self) -> tuple[bool, bool, bool, bool]:
        """Return the four observed milestones, in MILESTONES order (after `decided`)."""
        return (self.victims_gone, self.scheduled, self.ready, self.serving)


@dataclass(frozen=True)
class OpenReclaim:
    """A reclaim being followed: the times of the milestones reached so far, in order (the first is `seen`)."""

    service: str
    times: tuple[float, ...]

    @property
    def last(self) -> float:
        """The time of the last milestone reached: no later milestone may be dated before it."""
        return self.times[-1]


@dataclass(frozen=True)
class ClosedReclaim:
    """A reclaim that ended: its outcome, and (for `served` only) each phase's seconds and the total."""

    service: str
    outcome: str
    phases: dict[str, float]  # PHASE_LABELS -> seconds; empty unless served


@dataclass(frozen=True)
class Tracker:
    """Every open reclaim, by service: at most one each."""

    open: tuple[OpenReclaim, ...] = ()

    def get(self, service: str) -> OpenReclaim | None:
        """Return `service`'s open reclaim, if any."""
        return next((r for r in self.open if r.service == service), None)

    def _without(self, service: str) -> tuple[OpenReclaim, ...]:
        return tuple(r for r in self.open if r.service != service)


def _check(now: float, what: str) -> None:
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise PhaseError(f"{what}: {now!r} is not a finite monotonic time in seconds")


def _check_service(service: str) -> None:
    if not isinstance(service, str) or not service:
        raise PhaseError(f"service {service!r}: expected a non-empty service name")


def begin(tracker: Tracker, service: str, seen: float, decided: float) -> tuple[Tracker, list[ClosedReclaim]]:
    """Open a reclaim of `service` whose rise was seen at `seen` and decided at `decided`.

    One still open for the service is closed `superseded` (a second reclaim while the first is under way:
    its own timing would mix the two). A decision dated before the reading is taken as at the reading.
    """
    _check_service(service)
    _check(seen, "rise seen")
    _check(decided, "decision")
    closed = [ClosedReclaim(service, SUPERSEDED, {})] if tracker.get(service) is not None else []
    opened = OpenReclaim(service, (seen, max(seen, decided)))
    return Tracker((*tracker._without(service), opened)), closed


def observe(tracker: Tracker, service: str, seen: Observation, now: float) -> tuple[Tracker, list[ClosedReclaim]]:
    """Apply one read of `service` made at `now`: the milestones it finds reached (in order) are dated `now`.

    Returns the tracker and the reclaim closed by it (`served` with its phases, or `abandoned` past
    MAX_OPEN_SECONDS); nothing for a service with no open reclaim.
    """
    _check_service(service)
    _check(now, "observation")
    current = tracker.get(service)
    if current is None:
        return tracker, []
    at = max(now, current.last)  # never backwards within a reclaim: every phase >= 0
    times = list(current.times)
    for index, flag in enumerate(seen.reached(), start=2):
        if index < len(times):
            continue  # reached at an earlier read
        if not flag:
            break  # a later milestone found true waits for this one: reached with it
        times.append(at)
    if len(times) == len(MILESTONES):
        phases = {PHASES[i]: times[i + 1] - times[i] for i in range(len(PHASES))}
        phases[TOTAL] = sum(phases[p] for p in PHASES)  # by construction: the sum, never a second subtraction
        return Tracker(tracker._without(service)), [ClosedReclaim(service, SERVED, phases)]
    if at - times[0] > MAX_OPEN_SECONDS:
        return Tracker(tracker._without(service)), [ClosedReclaim(service, ABANDONED, {})]
    updated = replace(current, times=tuple(times))
    return Tracker(tuple(updated if r.service == service else r for r in tracker.open)), []


def cancel(tracker: Tracker, service: str) -> tuple[Tracker, list[ClosedReclaim]]:
    """Stop following `service`'s open reclaim (lent again, or no longer configured): closed `cancelled`."""
    _check_service(service)
    if tracker.get(service) is None:
        return tracker, []
    return Tracker(tracker._without(service)), [ClosedReclaim(service, CANCELLED, {})]
