"""Whether a job's pods may outlast the service's grace cap (pure: no I/O).

The gate bounds how long a stop may hold serving's GPUs by capping the grace parameter at
admission (`maxGraceSeconds`). Two things escape that cap, and each is the job's problem, seen on
the workflows every tick already lists:
- a workflow whose own spec sets its pods' grace (`Job.own_grace`: a podSpecPatch, a manifest,
  Kubernetes' default for a workflow of its own templates): never admitted nor adopted above the
  cap, stopped if it runs;
- an admitted job whose grace parameter no longer reads within the cap (a tenant raised it, or
  removed it, after the admission): pods it starts from then on keep that grace for their life,
  so no later write can bound them again. It is stopped and parked again; its copy is capped when
  it is admitted. Until then the plan reads its exit time as what it is, never as the cap.
"""

import math
from collections.abc import Iterable
from dataclasses import replace

from offhours.scripts.names import GRACE_PARAMETER
from offhours.scripts.policy.plan import ADMITTED, Job


def _shown(seconds: float | None) -> str:
    if seconds is None:
        return "not set (the template's default applies)"
    return "not a whole number of seconds" if math.isinf(seconds) else f"{seconds:.0f} s"


def grace_problem(job: Job, cap_seconds: float, service: str) -> str | None:
    """Return why the job's pods may outlast `cap_seconds`, and what to change; None if they may not."""
    # A job whose status says its work has ended is checked too: that status is tenant-written, and a pod started
    # above the cap keeps its grace for its life (the plan stops such a job without a copy: none runs it again).
    cap = f"{service}'s maxGraceSeconds {cap_seconds:g}"
    own = job.own_grace
    if own is not None and own > cap_seconds:
        where = job.own_grace_at or "its spec"
        return (f"its pods' grace period is its own ({where}: {_shown(own)}), above {cap}: set "
                f"terminationGracePeriodSeconds to a number of at most {cap_seconds:g} s on every pod, "
                "or run an offhours template, whose grace the gate caps")
    grace = job.grace_parameter
    if job.state == ADMITTED and (grace is None or grace > cap_seconds):
        return (f"its {GRACE_PARAMETER} is {_shown(grace)} since its admission, above {cap} (a pod it starts "
                f"now would keep it): leave it at most {cap_seconds:g}")
    return None


def with_grace_checks(jobs: Iterable[Job], cap_seconds: float, service: str) -> list[Job]:
    """Return the jobs with each grace above the cap made that job's problem; an admitted one's exit time uncapped."""
    out: list[Job] = []
    for job in jobs:
        problem = None if job.problem else grace_problem(job, cap_seconds, service)
        if problem is None:
            out.append(job)
            continue
        if job.state == ADMITTED:
            # What its pods may take to stop, as far as it is known: never the cap it escaped.
            known = [g for g in (job.grace_parameter, job.own_grace) if g is not None and g > cap_seconds]
            exit_seconds = max(known) if known and math.isfinite(max(known)) else None
            job = replace(job, exit_seconds=exit_seconds)
        out.append(replace(job, problem=problem))
    return out
