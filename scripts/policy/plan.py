"""Turn a decision into actions: which parked jobs to admit, which running jobs to stop, the scale.

Pure: it reads a snapshot of the service's research jobs and returns a `Plan`; the adapters
carry it out. The Deployment's replicas always come out as baseline minus what stays lent, so a
gate killed between two actions converges on its next tick.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from offhours.scripts.names import STATE_ADMITTED, STATE_PARKED
from offhours.scripts.policy.decide import Decision

# A job's state in the plan is its workflow's offhours.io/state label.
PARKED = STATE_PARKED
ADMITTED = STATE_ADMITTED
UNMANAGED = "unmanaged"  # runs without the gate's admission (never a label: the gate's reading of one)


@dataclass(frozen=True)
class Job:
    """A research workflow as the gate sees it.

    `state`: parked (created suspended, waiting), admitted (resumed by the gate, holds its
    replicas) or unmanaged (running without admission, e.g. submitted straight from a template).
    `progress_at`: time of its last complete checkpoint, if it reports one. `finishing`: its status
    says its work is done and only its exit handler runs (never worth a copy; stopped last). `problem`: a value on it that
    could not be read (it is never admitted, and stopped if it runs). A parked copy waits until
    `original_done` (its original confirmed stopped or gone) and is deleted if `original_succeeded`.
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
    finishing: bool = False
    problem: str | None = None
    uid: str = ""
    borrowed_from: str | None = None  # UID of the Deployment incarnation it was admitted against
    copy_of: str | None = None  # UID of the workflow this parked copy was made from
    copy_token: str | None = None  # the token it carries (a copy the gate made: the one it recorded for that stop)
    waiting_reason: str | None = None  # as last written on it
    queue_position: int | None = None
    original_done: bool = True
    original_succeeded: bool = False
    exit_seconds: float | None = None  # how long a stop takes to give its GPUs back; None: not known to the caller
    exit_learnt: bool = False  # exit_seconds was measured at the run's last stop (the gate writes it at admission)
    run_id: str | None = None  # the run it belongs to: one run never runs twice at once (it shares checkpoints)
    template: str | None = None  # the WorkflowTemplate of its namespace it runs (`workflowTemplateRef`), if any
    arguments: tuple[str, ...] = ()  # the argument names it sets: the gate checks them against that template's
    pods_kept: bool = True  # False: its pod GC may delete a pod as it ends, so no stop is measured from its pods
    # Its pods' grace period as the workflow itself sets it (math.inf: not readable as a number, above any cap):
    # through the grace parameter a template's pods take (None: none set), and through its own spec (None: none).
    grace_parameter: float | None = None
    own_grace: float | None = None
    own_grace_at: str | None = None  # where its own spec sets it, for the reason a person reads
    gate_copy: bool = False  # a parked copy the gate's own record says it made: it carries its run
    run_problem: str | None = None  # why its run id cannot be trusted (also its `problem`): said in an Event
    # Labelled returned, its status saying its work is done: true only of a workflow the gate's record says it
    # admitted (the gate then lists it no more); the label and the status are anyone's to write.
    returned: bool = False
    # The WorkflowTemplates its own spec refers to (names; checked again at admission), and that spec as listed:
    # the tick follows the references to the grace of the pods they run (never compared: one listing's data).
    template_refs: tuple[str, ...] = ()
    template_spec: Any = field(default=None, compare=False, repr=False)
    # Its run was cancelled: it (or its original, known by UID) carries the cancel's mark. Anyone may write that
    # mark, but it only ever stops the workflow that carries it: never admitted, adopted nor copied; stopped.
    cancelled: bool = False


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
    delete: tuple[Job, ...] = ()  # parked copies whose original completed: nothing left to run
    # Stopped without a copy: another workflow of the same run carries it on, or its status says its work is done.
    cancel: tuple[Job, ...] = ()
    waiting: tuple[tuple[Job, int, str], ...] = ()  # parked jobs left waiting: (job, queue position, why)


def loss_if_stopped(job: Job, now: float) -> float:
    """Seconds of work a stop would throw away: since the last checkpoint (or the start)."""
    since = job.progress_at if job.progress_at is not None else (job.started or job.created)
    return max(0.0, now - since) * job.replicas


def stop_cost(job: Job, now: float) -> float:
    """Replica-seconds a stop costs: the work it throws away, plus the time serving waits for its GPUs."""
    return loss_if_stopped(job, now) + (job.exit_seconds or 0.0) * job.replicas


# Exit times this close count as equal: below the reclaim check's resolution, the lost work decides.
EXIT_RESOLUTION_SECONDS = 15.0


def victim_order(job: Job, now: float) -> tuple[float, float, float, float, str]:
    """Return the sort key of a reclaim's victims: low priority first; at equal priority, the soonest to free its GPUs.

    Serving waits for the GPUs of the slowest victim, so at equal priority the job that exits
    sooner (its measured exit time, or its declared grace capped by the service) goes first, by
    steps of `EXIT_RESOLUTION_SECONDS`; one whose exit time is unknown goes last. Within a step,
    the least `stop_cost`, then the young.
    """
    exits = math.inf if job.exit_seconds is None else math.ceil(job.exit_seconds / EXIT_RESOLUTION_SECONDS - 1e-9)
    return (job.priority, exits, stop_cost(job, now), -job.created, job.name)


def plan(decision: Decision, baseline: int, jobs: Sequence[Job], now: float, explain: bool = True) -> Plan:
    """Plan the admissions and stops that take the service from its lent replicas to the decision's target.

    With `explain` (the gate), the plan also says why each parked job left waiting waits, and where
    it stands in the queue; the simulator, which needs only the decisions, skips those sentences.

    Admission order: priority (high first), then age (old first); a job that does not fit is
    skipped for a smaller one behind it. Stop order (`victim_order`): low priority first; then the
    soonest to give its GPUs back; then the least `stop_cost`; then the young; until enough replicas
    are freed; a job whose status says its work is done (only its exit handler runs) is stopped last, and
    without a copy (`cancel`): that status is tenant-written, so it never exempts a job. On a reclaim the
    replicas go to what the decision needs even if not enough can be stopped: serving first,
    the scheduler evicts research pods (low priority) for serving pods.
    """
    # A cancelled workflow decides nothing for its run (which carries it, which waits): its mark is only its own.
    withdrawn = tuple(j for j in jobs if j.cancelled)
    cancel = _duplicates([j for j in jobs if not j.cancelled])
    cancelled = {j.name for j in (*withdrawn, *cancel)}
    admitted = [j for j in jobs if j.state == ADMITTED]
    lent = sum(j.replicas for j in admitted if j.name not in cancelled)
    admitted = [j for j in admitted if j.name not in cancelled]
    jobs = [j for j in jobs if j.name not in cancelled]
    target = decision.target_lent
    notes: list[str] = []
    admit: list[Job] = []
    stop: list[Job] = []
    adopt: list[Job] = []
    delete = tuple(j for j in jobs if j.state == PARKED and j.parked_from and j.original_succeeded)
    deleted = {j.name for j in delete}
    queue: list[Job] | None = None  # the admissible queue, sorted only when a lend or the waiting sentences need it

    ended: list[Job] = []  # stopped without a copy: their work is done, as their status says
    if target < lent:
        victims = sorted((j for j in admitted if not j.finishing), key=lambda j: victim_order(j, now))
        freed = 0
        for job in victims:
            if lent - freed <= target:
                break
            stop.append(job)
            freed += job.replicas
        # Only its status says a job is finishing, and a tenant may write that (no status subresource): what the
        # others do not free is freed from these too, last, with no copy (a stop lets a real exit handler run on).
        for job in sorted((j for j in admitted if j.finishing), key=lambda j: victim_order(j, now)):
            if lent - freed <= target:
                break
            ended.append(job)
            freed += job.replicas
            notes.append(f"{job.name} is finishing (its status says its work is done) and holds replicas serving "
                         "needs: stopped, not parked again")
        lent -= freed
    elif target > lent:
        room, ceiling_room = target - lent, max(decision.ceiling, target) - lent
        queue = _queue(jobs, deleted)
        started: set[str | None] = set()
        for job in queue:
            # The first job that fits under what stayed lendable over the whole window may exceed
            # one lend step (else the step would starve every large job); the rest fit the step.
            first = not admit and not adopt
            if not first and room <= 0:
                break  # the step is used up: no job behind fits
            if job.run_id is not None and job.run_id in started:
                continue  # another workflow of its run starts now
            if job.replicas > 0 and (job.replicas <= room or (first and job.replicas <= ceiling_room)):
                (admit if job.state == PARKED else adopt).append(job)
                started.add(job.run_id)
                room -= job.replicas
                ceiling_room -= job.replicas
                lent += job.replicas
        if not admit and not adopt and any(j.state == PARKED and j.problem is None for j in jobs):
            notes.append(f"no parked job fits in {target - sum(j.replicas for j in admitted)} lendable replicas")

    # Running without admission and not adopted: it must not hold replicas serving may need. One whose work is
    # done (only its exit handler runs) holds none: a stop would only park a copy that runs the ended job again.
    for job in jobs:
        if job.state not in (ADMITTED, PARKED) and job not in adopt and not job.finishing:
            stop.append(job)
            why = f"but {job.problem}" if job.problem else "and does not fit"
            notes.append(f"{job.name} runs without admission {why}: stopped and parked again")
        elif job.state not in (ADMITTED, PARKED) and job.finishing:
            # Whether its work is done is its status's word alone: it is stopped, as anything running without
            # admission is, but not parked again (a copy would run an ended job again).
            ended.append(job)
            notes.append(f"{job.name} runs without admission and its status says its work is done: stopped, "
                         "not parked again")
        elif job.state == ADMITTED and job.problem and job not in stop and job not in ended:
            # A value on it cannot be trusted any more (a tenant rewrote its label): stopped, and what it was
            # lent goes back to serving now; parked again unless its status says its work is done.
            (ended if job.finishing else stop).append(job)
            lent -= job.replicas
            notes.append(f"{job.name} was admitted but {job.problem}: stopped"
                         + (", not parked again (its status says its work is done)" if job.finishing
                            else " and parked again"))

    scale_to = baseline - min(lent, target) if target < decision.lent else baseline - lent
    waiting: tuple[tuple[Job, int, str], ...] = ()
    if explain:
        queue = _queue(jobs, deleted) if queue is None else queue
        waiting = _waiting(decision, jobs, queue, deleted, {j.name for j in admit}, lent)
    notes.extend(f"{j.name} runs run {j.run_id} that another workflow carries: stopped, not parked again" for j in cancel)
    notes.extend(f"{j.name}: its run was cancelled: stopped, never admitted nor parked again" for j in withdrawn)
    return Plan(decision.service, scale_to, tuple(admit), tuple(stop), tuple(adopt), lent, tuple(notes), delete,
                waiting=waiting, cancel=(*withdrawn, *cancel, *ended))


def _duplicates(jobs: Sequence[Job]) -> tuple[Job, ...]:
    """Return the running workflows of a run that another workflow carries: one run never runs twice at once.

    Argo's `retry` runs a preempted workflow again, `resubmit` makes a new one of the same run, `resume`
    starts a parked one without admission. Per run id, the admitted workflow carries the run (the gate's own
    record says which, and of which run: a relabelled workflow keeps the run it was admitted for). Without
    one, a parked copy the gate made of the run (its record says so: `Job.gate_copy`) carries it while it
    waits, so every workflow of the run that runs without admission is a duplicate; without either, the
    oldest running one does (adopted, or stopped and parked again like any job running without admission),
    and parked workflows of the run wait while it runs. Never a parked workflow the gate did not make: the
    run-id label is tenant-written, so a workflow labelled with another's run id must not get that run
    stopped without a copy. The others are duplicates, stopped without a copy (their work goes on in the one
    that carries it).
    """
    by_run: dict[str, list[Job]] = {}
    for job in jobs:
        if job.run_id:
            by_run.setdefault(job.run_id, []).append(job)
    out: list[Job] = []
    for group in by_run.values():
        running = sorted((j for j in group if j.state in (ADMITTED, UNMANAGED)),
                         key=lambda j: (j.state != ADMITTED, j.created, j.name))
        if len(running) < 1:
            continue
        copied = any(j.state == PARKED and j.gate_copy for j in group)
        keep = running[0] if running[0].state == ADMITTED or not copied else None
        out.extend(j for j in running if j is not keep and not j.finishing)
    return tuple(out)


def _queue(jobs: Sequence[Job], deleted: set[str]) -> list[Job]:
    """Return the jobs that may be admitted, in order: running-unadmitted first, then parked by priority and age."""
    # A parked copy whose original still runs (a gate stopped between parking and stopping) waits.
    # A job of a run that already runs waits for it (one run never runs twice at once).
    active = {j.name for j in jobs if j.state != PARKED}
    running_runs = {j.run_id for j in jobs if j.state != PARKED and j.run_id}
    admissible = [j for j in jobs if j.state != ADMITTED and j.name not in deleted and j.problem is None
                  and not j.finishing and j.original_done and j.parked_from not in active
                  and (j.state != PARKED or j.run_id is None or j.run_id not in running_runs)]
    admissible.sort(key=lambda j: (j.state == PARKED, -j.priority, j.created, j.name))
    return admissible


def lends_nothing_now(decision: Decision) -> str:
    """Why a service lends nothing more, in words that do not move with the load or the queue.

    The sentence is written on every parked job of the service: were it to quote the load (or the
    queue's length), one load change would rewrite every one of them. `offhours why` computes the
    full story with numbers from the read model.
    """
    if decision.state.failed_ticks:
        return "lends nothing: its load data is not usable now"
    if decision.required is None:
        return "lends nothing: outside its lending window"
    if decision.action == "reclaim":
        return "lends nothing: its load needs its replicas back"
    return "lends nothing more now: its recent load leaves no more replicas to spare"


def _waiting(decision: Decision, jobs: Sequence[Job], admissible: Sequence[Job], deleted: set[str],
             admitted_now: set[str], lent_after: int) -> tuple[tuple[Job, int, str], ...]:
    """Each parked job left waiting, its 1-based position in the queue and the reason in one sentence."""
    queue = [j for j in admissible if j.state == PARKED and j.name not in admitted_now]
    queued = {j.name for j in queue}
    out: list[tuple[Job, int, str]] = []
    for pos, job in enumerate(queue, start=1):
        if decision.target_lent <= lent_after and decision.action != "lend":
            why = f"{decision.service} {lends_nothing_now(decision)}"
        else:
            why = f"{decision.service} has no room for its {job.replicas} replica(s) now"
        out.append((job, pos, f"waiting: {why}; position {pos} in the queue"))
    for job in jobs:
        if job.state == PARKED and job.name not in admitted_now and job.name not in deleted and job.name not in queued:
            reason = (f"not admitted: {job.problem}" if job.problem
                      else f"waiting: its original {job.parked_from} has not stopped yet")
            out.append((job, 0, reason))
    return tuple(out)


def rotate_stops(stop: Sequence[Job], turn: int, window: int) -> tuple[Job, ...]:
    """Return the stops with the gate's own admissions first, the others turned by `turn` windows of `window`.

    The stops of workflows the gate did not admit are budgeted (`window` of them at most a tick); taken from
    the same place each tick, a few that always fail (a workflow the API refuses to copy) would spend the
    whole budget every tick and shield the rest of a flood for ever. Turned each tick, every one gets its turn.
    """
    own = [j for j in stop if j.state == ADMITTED]
    others = [j for j in stop if j.state != ADMITTED]
    if len(others) <= 1:
        return (*own, *others)
    # A step prime to their number starts every position in turn, whatever part of `window` the tick's
    # budget (shared by all services) leaves: each one is first within len(others) ticks at the latest.
    step = max(1, window)
    while math.gcd(step, len(others)) != 1:
        step += 1
    start = (turn * step) % len(others)
    return (*own, *others[start:], *others[:start])
