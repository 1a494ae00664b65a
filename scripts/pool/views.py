"""What a researcher reads of the pool, the same on the command line and in the console: times, ages, runs, sentences.

Pure: a `Pool` or a time in, text or a selection out.
"""

from datetime import datetime, timezone

from offhours.scripts.names import STATE_CONFIGMAP_PREFIX
from offhours.scripts.pool.model import (
    ADMITTED,
    FINISHED,
    PREEMPTED,
    RESUMED_WAITING,
    RUNNING,
    STOPPED_UNADMITTED,
    WAITING,
    JobView,
    Pool,
    RunView,
    gpus_of,
)
from offhours.scripts.pool.store_progress import Stored

DONE_STATES = ("succeeded", "failed", "cancelled")
LIVE_NAMED = 5  # a refusal names at most this many of a run's live workflows


def age(since: datetime | None, now: datetime) -> str:
    """`3d4h`, `2h5m`, `7m`, `12s` (kubectl's short style)."""
    if since is None:
        return "-"
    seconds = max(0, int((now - since).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def stamp(at: datetime | None) -> str:
    """UTC time as `2025-03-14 11:15:00Z`."""
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ") if at else "-"


def select_runs(pool: Pool, service: str | None = None, include_finished: bool = False) -> list[RunView]:
    """Select the runs to list: unfinished ones (all with `include_finished`), of one service if given."""
    return [r for r in pool.runs if (service is None or r.service == service)
            and (include_finished or r.state not in DONE_STATES)]


def sentence(run: RunView, pool: Pool) -> str:
    """Where the run is, in one plain sentence (`offhours why`, the console's job page)."""
    c, now = run.current, pool.read_at
    gpus = gpus_of(run, pool)
    on = f"{gpus} GPUs" if gpus is not None else f"{c.replicas} replica(s)"
    if c.state == WAITING:
        reason = c.reason or "waiting"
        if c.reason_computed:
            reason += (f" (computed from ConfigMap {STATE_CONFIGMAP_PREFIX}{run.service}: "
                       "the gate has not recorded a reason on this job)")
        if run.state == RESUMED_WAITING:
            return f"preempted {run.preemptions} time(s), parked to resume from its last checkpoint; {reason}"
        return reason
    if c.state == RUNNING:
        return f"running since {stamp(c.started or c.admitted)} on {on} of {run.service} ({age(c.started or c.admitted, now)})"
    if c.state == ADMITTED:
        return f"admitted at {stamp(c.admitted)}: its pods are starting on {on} of {run.service}"
    if c.stopping:
        asked = c.cancelled or c.preempted
        at = f" at {stamp(asked)}" if asked else ""
        return (f"{c.state}: stop asked{at}; Argo has not finished it yet, so its pods may still be running "
                "(exit handlers run, a job saves its checkpoint)")
    if c.state == PREEMPTED:
        return f"preempted at {stamp(c.preempted)}: its replicas went back to {run.service}; the gate parks a copy to resume it"
    if c.state == STOPPED_UNADMITTED:
        return (f"stopped at {stamp(c.preempted)} before the gate admitted it (it held no lent GPUs of {run.service}); "
                "the gate parks a copy that waits for admission")
    end = c.finished or c.cancelled
    return f"{c.state} at {stamp(end)} after {run.gpu_seconds / 3600:.2f} GPU-hours and {run.preemptions} preemption(s)"


# A gate tick that preempts a copy parks the next one first: a cancel that read the run before that copy existed
# reads it again after its stops (after a moment: the tick's park and stop are moments apart) and stops what
# appeared, for a few rounds.
CANCEL_ROUNDS = 3
CANCEL_SETTLE_SECONDS = 2.0


def same_run(pool: Pool, run: RunView) -> RunView | None:
    """Return `run` as `pool` reads it: by its run id and namespace (`Pool.find` prefers a workflow so named)."""
    return next((r for r in pool.runs if r.run_id == run.run_id and r.namespace == run.namespace), None)


def unfinished(run: RunView) -> list[JobView]:
    """Return the copies of `run` the cluster has not finished: what a resubmit must wait for, a cancel stops.

    A copy asked to stop (cancel, reclaim) is unfinished until Argo finishes it: its pods may still run and write.
    """
    return [c for c in run.copies if c.state not in FINISHED or not c.ended]


def cancellable(run: RunView) -> list[JobView]:
    """Return the copies of `run` no stop was asked of yet (what a cancel has still to stop)."""
    return [c for c in run.copies if c.state not in FINISHED]


def stop_line(copy: JobView) -> str:
    """Return what a cancel says of one copy it stops: whether it gives GPUs back, from what that copy holds."""
    if copy.state in (ADMITTED, RUNNING):
        return f"{copy.name}: stopping (exit handlers run; its GPUs go back to {copy.service})"
    return f"{copy.name}: stopping (it was {copy.state}: it held no lent GPUs: nothing to give back)"


def live_copies(pool: Pool, run_id: str) -> list[str]:
    """Return the names of the workflows answering to `run_id` that are not finished: its run's, then any other.

    A workflow answers to its run-id parameter (its steps write `<checkpoint-uri>/<run-id>/...`) and to its
    run-id label alike: a live one of either is a second writer, or reader, of that run's checkpoints.
    """
    run = next((r for r in pool.runs if r.run_id == run_id), None)
    names = [] if run is None else [c.name for c in unfinished(run)]
    return names + [c.name for r in pool.runs if r is not run for c in unfinished(r) if run_id in c.run_ids]


def live_run_message(run_id: str, live: list[str]) -> str:
    """Return the one refusal of a new workflow for a run id with a live one (`live`: the names it may show)."""
    named = ", ".join(live[:LIVE_NAMED]) + (f" and {len(live) - LIVE_NAMED} more" if len(live) > LIVE_NAMED else "")
    held = f"its live workflow {named}" if len(live) == 1 else f"its live workflows {named}" if live else \
        "a live workflow this identity may not list"
    return (f"run id {run_id} is still running or parked ({held}): a second workflow of it is never created; "
            "cancel it first, or choose another run-id. Nothing was created")


def checkpoint_line(recorded: datetime | None, stored: Stored | None, now: datetime) -> str:
    """Return `why`'s last-checkpoint line: the newer of what the gate recorded and what the run's store holds.

    `stored`: None when the run names no store to read; else the store's newest progress record (None: none
    there) and why the store could not be read (then only what was recorded is known, and the line says so).
    """
    at, problem, cut = stored if stored is not None else (None, None, None)
    newest = max((t for t in (recorded, at) if t is not None), default=None)
    if newest is None:
        line = "last checkpoint: none in its checkpoint store" if stored is not None and problem is None \
            and cut is None else "last checkpoint: none recorded"
    elif at is not None and newest == at and (recorded is None or at > recorded):
        line = f"last checkpoint: {stamp(newest)} ({age(newest, now)} ago, read from its checkpoint store)"
    else:
        line = f"last checkpoint: {stamp(newest)} ({age(newest, now)} ago)"
    if cut is not None:  # read, but not to the end: a newer record may be beyond its bound
        return f"{line}; its checkpoint store holds {cut}"
    return line + (f"; its checkpoint store could not be read: {problem}" if problem else "")


NOT_ADMITTED = "not admitted: "  # how the gate's reason begins for a job it keeps out of its queue (policy/plan.py)


def never_admitted_as_is(job: JobView) -> bool:
    """Whether the gate keeps this waiting job out of its queue for a problem of its own: it is admitted by no tick.

    Its run id cannot be trusted (the gate's own reading), or the gate wrote `not admitted: ...` at position 0
    (a grace above the cap, a template it cannot read): no replica is ever lent to it as it is.
    """
    return bool(job.run_problem) or (job.position == 0 and (job.reason or "").startswith(NOT_ADMITTED))
