"""Turn a decision into actions: which parked jobs to admit, which running jobs to stop, the scale.

Pure: it reads a snapshot of the service's research jobs and returns a `Plan`; the adapters
carry it out. The Deployment's replicas always come out as baseline minus what stays lent, so a
gate killed between two actions converges on its next tick.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from offhours.scripts.policy.decide import Decision

PARKED = "parked"
ADMITTED = "admitted"


@dataclass(frozen=True)
class Job:
    """A research workflow as the gate sees it.

    `state`: parked (created suspended, waiting), admitted (resumed by the gate, holds its
    replicas) or unmanaged (running without admission, e.g. submitted straight from a template).
    `progress_at`: time of its last complete checkpoint, if it reports one.
    """

    name: str
    service: str
    replicas: int
    state: str
    priority: int = 0
    created: float = 0.0
    progress_at: float | None = None
    started: float | None = None
    parked_from: str | None = None
    checkpoint_prefix: str | None = None  # <checkpoint-uri>/<run-id>: where its steps record progress


@dataclass(frozen=True)
class Plan:
    """What to do for one service this tick."""

    service: str
    scale_to: int
    admit: tuple[Job, ...] = ()
    stop: tuple[Job, ...] = ()
    adopt: tuple[Job, ...] = ()
    lent_after: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def loss_if_stopped(job: Job, now: float) -> float:
    """Seconds of work a stop would throw away: since the last checkpoint (or the start)."""
    since = job.progress_at if job.progress_at is not None else (job.started or job.created)
    return max(0.0, now - since) * job.replicas


def plan(decision: Decision, baseline: int, jobs: Sequence[Job], now: float) -> Plan:
    """Plan the admissions and stops that take the service from its lent replicas to the decision's target.

    Admission order: priority (high first), then age (old first); a job that does not fit is
    skipped for a smaller one behind it. Stop order: the jobs whose loss costs least (low
    priority, little work since the last checkpoint, young) until enough replicas are freed.
    """
    admitted = [j for j in jobs if j.state == ADMITTED]
    lent = sum(j.replicas for j in admitted)
    target = decision.target_lent
    notes: list[str] = []
    admit: list[Job] = []
    stop: list[Job] = []
    adopt: list[Job] = []

    if target < lent:
        victims = sorted(admitted, key=lambda j: (j.priority, loss_if_stopped(j, now), -j.created))
        freed = 0
        for job in victims:
            if lent - freed <= target:
                break
            stop.append(job)
            freed += job.replicas
        lent -= freed
    elif target > lent:
        room, ceiling_room = target - lent, max(decision.ceiling, target) - lent
        active = {j.name for j in jobs if j.state != PARKED}
        # A parked copy whose original still runs (a gate stopped between parking and stopping) waits.
        waiting = sorted((j for j in jobs if j.state != ADMITTED and j.parked_from not in active),
                         key=lambda j: (j.state == PARKED, -j.priority, j.created))
        for job in waiting:
            # The first job that fits under what stayed lendable over the whole window may exceed
            # one lend step (else the step would starve every large job); the rest fit the step.
            first = not admit and not adopt
            if job.replicas > 0 and (job.replicas <= room or (first and job.replicas <= ceiling_room)):
                (admit if job.state == PARKED else adopt).append(job)
                room -= job.replicas
                ceiling_room -= job.replicas
                lent += job.replicas
        if not admit and not adopt and any(j.state == PARKED for j in jobs):
            notes.append(f"no parked job fits in {target - sum(j.replicas for j in admitted)} lendable replicas")

    # Running without admission and not adopted: it must not hold replicas serving may need.
    for job in jobs:
        if job.state not in (ADMITTED, PARKED) and job not in adopt:
            stop.append(job)
            notes.append(f"{job.name} runs without admission and does not fit: stopped and parked again")

    return Plan(decision.service, baseline - lent, tuple(admit), tuple(stop), tuple(adopt), lent, tuple(notes))
