"""Reconcile: a service's snapshot and the tick's clock in, the tick's intent out. Pure: no I/O, no cluster.

The steps, as one tick takes them (scripts/gate/controller.py runs them; actuate writes what they say):
- `reconcile_serving`: which workflows count as lent, the baseline the gate owns, the decision, and the
  serving write it implies (`raise_to`, `serving_target`);
- `readopt`: after a lower found serving changed by another writer, the same decision on what was found;
- `tick_record`: the record the tick writes once serving's writes are done;
- `tick_event`: the Event and reasons people read.
The reclaim check between ticks asks `reclaim_due` (the same decision, on the basis the last tick left),
and the simulator calls `policy.serving.serving_decision`, the one call of `decide` under all of them.
"""

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from offhours.scripts.cluster.base import Pod
from offhours.scripts.gate.admissions import counted_jobs, linked_uids, with_lineage
from offhours.scripts.gate.snapshot import Observed, TickView
from offhours.scripts.names import (
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_WAITING_REASON,
    EVENT_GATE_HOLD,
    EVENT_GPUS_LENT,
    EVENT_GPUS_RECLAIMED,
)
from offhours.scripts.policy import forecast
from offhours.scripts.policy.capacity import Load, replicas_for_rates
from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.decide import Decision
from offhours.scripts.policy.grace import with_grace_checks
from offhours.scripts.policy.holding import for_plan, lent_floor
from offhours.scripts.policy.lease import renewed
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job, Plan
from offhours.scripts.policy.record import (
    MAX_RETURNED,
    ServiceRecord,
    need_storage,
    own_baseline,
    with_copies,
    with_lineages,
    with_need,
)
from offhours.scripts.policy.release import with_release_estimates, with_stops
from offhours.scripts.policy.samples import CounterSample
from offhours.scripts.policy.serving import Rules, ServingInput, serving_decision


class Reading(Protocol):
    """A service's load as observe read it (`metrics.sources.Reading`; reading it is I/O, so not imported here)."""

    @property
    def load(self) -> Load | None:
        """The load, or None when there is none."""

    @property
    def error(self) -> str | None:
        """Why there is no usable load."""

    @property
    def samples(self) -> dict[str, CounterSample]:
        """The counter samples to keep in the record."""

# A reason kept in the record: a load error can carry a whole answer body, and the record must stay far under 1 MiB.
REASON_CHARS = 300


@dataclass(frozen=True)
class ServingIntent:
    """What a service's tick decided before any write: the jobs as counted, the baseline it owns, the decision."""

    policy: ServicePolicy  # as the decision read it (the autoscaler's floor, the measured cold start)
    jobs: list[Job]  # the listed workflows as the gate counts them (admitted by its record, lineages, release times)
    over_cap: list[Job]  # admitted workflows whose grace the cap does not bound (stopped, with an Event)
    lent: int
    baseline: int
    record: ServiceRecord  # the record with the owned baseline and this tick's need (not yet the decision)
    adopted: str | None  # what another writer set that the gate adopted as the owner's, said once
    given: ServingInput
    decision: Decision
    pool_whole: bool = True  # every pod holding the pool was read: if not, nothing new is lent (policy/holding)

    @property
    def raise_to(self) -> int | None:
        """Return the serving write of a reclaim, before anything else of any service (None: no reclaim)."""
        if self.decision.target_lent >= self.decision.lent:
            return None
        return self.baseline - self.decision.target_lent


def reconcile_serving(config: GateConfig, obs: Observed, reading: Reading, now: float, view: TickView,
                      squatted_gpus: int = 0, pool_whole: bool = True) -> ServingIntent:
    """Decide a service's tick from its snapshot, the load read, the tick's time and the tick's joined view.

    `squatted_gpus`: what research pods hold on the pool beyond everything the gate lent (policy/holding.py):
    decided as lent from this service, so none lends onto it; the plan is made over the gate's own jobs.
    `pool_whole`: whether every pod holding the pool was read; if not, a lend holds (a reclaim stands).
    """
    policy, dep = obs.policy, obs.dep
    # A job's exit time: what its run's recent stops measured, else its declared grace, within the service's cap.
    jobs = with_lineage(counted_jobs(obs.jobs, obs.record, dep.uid), obs.record, view.lineages, view.carriers,
                        view.first_claims)
    jobs = with_release_estimates(jobs, obs.record.releases, policy.max_grace_seconds)
    # A grace the cap does not bound (the workflow's own, or raised since its admission) is that job's problem,
    # and an admitted one's exit time is read as what it is, not as the cap.
    checked = with_grace_checks(jobs, policy.max_grace_seconds, policy.name)
    over_cap = [j for j, was in zip(checked, jobs) if j.state == ADMITTED and j.problem and not was.problem]
    jobs = checked
    lent = sum(j.replicas for j in jobs if j.state == ADMITTED)
    owned = own_baseline(obs.record, dep.uid, obs.writes_to, obs.current, lent)
    record = replace(owned.record, deployment=dep.text)  # hook: scale target
    if obs.scaler is not None and obs.scaler.min_replicas > policy.min_replicas:
        policy = replace(policy, min_replicas=obs.scaler.min_replicas)  # never cap below the autoscaler's floor
    policy = with_measured_cold_start(policy, obs.pods)
    record, floor = look_ahead(config, policy, record, reading, now)
    decided_lent = lent_floor(lent, squatted_gpus, policy.gpus_per_replica) if squatted_gpus > 0 else lent
    given = ServingInput(policy, owned.baseline, decided_lent, reading.load, reading.error, record.decision, floor)
    return ServingIntent(policy, jobs, over_cap, lent, owned.baseline, record, owned.adopted, given,
                         for_plan(serving_decision(Rules.of(config), given, now), lent, pool_whole), pool_whole)


def readopt(config: GateConfig, intent: ServingIntent, obs: Observed, found: ServiceRecord, changed: str,
            now: float, last_try: bool) -> ServingIntent:
    """Decide again after a lower found serving changed by another writer: its value adopted as the owner's.

    `found` is the record as it stands after the unwritten lower; `obs.current` the value found. On the
    `last_try` a lend holds (nothing is lowered this tick): the next tick decides again.
    """
    owned = own_baseline(found, obs.dep.uid, obs.writes_to, obs.current, intent.lent)
    given = replace(intent.given, baseline=owned.baseline)
    decision = for_plan(serving_decision(Rules.of(config), given, now), intent.lent, intent.pool_whole)
    if last_try and decision.target_lent > decision.lent:
        decision = replace(decision, action="hold", target_lent=decision.lent,
                           reason=f"{decision.reason}; serving changed by another writer at each try: "
                                  "nothing lowered this tick")
    return replace(intent, baseline=owned.baseline, record=replace(owned.record, deployment=obs.dep.text),
                   adopted=f"{changed}; {owned.adopted or 'kept'}", given=given, decision=decision)


def serving_target(decision: Decision, p: Plan, current: int) -> int:
    """Return the value the tick's plan writes for serving: only a lend lowers; anything else at most raises."""
    return p.scale_to if decision.action == "lend" else max(p.scale_to, current)


def reclaim_due(config: GateConfig, policy: ServicePolicy, baseline: int, lent: int, record: ServiceRecord,
                reading: Reading, now: float) -> bool:
    """Whether a check between ticks, reading `reading`, needs lent replicas back (the tick's decision, no fail-safe)."""
    _, floor = look_ahead(config, policy, record, reading, now)
    given = ServingInput(policy, baseline, lent, reading.load, reading.error, record.decision, floor)
    decision = serving_decision(Rules.of(config).for_checks(), given, now)
    return decision.target_lent < decision.lent


def look_ahead(config: GateConfig, policy: ServicePolicy, record: ServiceRecord, reading: Reading,
               now: float) -> tuple[ServiceRecord, int | None]:
    """Return the record with this need added, and the look-ahead floor (trend, volatility, time of day), if on.

    The reaction time it looks over is the gate's own: a reclaim check's period (or a tick, without
    checks), the service's grace cap and its cold start (`with_measured_cold_start`).
    """
    if not forecast.enabled(policy) or reading.load is None or reading.error is not None:
        return record, None
    need = replicas_for_rates(reading.load, policy)
    if not (need >= 0 and need < float("inf")):
        return record, None  # decide names the unusable reading
    tick = float(config.tick_seconds)
    reaction = forecast.reaction_seconds(policy, tick, float(config.reclaim_check_seconds or tick))
    keep = forecast.history_ticks(policy, tick, reaction)
    needs = with_need(record.needs, now, need, tick, keep)
    exact, width = need_storage(keep, forecast.exact_ticks(policy, tick, reaction), tick)  # the record's bound
    return (replace(record, needs=needs, needs_exact=exact, needs_width=width),
            forecast.forecast_required([n for _, n in needs], policy, tick, reaction))


def with_measured_cold_start(policy: ServicePolicy, pods: list[Pod]) -> ServicePolicy:
    """Return the policy with the cold start measured on its ready pods (created -> Ready), the configured value as prior."""
    starts = [p.start_seconds for p in pods if p.start_seconds is not None]
    if not starts:
        return policy
    return replace(policy, cold_start_seconds=forecast.cold_start_estimate(policy.cold_start_seconds, starts))


def tick_record(intent: ServingIntent, obs: Observed, record: ServiceRecord, decision: Decision, p: Plan,
                jobs: Sequence[Job], reading: Reading, now: float, *, granted: Sequence[Job],
                pending: Mapping[str, tuple[str, str]], done: Any, lineages: Mapping[str, Collection[str]],
                token: Callable[[], str], lease_duration: float) -> ServiceRecord:
    """Return the record a tick writes once serving's writes are done: what it admitted is recorded before it is.

    Only what is recorded counts as lent on the next tick. `granted`: the admissions and adoptions of the plan
    (none in a reclaim check's pass); `pending`: admitted workflows still ending; `done`: the runs that succeeded.
    """
    record = replace(record, decision=decision.state, samples=reading.samples or record.samples,
                     last_decision=last_decision(decision, p, now), deployment=obs.dep.text,
                     admitted={**{j.uid: j.replicas for j in jobs if j.state == ADMITTED and j.uid},
                               **{j.uid: j.replicas for j in granted if j.uid}},
                     runs={**pending, **{j.uid: (j.run_id, j.name) for j in (*jobs, *granted)
                                         if j.uid and j.run_id and (j.state == ADMITTED or j in granted)}},
                     done=done,
                     # A run the gate admits joins its lineage (the first admitted begins it); a copy once it is
                     # listed (`lineages_of`). Kept while a workflow of it is listed or still ending.
                     lineages=with_lineages(dict(obs.lineages), [(j.run_id, j.uid) for j in granted
                                                           if j.uid in lineages.get(j.run_id or "", {j.uid})],
                                            [*(j.uid for j in obs.jobs), *pending, *(j.uid for j in granted)]),
                     returned=obs.returned[-MAX_RETURNED:],
                     # The copies this tick's stops park are recorded before they are made, as admissions are.
                     # Newest last, and the newest MAX_COPIES kept: the own stops and the budget's window (the
                     # first in `p.stop`, which this tick makes) are recorded last, so each is kept with its token.
                     copies=with_copies(record.copies, [(j.uid, j.run_id) for j in reversed(p.stop)],
                                        linked_uids(jobs), now,
                                        [j.uid for j in jobs if j.state == ADMITTED and j.uid], token),
                     # Only the gate's own admissions are measured: a workflow running without one may carry
                     # any run id (a tenant-written label), and its stop would be measured under that run.
                     # Nor one whose pod GC deletes pods as they end: the slowest may be gone unread.
                     releasing=with_stops(record.releasing,
                                          [j for j in p.stop if j.state == ADMITTED and j.pods_kept], now))
    return renewed(record, now, lease_duration)  # lending is a lease: this tick renews it


def unread_ends(obs: Observed) -> dict[str, tuple[str, str]]:
    """Return the record's admitted workflows no longer listed: the ends a full tick reads, as the record has them."""
    listed = {j.uid for j in obs.jobs}
    return {uid: entry for uid, entry in (obs.record.runs or {}).items() if uid not in listed}


def with_runs_elsewhere(jobs: list[Job], running: Mapping[str, Collection[str]], service: str) -> list[Job]:
    """Make a parked job whose run runs for another service (of the same research namespace) wait for it."""
    out = []
    for job in jobs:
        elsewhere = sorted(set(running.get(job.run_id or "", ())) - {service})
        if job.state == PARKED and job.problem is None and elsewhere:
            job = replace(job, problem=f"its run {job.run_id} runs for service {elsewhere[0]}: one run never runs "
                                       "twice at once, it waits for that workflow to end")
        out.append(job)
    return out


def with_done_runs(jobs: list[Job], done: set[str]) -> list[Job]:
    """Mark what would run a run that succeeded again: the gate's own copies are deleted, any other copy refused.

    Only copies (a workflow the gate made, or one that says it continues another: `argo resubmit` of a
    parked copy carries the marks); a new submission under a finished run's id is its submitter's choice.
    """
    out = []
    for job in jobs:
        if job.state == ADMITTED or job.run_id not in done or not (job.gate_copy or job.copy_of or job.parked_from):
            out.append(job)
        elif job.gate_copy and job.parked_from and job.state == PARKED:
            out.append(replace(job, original_succeeded=True))  # the plan deletes it: nothing left to run
        else:
            out.append(replace(job, problem=job.problem or f"its run {job.run_id} has succeeded: nothing is left to "
                                                          "run; submit under a new run id to run it again"))
    return out


def last_decision(decision: Decision, p: Plan, now: float) -> dict[str, Any]:
    """Return the decision as the record keeps it for people (`offhours status`, the console)."""
    return {"at": now, "action": decision.action, "required": decision.required, "lent": p.lent_after,
            "target": decision.target_lent, "reason": decision.reason[:REASON_CHARS]}


def changed_waiting(p: Plan) -> list[tuple[Job, int, str]]:
    """Return the waiting reasons of the plan that differ from what the job carries: the only ones written."""
    return [(j, position, reason) for j, position, reason in p.waiting
            if (j.waiting_reason, j.queue_position) != (reason, position)]


def waiting_annotations(reason: str, position: int) -> dict[str, str]:
    """Return the annotations that tell a waiting job's owner why it waits and where it stands."""
    return {ANNOTATION_WAITING_REASON: reason, ANNOTATION_QUEUE_POSITION: str(position)}


def tick_event(obs: Observed, decision: Decision, p: Plan, baseline: int | None, parked: Sequence[str],
               error: str | None) -> tuple[str, str, bool]:
    """Return the tick's Event for a service: its reason, its message, and whether it is a warning."""
    gpus = obs.policy.gpus_per_replica
    message = (f"{decision.action}: {decision.reason}. required={decision.required} baseline={baseline} "
               f"lent {decision.lent}->{p.lent_after} replicas ({p.lent_after * gpus} GPUs); "
               f"{obs.writes_to} at {obs.current}")
    if p.admit or p.adopt:
        message += "; admitted " + ", ".join(j.name for j in (*p.admit, *p.adopt))
    if p.stop:
        message += "; stopped " + ", ".join(j.name for j in p.stop) + "; parked " + ", ".join(parked)
    if p.notes:
        message += "; " + "; ".join(p.notes)
    if error:
        message += f"; errors: {error}"
    reason = (EVENT_GPUS_LENT if p.lent_after > decision.lent
              else EVENT_GPUS_RECLAIMED if p.lent_after < decision.lent or decision.action == "reclaim"
              else EVENT_GATE_HOLD)
    return reason, message, bool(error) or (decision.action == "reclaim" and "failed ticks" in decision.reason)
