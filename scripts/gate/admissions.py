"""The one decoder of what the gate admitted: pure functions of the listed workflows and the gate's record.

Everything on a workflow is anyone's to write (labels, annotations, status): whether a workflow is one the gate
admitted, which run it belongs to, which listed copy is the gate's own, which workflow first claimed a scheduled
run, and the admission order are read here, from the gate's record, and nowhere else (the gate's observe and
reconcile steps, the reclaim check and the release of a removed service all call these).
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from offhours.scripts.cluster.workflow import before_its_night, cancelled, measured_exit_seconds, night_of, succeeded
from offhours.scripts.names import FINISHED_PHASES
from offhours.scripts.policy.plan import ADMITTED, UNMANAGED, Job
from offhours.scripts.policy.record import MAX_LINEAGE_MEMBERS, Copy, ServiceRecord

# How far the API server's clock (a workflow's creationTimestamp, whole seconds) may trail the gate's.
CLOCK_SKEW_SECONDS = 2.0


def returned_by_record(jobs: list[Job], record: ServiceRecord, uid: str) -> tuple[list[Job], tuple[str, ...]]:
    """Split the listed jobs: those the tick reads on, and the UIDs of those returned by the gate's record.

    The `returned` label and the status that says only an exit handler runs are anyone's to write: a workflow so
    labelled gave its GPUs back only if the gate admitted it (its UID is one of the record's admissions, or of its
    runs: an admission still ending, or one it saw returned before). Such a one is listed no more, as it always
    was (how it ends is read as any ended admission's). A record of an older gate that kept no admissions leaves
    the mark of the Deployment it was admitted against as the evidence (as `counted_jobs`). Any other workflow so
    labelled runs without admission: stopped like one (its status says its work is done: without a copy).
    """
    known = {*(record.admitted or {}), *(record.runs or {}), *record.returned}
    kept: list[Job] = []
    returned: list[str] = []
    for job in jobs:
        if job.returned and job.uid and (job.uid in known or record.admitted is None and bool(uid)
                                         and job.borrowed_from == uid):
            returned.append(job.uid)
        else:
            kept.append(job)
    return kept, tuple(returned)


def counted_jobs(jobs: list[Job], record: ServiceRecord, uid: str) -> list[Job]:
    """Return the jobs with only the gate's own admissions of this incarnation counted as admitted.

    Anything on a workflow a tenant can write, so its label and its `borrowed-from` mark can be copied
    (by hand, or by `argo resubmit`): what counts is the record the gate keeps of what it admitted, and
    the replicas it lent then. A record from before the gate kept one (or none at all) leaves the mark
    as the only evidence. Anything else labelled admitted runs without admission: adopted or stopped.

    The run of an admitted workflow is the gate's record too where it has one: the run it was admitted for,
    whatever its run-id label says now (`with_lineage` does the same for the others).
    """
    out = []
    marked: set[str] = set()  # runs already counted by their mark (`argo resubmit` copies it: one per run)
    runs = record.runs or {}
    for job in sorted(jobs, key=lambda j: (j.created, j.name)):
        if job.state != ADMITTED:
            out.append(job)
        elif record.deployment_uid and record.deployment_uid != uid:
            out.append(replace(job, state=UNMANAGED))  # admitted against another incarnation: lends nothing to this one
        elif record.admitted is not None:
            lent = record.admitted.get(job.uid) if job.uid else None
            recorded = runs.get(job.uid) if job.uid else None
            run = recorded[0] if recorded else job.run_id
            problem = job.problem or (_moved(job.run_id, run) if recorded else None)
            out.append(replace(job, state=UNMANAGED) if lent is None else
                       replace(job, replicas=lent, run_id=run, problem=problem))
        elif (uid and job.borrowed_from != uid) or (job.run_id is not None and job.run_id in marked):
            out.append(replace(job, state=UNMANAGED))
        else:
            out.append(job)
            if job.run_id is not None:
                marked.add(job.run_id)
    order = {j.name: i for i, j in enumerate(jobs)}
    return sorted(out, key=lambda j: order.get(j.name, 0))


NO_RUN = "~"  # the run a removed service's release records the copy of a workflow with no run id under (`_release`)


def linked_uids(jobs: Sequence[Job]) -> list[str]:
    """Return the UIDs listed workflows link to (their own, and their `copy-of`): what keeps a copy entry (`with_copies`)."""
    return [u for j in jobs for u in (j.uid, j.copy_of) if u]


def copy_tokens(copies: Sequence[Copy]) -> dict[str, str]:
    """Return each recorded stop's copy token, by the stopped workflow's UID: a copy carrying it is the gate's."""
    return {original: token for original, _, _, token in copies}


def lineages_of(record: ServiceRecord, jobs: Sequence[Job]) -> dict[str, tuple[str, ...]]:
    """Return each run's lineage (run id -> the UIDs of its workflows the gate admitted or made), as of this listing.

    The record's, and a copy the gate made but could not record (the gate died, or the write failed, between the
    copy and its record): a listed workflow linked to a stop the gate recorded, carrying that stop's token,
    created after the stop, whose original is the newest of its run's lineage (a copy continues it; once the copy
    is in the lineage, its original is no longer the newest); the oldest such per stop (`argo resubmit` of a copy
    copies its token too, and is younger; a workflow made before the stop cannot know its token, even if its
    owner writes it on later).

    A record of an older gate kept no lineage: its admissions, and the parked copies linked to the stops it
    recorded, are then the lineage (the evidence that gate went by), once; the tick records them as lineages.
    """
    if record.lineages is None:
        out: dict[str, list[str]] = {}
        for uid, (run, _) in sorted((record.runs or {}).items()):
            out.setdefault(run, []).append(uid)
        legacy = {original: run for original, run, _, _ in record.copies}
        for job in jobs:
            if job.state != ADMITTED and job.uid and job.copy_of in legacy:
                out.setdefault(legacy[job.copy_of], []).append(job.uid)
        return {run: tuple(uids[-MAX_LINEAGE_MEMBERS:]) for run, uids in out.items()}
    lineages = dict(record.lineages)
    stops = {original: (run, at, token) for original, run, at, token in record.copies if token}
    for job in sorted(jobs, key=lambda j: (j.created, j.name)):
        run, at, token = stops.get(job.copy_of or "", ("", 0.0, ""))
        if (run and job.copy_token == token and job.state != ADMITTED and job.uid
                and job.created >= at - CLOCK_SKEW_SECONDS and lineages.get(run, ())[-1:] == (job.copy_of,)):
            lineages[run] = (*lineages[run], job.uid)[-MAX_LINEAGE_MEMBERS:]
    return lineages


def with_lineage(jobs: list[Job], record: ServiceRecord, lineages: Mapping[str, Collection[str]],
                 carriers: Mapping[str, str] | None = None, first: Mapping[str, str] | None = None) -> list[Job]:
    """Give each workflow the gate admitted or made its run's lineage, and refuse a run to any other workflow.

    `lineages` maps a run to the UIDs of its lineage (those of every service of the tick: one research namespace
    may serve several). A workflow of a lineage belongs to that run whatever its labels say since, and is the
    gate's own parked copy (`Job.gate_copy`) if it is linked to a stop the gate recorded. Any other workflow
    under a run id that has a lineage is that run's only by its own word (a run id is tenant-written and has no
    owner): it is never admitted nor adopted while the lineage lives, so it can neither run that run twice nor,
    by succeeding (or writing that it did: Argo's status is no subresource), end it. `carriers` names a listed
    workflow of each lineage, for the reason (default: those of `jobs`). A scheduled run's id no lineage holds is
    the first workflow's created of it (`first`, of every service; default: of `jobs`): no other may begin its run.
    """
    member = {uid: run for run, uids in lineages.items() for uid in uids}
    copies = {original for original, _, _, _ in record.copies}
    if carriers is None:
        carriers = lineage_carriers(jobs, lineages)
    if first is None:
        first = first_scheduled_claims(jobs, lineages)
    out = []
    for job in jobs:
        run = member.get(job.uid) if job.uid and job.state != ADMITTED else None
        if run is not None:
            job = replace(job, run_id=run, gate_copy=bool(job.copy_of and job.copy_of in copies),
                          problem=job.problem or _moved(job.run_id, run))
        elif job.state != ADMITTED and job.run_id is not None and job.run_id in lineages and job.problem is None:
            holder = carriers.get(job.run_id)
            by = f"workflow {holder}, which" if holder else "the workflows"
            job = replace(job, problem=f"its run {job.run_id} belongs to {by} the gate admitted or parked for it: no "
                                       "other workflow runs it while that run lives; submit under another run id")
        elif (job.state != ADMITTED and job.run_id is not None and job.run_id in first
              and first[job.run_id] != job.name and job.problem is None):
            older = first[job.run_id] or "another workflow created in the same second"
            job = replace(job, problem=f"its run {job.run_id} is a scheduled run's, first claimed by {older}: a "
                                       "scheduled run is the first workflow of its id (its CronWorkflow's); submit "
                                       "under another run id")
        out.append(job)
    return out


def first_scheduled_claims(jobs: Sequence[Job], lineages: Mapping[str, Collection[str]]) -> dict[str, str]:
    """Return, per scheduled run id (`workflow.night_of`) no lineage holds yet, the first listed workflow created of it.

    Its CronWorkflow creates a scheduled run's workflow as it fires; any workflow of that id created earlier is
    refused (`workflow.run_identity`) and claims nothing, so the first created after is the scheduled run, and a
    later one under its id never jumps it. Two created in the same second: neither is known to be first ("": none
    may take the run).
    """
    claims: dict[str, list[Job]] = {}
    for job in jobs:
        if job.run_id and job.run_id not in lineages and night_of(job.run_id) is not None \
                and not before_its_night(job.run_id, job.created):
            claims.setdefault(job.run_id, []).append(job)
    out: dict[str, str] = {}
    for run, claimants in claims.items():
        oldest = min(j.created for j in claimants)
        firsts = [j.name for j in claimants if j.created == oldest]
        out[run] = firsts[0] if len(firsts) == 1 else ""
    return out


def lineage_carriers(jobs: Sequence[Job], lineages: Mapping[str, Collection[str]]) -> dict[str, str]:
    """Return, per run, the first of `jobs` (as listed) that is of its lineage: the workflow a waiting reason names."""
    member = {uid: run for run, uids in lineages.items() for uid in uids}
    carriers: dict[str, str] = {}
    for job in jobs:
        if job.uid in member:
            carriers.setdefault(member[job.uid], job.name)
    return carriers


def _moved(run_id: str | None, run: str | None) -> str | None:
    """Why a workflow the gate admitted or made for `run` may not run now it reads as `run_id` (None: it may)."""
    if run_id is None or run is None or run_id == run:
        return None
    return (f"its run id is now {run_id}, not {run}, the run the gate admitted or parked it for: its steps would "
            "write another run's checkpoints")


def with_original(job: Job, original: dict[str, Any] | None) -> Job:
    """For a parked copy, given its original as read: whether it is confirmed stopped, and whether it completed.

    Also for a copy that runs without admission (`argo resume`): it is adopted only once its original stopped.
    """
    if original is None:
        return replace(job, original_done=True)
    meta = original.get("metadata") or {}
    if job.copy_of and meta.get("uid") and meta.get("uid") != job.copy_of:
        return replace(job, original_done=True)  # that name now belongs to another workflow
    phase = (original.get("status") or {}).get("phase")
    measured = measured_exit_seconds(original)  # learnt from the run's history: what its last stop took
    # Only the gate's own copy is deleted for its original's success, and only on Argo's word for it (the
    # root node): a phase is anyone's to write.
    done = bool(meta.get("uid")) and succeeded(original) is True
    completed = job.gate_copy and done
    if done and not completed and job.copy_of and meta.get("uid") == job.copy_of:
        # A copy of a workflow whose work succeeded (its stop came too late), that the gate cannot call its own
        # (its record was lost): running it would run the work twice; it waits, for its owner to delete.
        job = replace(job, problem=job.problem or f"its original {meta.get('name')} has succeeded: nothing is "
                                                  "left to run; submit under a new run id to run it again")
    # A cancel that landed on the original just after its copy was parked: the copy carries on a cancelled run.
    withdrawn = job.cancelled or bool(job.copy_of and meta.get("uid") == job.copy_of and cancelled(original))
    return replace(job, original_done=phase in FINISHED_PHASES, original_succeeded=completed, cancelled=withdrawn,
                   exit_seconds=job.exit_seconds if measured is None else measured,
                   exit_learnt=job.exit_learnt or measured is not None)
