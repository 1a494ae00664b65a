"""Advisory reads of a tick: how admitted workflows ended, parked copies' originals, templates, progress, releases.

Each read is time-boxed (`timeboxed`) and all of a tick's together within a budget: a tenant's many objects
can slow the research side of a tick, never its serving writes, which come before any of these reads.
"""

import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from offhours.scripts.cluster.arguments import declared_arguments, undeclared_problem
from offhours.scripts.cluster.template_grace import CLUSTER_SCOPED, template_grace_problem
from offhours.scripts.cluster.workflow import succeeded
from offhours.scripts.gate.admissions import (
    with_original,
)
from offhours.scripts.gate.observe import describe
from offhours.scripts.gate.snapshot import Observed
from offhours.scripts.gate.tick_state import GateParts, TickState
from offhours.scripts.policy.boundary import unpinned_image_problem
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.policy.plan import ADMITTED, PARKED, UNMANAGED, Job
from offhours.scripts.policy.record import (
    ServiceRecord,
)
from offhours.scripts.policy.release import measured, with_release_estimates

MAX_PENDING_ENDS = 64  # admitted workflows still ending (or unreadable) whose end is read again next tick


def ended(gate: GateParts, t: TickState, obs: Observed, lineages: Mapping[str, Collection[str]],
           now: float) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """Read how each workflow the gate admitted and no longer lists ended (advisory, once each).

    Return the runs that succeeded (done: no copy of them runs again) and the workflows still ending (their
    exit handler runs, or the read failed), kept in the record to be read again. One the gate stopped and
    copied itself is not read: it did not succeed. Only a workflow of its run's lineage ends a run.
    """
    listed = {j.uid for j in obs.jobs}
    copied = {uid for uid, _, _, _ in obs.record.copies}
    # A name an older gate did not keep (""): how it ended cannot be read, and unknown is never "done".
    ended = [(uid, run, name) for uid, (run, name) in (obs.record.runs or {}).items()
             if uid not in listed and uid not in copied and name and uid in lineages.get(run, ())]
    done: list[str] = []
    pending: dict[str, tuple[str, str]] = {}
    ns = gate.config.workflow_namespace
    for uid, run, name in ended:
        probe = Job(name=name, service=obs.policy.name, replicas=0, state=UNMANAGED)
        read = timeboxed(gate, t, f"how {name} ended", partial(lambda n: (gate.cluster.workflow(ns, n),), name), probe)
        if not isinstance(read, tuple):
            pending[uid] = (run, name)  # unreadable now: read again next tick
            continue
        wf = read[0]
        if not isinstance(wf, dict) or str((wf.get("metadata") or {}).get("uid") or "") != uid:
            continue  # gone, or the name is another workflow's now: how it ended is unknown, never "done"
        outcome = succeeded(wf)
        if outcome:
            done.append(run)
        elif outcome is None and len(pending) < MAX_PENDING_ENDS:
            pending[uid] = (run, name)
    return done, pending


def with_originals(gate: GateParts, t: TickState, jobs: list[Job]) -> list[Job]:
    """Read the original of each parked copy (`_with_original`) as advisory reads, within the tick's budget.

    The `parked-from` annotation is anyone's to write: one read per workflow that carries it, unbounded, made a
    tenant's thousands of such workflows a tick as long as they liked, and the next tick (the next reclaim) that
    much later. The gate's own copies are read first, then the rest in queue order, at most a count a tick; one
    left unread waits.
    """
    wanted = sorted((j for j in jobs if j.state in (PARKED, UNMANAGED) and j.parked_from),
                    key=lambda j: (not j.gate_copy, j.problem is not None, j.state == PARKED, -j.priority,
                                   j.created, j.name))
    # At most `advisory_reads_per_tick` of them, all services together: the reads are anyone's to multiply.
    left = max(0, gate.advisory_reads_per_tick - t.advisory_reads)
    read: dict[str, Job] = {j.name: replace(j, original_done=False) for j in wanted[left:]}  # unread: it waits
    if len(wanted) > left:
        gate.log.info(f"{len(wanted) - left} parked copies' originals left for a later tick (advisory reads: "
                      f"{gate.advisory_reads_per_tick} a tick)", wanted[0].service)
    t.advisory_reads += min(len(wanted), left)
    ns = gate.config.workflow_namespace
    for job in wanted[:left]:
        name = job.parked_from or ""
        answer = timeboxed(gate, t, f"original {name} of {job.name}",
                           partial(lambda n: (gate.cluster.workflow(ns, n),), name), job)
        read[job.name] = with_original(job, answer[0]) if isinstance(answer, tuple) else \
            replace(job, original_done=False)  # unknown: the copy waits
    return [read.get(j.name, j) for j in jobs]


def with_template_checks(gate: GateParts, t: TickState, jobs: list[Job], policy: ServicePolicy) -> list[Job]:
    """Mark each job that may be admitted or adopted and whose templates refuse it: one read serves both checks.

    - an argument its template does not declare: Argo runs such a workflow with the template's default and
      never reads the argument (a typo runs silently); the reason names the near miss;
    - the grace of the pods it runs through the templates it refers to (`template_grace`): above the service's
      cap, or unknown (a ClusterWorkflowTemplate, a template missing or unreadable, an expression).
    It is never admitted nor adopted; a job that refers to no template costs no read.
    """
    candidates = [j for j in jobs if j.state != ADMITTED and j.problem is None and j.template_refs]
    if not candidates or t.reclaim_only:
        return jobs
    # A ClusterWorkflowTemplate is never read (no right to): a job that refers only to those costs no read.
    if not t.templates_read and any(not r.startswith(CLUSTER_SCOPED) for j in candidates for r in j.template_refs):
        t.templates_read = True
        ns = gate.config.workflow_namespace
        # Once a tick, time-boxed on its own: a tenant's many parked copies spending the budget on their
        # originals must not leave every job that runs a template unknown, nor this read their originals unread.
        read = timeboxed(gate, t, f"WorkflowTemplates of {ns}", lambda: gate.cluster.workflow_templates(ns),
                              candidates[0], budgeted=False)
        t.templates = read if isinstance(read, dict) else None
    templates = t.templates
    out = []
    for job in jobs:
        problem = None
        if job.state != ADMITTED and job.problem is None and job.template_refs:
            try:
                problem = template_problem(t, job, templates, policy) or \
                    unpinned_image_problem(job.template_spec, gate.config.research,
                                           templates.get(job.template or "") if templates is not None else None)
            except Exception as err:  # noqa: BLE001 - a tenant's template that breaks the check is that job's
                problem = f"its templates could not be checked: {describe(err)}"
        out.append(job if problem is None else replace(job, problem=problem))
    return out


def template_problem(t: TickState, job: Job, templates: dict[str, dict[str, Any]] | None,
                      policy: ServicePolicy) -> str | None:
    """Return why a job's templates refuse it (an undeclared argument, a grace above the cap), or None."""
    declared = templates.get(job.template or "") if templates is not None and job.template else None
    problem = None if declared is None else \
        undeclared_problem(job.template or "", job.arguments, declared_arguments(declared))
    return problem or template_grace_problem(job.template_spec, templates, policy.max_grace_seconds, policy.name,
                                             t.template_too_large)


def measure_releases(gate: GateParts, t: TickState, obs: Observed, record: ServiceRecord, jobs: list[Job],
                      now: float) -> tuple[ServiceRecord, list[Job]]:
    """Read the pods of the jobs stopped earlier, record the releases that ended, plan with them (advisory)."""
    names = {name: uid for name, _, _, uid in record.releasing}
    probe = Job(name=next(iter(names)), service=obs.policy.name, replicas=0, state=UNMANAGED)  # what the log names
    pods = timeboxed(gate, t, f"pods of {len(names)} stopped job(s)",
                          partial(gate.cluster.workflow_pods, gate.config.workflow_namespace, names), probe)
    releasing, releases = measured(record.releasing, record.releases, pods if isinstance(pods, dict) else {}, now,
                                   obs.policy.max_grace_seconds)
    record = replace(record, releasing=releasing, releases=releases)
    return record, with_release_estimates(jobs, releases, obs.policy.max_grace_seconds)


def with_progress(gate: GateParts, t: TickState, job: Job) -> Job:
    """Return an admitted job with its last checkpoint time as its store says (time-boxed), if newer."""
    if job.state != ADMITTED or gate.progress is None:
        return job
    progress = gate.progress
    at = timeboxed(gate, t, f"progress of {job.name}", lambda: progress(job), job)
    if not isinstance(at, (int, float)) or (job.progress_at is not None and job.progress_at >= at):
        return job
    return replace(job, progress_at=float(at))


def timeboxed(gate: GateParts, t: TickState, what: str, read: Callable[[], Any], job: Job, budgeted: bool = True) -> Any:
    """Run an advisory read about `job` with a per-call timeout inside the tick's budget; None when over either.

    Not `budgeted`: the per-call timeout alone bounds it, and it takes nothing from the budget (a read made
    once a tick, that the reads charged to the budget must neither crowd out nor be crowded out by).
    """
    left = gate.advisory_budget - t.advisory_spent if budgeted else gate.advisory_timeout
    if left <= 0:
        gate.log.warning(f"{what}: skipped, the tick's advisory budget ({gate.advisory_budget:.0f} s) is spent",
                         job.service, job=job.name)
        return None
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(read())
        except Exception as err:  # noqa: BLE001 - reported below
            failure.append(err)

    started = time.monotonic()
    worker = threading.Thread(target=run, name=what, daemon=True)  # a hung read must not hold the process
    worker.start()
    worker.join(min(gate.advisory_timeout, left))
    if budgeted:
        t.advisory_spent += time.monotonic() - started
    if worker.is_alive():
        gate.log.warning(f"{what}: no answer within {min(gate.advisory_timeout, left):.1f} s: skipped", job.service,
                         job=job.name)
        return None
    if failure:
        gate.log.warning(f"{what} unreadable: {describe(failure[0])}", job.service, job=job.name)
        return None
    return result[0] if result else None
