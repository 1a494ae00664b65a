"""Usage of the pool: GPU-hours used, lent and lost to preemption, runs and preemptions, per group and period.

The one computation behind `offhours report` (per service and month), `offhours usage` (per service,
user or label, all time or since a moment) and the console's usage page (per service and month): each
sums the read model's job views here, so they agree on the same cluster objects. The rules:

- Lending starts at admission (`offhours.io/admitted-at`, written by the gate) and ends at the first of
  the return of the GPUs (`returned-at`), the preemption (`preempted-at`) and the workflow's finish; a
  workflow still holding them is lent until the pool was read. A parked job is lent nothing while it
  waits, however long.
- GPUs per replica come from the service's Deployment (its pod template's `nvidia.com/gpu`: what a lent
  replica holds), else from the gate configuration when one is given; where neither says, the job's lent
  and lost GPU-hours are not counted rather than guessed.
- GPU-hours used are what Argo measured (`resourcesDuration`, else the exit hook's `gpu-seconds`): one
  total per workflow, spread evenly over its run (first pod start, else admission, to its finish or now).
- Lost to preemption: on a preempted workflow, its GPUs from the latest of its last checkpoint, its start
  and its admission, to the preemption; never more than it was lent.
- Lent but unused: the part of a workflow's lending before a pod of its work got past Pending (all of it, when
  none did): GPUs lowered from serving that nothing runs on. One definition (`unused_span`) gives the GPU-hours
  here and the console's gauge `offhours_service_lent_unused_gpus` (`lent_unused_gpus_at`: their sum at a
  moment). Argo records a pod's creation, not when it began running, so a pod pending after its creation counts
  as used once it runs; GPUs still lowered after a workflow's lending ended are the return path's (its timings).
- Every time is bounded by the read and by the workflow's creation (`bounded`): tenants can write them.
- A GPU-hour belongs to the period (UTC month, or since a moment) in which it passed: time that crosses a
  month's end is cut there. A workflow and its run count in each period in which it held or used GPUs
  (one that never did: in the period it was submitted); a preemption counts in the period it happened.
"""

import calendar
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.pool.model import WAITING, JobView, Pool, gpus_of

Span = tuple[datetime, datetime]


@dataclass
class UsageRow:
    """The sums of one group (a service, a user, a label's value) in one period (a month, or all the pool's history)."""

    key: str
    month: str = ""  # YYYY-MM, or "" for a period that is not a month
    runs: set[str] = field(default_factory=set)  # namespace/run id
    workflows: set[str] = field(default_factory=set)  # namespace/name
    preemptions: int = 0
    used: float = 0.0  # GPU-hours
    lost: float = 0.0
    lent: float = 0.0
    unused: float = 0.0  # GPU-hours lent but unused

    @property
    def service(self) -> str:
        """The group's key, for rows grouped by service."""
        return self.key

    def equivalent_gpus(self) -> float:
        """GPUs that would give the same GPU-hours running all month, 24 hours a day."""
        year, month = (int(x) for x in self.month.split("-"))
        return self.used / (calendar.monthrange(year, month)[1] * 24)


@dataclass(frozen=True)
class JobUsage:
    """One workflow's usage, before it is cut into periods."""

    job: JobView
    gpus: int | None  # replicas x GPUs per replica; None: unknown
    used: float  # GPU-hours Argo measured
    run: Span | None  # over which `used` is spread (only when something was used)
    lent: Span | None
    lost: Span | None
    preempted: datetime | None  # when it was preempted, if it was
    unused: Span | None = None  # lent and no work pod past Pending yet
    unused_open: bool = False  # `unused` lasts until the read: still lent, still nothing running

    @property
    def submitted(self) -> datetime | None:
        """When the workflow was created (else when it started, else when it was admitted)."""
        return self.job.created or self.job.started or self.job.admitted


@dataclass(frozen=True)
class Share:
    """The part of one workflow's usage that falls into one period."""

    used: float
    lost: float
    lent: float
    preemptions: int
    unused: float = 0.0


def job_gpus(job: JobView, pool: Pool, gpus_per_replica: Mapping[str, int] | None = None) -> int | None:
    """GPUs the job borrows: replicas x GPUs per replica of its Deployment, else of the configuration's service."""
    gpus = gpus_of(job, pool)
    if gpus is None and gpus_per_replica and job.service in gpus_per_replica:
        return job.replicas * gpus_per_replica[job.service]
    return gpus


def _span(start: datetime, end: datetime) -> Span:
    return start, max(start, end)


def bounded(job: JobView, now: datetime) -> JobView:
    """Return the job with its times as accounting may use them: none after the read, none before its creation.

    Tenants can write every one of these (annotations, and a Workflow's status has no subresource): a time
    years away must neither spread a job over centuries of months nor move it out of the month it ran in.
    A job still parked was never admitted, whatever its annotation says.
    """
    floor = job.created if job.created is not None and job.created <= now else None

    def at(t: datetime | None) -> datetime | None:
        return None if t is None else max(min(t, now), floor) if floor is not None else min(t, now)

    parked = job.state == WAITING and job.finished is None
    return replace(job, admitted=None if parked else at(job.admitted), started=at(job.started), finished=at(job.finished),
                   preempted=at(job.preempted), returned=at(job.returned), last_checkpoint=at(job.last_checkpoint))


def job_usage(job: JobView, gpus: int | None, now: datetime) -> JobUsage:
    """Apply the rules of the module docstring to one workflow, read at `now`."""
    job = bounded(job, now)
    used = (job.gpu_seconds or 0.0) / 3600
    run_start = job.started or job.admitted
    run = _span(run_start, job.finished or now) if used > 0 and run_start is not None else None
    lent = None
    if job.admitted is not None:
        ends = [t for t in (job.returned, job.preempted, job.finished) if t is not None]
        lent = _span(job.admitted, min(ends) if ends else now)
    lost, preempted = None, None
    if job.is_preemption:
        preempted = job.preempted or job.finished or (lent[1] if lent else None)
        since = max((t for t in (job.last_checkpoint, job.started, job.admitted) if t is not None), default=None)
        if job.preempted is not None and since is not None and lent is not None:
            lo, hi = max(since, lent[0]), min(job.preempted, lent[1])
            lost = (lo, hi) if hi > lo else None
    unused, unused_open = unused_span(job, lent, now)
    return JobUsage(job, gpus, used, run, lent, lost, preempted, unused, unused_open)


def unused_span(job: JobView, lent: Span | None, now: datetime) -> tuple[Span | None, bool]:
    """Return the part of `lent` before the job's work started (all when none did), and whether it lasts until now.

    `job` is already `bounded`: its work start is read as the lending's, clamped into it.
    """
    if lent is None:
        return None, False
    started = None if job.work_started is None else min(max(job.work_started, lent[0]), lent[1], now)
    end = lent[1] if started is None else started
    return (_span(lent[0], end), started is None and lent[1] >= now)


def service_lent_unused_gpus(pool: Pool, service: str) -> int:
    """Return the gauge: GPUs of `service` lent but unused when the pool was read.

    A workflow whose values cannot be counted is left out, as in the report.
    """
    total = 0
    for job in pool.jobs:
        if job.service != service:
            continue
        try:
            total += lent_unused_gpus_at([job_usage(job, job_gpus(job, pool), pool.read_at)], pool.read_at)
        except Exception:  # noqa: BLE001, S112 - tenant-written values that parse but are absurd: this job only
            continue
    return total


def lent_unused_gpus_at(usages: Iterable[JobUsage], at: datetime) -> int:
    """GPUs lent but unused at `at`: the sum over the workflows whose unused span holds it (the gauge's value)."""
    return sum(u.gpus or 0 for u in usages
               if u.unused is not None and u.unused[0] <= at and (at < u.unused[1] or u.unused_open))


def _hours(span: Span, start: datetime | None, end: datetime | None) -> float:
    lo = span[0] if start is None else max(span[0], start)
    hi = span[1] if end is None else min(span[1], end)
    return max(0.0, (hi - lo).total_seconds() / 3600)


def _inside(at: datetime | None, start: datetime | None, end: datetime | None) -> bool:
    if at is None:
        return start is None and end is None  # a time not known is only in the whole history
    return (start is None or at >= start) and (end is None or at < end)


def _touches(span: Span, start: datetime | None, end: datetime | None) -> bool:
    return _inside(span[0], start, end) if span[0] == span[1] else _hours(span, start, end) > 0


def share(usage: JobUsage, start: datetime | None = None, end: datetime | None = None) -> Share | None:
    """Return the part of `usage` in [start, end) (None: unbounded); None when the workflow does not count there."""
    active = any(s is not None and _touches(s, start, end) for s in (usage.lent, usage.run))
    preempted = usage.job.is_preemption and _inside(usage.preempted, start, end)
    submitted = usage.lent is None and usage.run is None and _inside(usage.submitted, start, end)
    if not (active or preempted or submitted):
        return None
    if usage.run is not None:
        total = _hours(usage.run, None, None)
        if total:
            used = usage.used * _hours(usage.run, start, end) / total
        else:
            used = usage.used if _inside(usage.run[0], start, end) else 0.0
    else:
        used = usage.used if submitted else 0.0
    gpus = usage.gpus or 0
    lent = _hours(usage.lent, start, end) * gpus if usage.lent else 0.0
    lost = _hours(usage.lost, start, end) * gpus if usage.lost else 0.0
    unused = _hours(usage.unused, start, end) * gpus if usage.unused else 0.0
    return Share(used, lost, lent, int(preempted), unused)


def _add(row: UsageRow, job: JobView, part: Share) -> None:
    row.runs.add(f"{job.namespace}/{job.run_id}")
    row.workflows.add(f"{job.namespace}/{job.name}")
    row.preemptions += part.preemptions
    row.used += part.used
    row.lost += part.lost
    row.lent += part.lent
    row.unused += part.unused


def _month_start(at: datetime) -> datetime:
    at = at.astimezone(timezone.utc)
    return datetime(at.year, at.month, 1, tzinfo=timezone.utc)


def _next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)


def months(usage: JobUsage) -> Iterator[tuple[str, datetime, datetime]]:
    """(YYYY-MM, start, end) of every UTC month from the workflow's first known time to its last."""
    times = [t for t in (usage.submitted, usage.preempted) if t is not None]
    times += [t for s in (usage.run, usage.lent) if s is not None for t in s]
    if not times:
        return
    month, last = _month_start(min(times)), _month_start(max(times))
    while month <= last:
        following = _next_month(month)
        yield f"{month:%Y-%m}", month, following
        month = following


def job_usages(pool: Pool, gpus_per_replica: Mapping[str, int] | None = None) -> Iterable[JobUsage]:
    """Every workflow of the pool with its usage, read at the pool's read time."""
    return (job_usage(job, job_gpus(job, pool, gpus_per_replica), pool.read_at) for job in pool.jobs)


def _parts(pool: Pool, gpus_per_replica: Mapping[str, int] | None, skipped: list[str] | None,
           cut: Callable[[JobUsage], list[tuple[Any, Share]]]) -> Iterator[tuple[JobView, Any, Share]]:
    """Each workflow's shares, as `cut` divides them; a workflow whose values break the arithmetic is skipped whole."""
    for job in pool.jobs:
        try:
            parts = cut(job_usage(job, job_gpus(job, pool, gpus_per_replica), pool.read_at))
        except Exception as err:  # noqa: BLE001 - tenant-written values that parse but are absurd: this job only
            if skipped is not None:
                skipped.append(f"workflow {job.namespace}/{job.name} skipped from usage: its times or sizes cannot "
                               f"be counted ({type(err).__name__})")
            continue
        yield from ((job, key, part) for key, part in parts)


def usage_by_month(pool: Pool, gpus_per_replica: Mapping[str, int] | None = None,
                   skipped: list[str] | None = None) -> list[UsageRow]:
    """Per service and UTC month, in month then service order (`offhours report`, the console's usage page).

    A workflow that cannot be counted is left out and named in `skipped` (when given); the rest is counted.
    """
    def cut(usage: JobUsage) -> list[tuple[Any, Share]]:
        return [((usage.job.service, month), part) for month, start, end in months(usage)
                if (part := share(usage, start, end)) is not None]

    rows: dict[tuple[str, str], UsageRow] = {}
    for job, key, part in _parts(pool, gpus_per_replica, skipped, cut):
        _add(rows.setdefault(key, UsageRow(*key)), job, part)
    return sorted(rows.values(), key=lambda r: (r.month, r.key))


def group_key(job: JobView, by: str) -> str:
    """Return the job's group: its service (`service`), its user (`user`) or a label's value (`label:KEY`)."""
    if by == "service":
        return job.service
    if by == "user":
        return job.user
    return job.labels.get(by.removeprefix("label:"), "(none)")


def usage_lines(pool: Pool, by: str = "service", since: datetime | None = None,
                gpus_per_replica: Mapping[str, int] | None = None, skipped: list[str] | None = None) -> list[UsageRow]:
    """Per group (see `group_key`), over the whole history or since `since` (`offhours usage`), in key order.

    A workflow that cannot be counted is left out and named in `skipped` (when given); the rest is counted.
    """
    def cut(usage: JobUsage) -> list[tuple[Any, Share]]:
        part = share(usage, since, None)
        return [(group_key(usage.job, by), part)] if part is not None else []

    rows: dict[str, UsageRow] = {}
    for job, key, part in _parts(pool, gpus_per_replica, skipped, cut):
        _add(rows.setdefault(key, UsageRow(key)), job, part)
    return sorted(rows.values(), key=lambda r: r.key)


def unknown_gpus(pool: Pool, gpus_per_replica: Mapping[str, int] | None = None) -> list[str]:
    """Services with admitted jobs whose GPUs per replica are unknown (their lent GPU-hours are not counted)."""
    return sorted({j.service for j in pool.jobs if j.admitted is not None and job_gpus(j, pool, gpus_per_replica) is None})


def render_table(rows: list[UsageRow], price: float) -> str:
    """Render the monthly usage as `offhours report`'s text table, with a total line."""
    # "runs" are run ids (a job with all its parked copies), as in `offhours usage`; "workflows" are Argo Workflows.
    head = f"{'month':<8} {'service':<20} {'runs':>5} {'workflows':>9} {'preempt':>7} {'GPU-h used':>11} " \
           f"{'GPU-h lent':>11} {'unused GPU-min':>14} {'equiv GPUs':>10} {'saving':>10}"
    lines = [head, "-" * len(head)]
    total = UsageRow("all")
    for r in rows:
        lines.append(f"{r.month:<8} {r.service:<20} {len(r.runs):>5} {len(r.workflows):>9} {r.preemptions:>7} "
                     f"{r.used:>11,.1f} {r.lent:>11,.1f} {r.unused * 60:>14,.0f} {r.equivalent_gpus():>10,.1f} "
                     f"{r.used * price:>10,.0f}")
        total.runs |= {f"{r.service}/{x}" for x in r.runs}
        total.workflows |= r.workflows  # a workflow lent across a month's end is one workflow
        total.preemptions += r.preemptions
        total.used += r.used
        total.lent += r.lent
        total.unused += r.unused
    lines.append("-" * len(head))
    lines.append(f"{'total':<8} {'':<20} {len(total.runs):>5} {len(total.workflows):>9} {total.preemptions:>7} "
                 f"{total.used:>11,.1f} {total.lent:>11,.1f} {total.unused * 60:>14,.0f} {'':>10} "
                 f"{total.used * price:>10,.0f}")
    return "\n".join(lines)
