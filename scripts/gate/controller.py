"""The gate: one tick as three steps, observe -> reconcile -> actuate; this module wires them.

- observe (gate/observe.py): every read of the tick, one frozen snapshot per service; what a workflow's
  labels claim is decoded once, against the gate's record (gate/admissions.py).
- reconcile (gate/reconcile.py): pure; snapshot + load + the tick's time -> the decision, the serving write,
  the record, the Events. The reclaim check between ticks and the simulator call the same decision.
- actuate (gate/actuate.py): the writes in phases: every service's serving write first (a raise waits for
  nothing), then each lower and record, then the research side and advisory writes within budgets; each
  write fenced by the Lease and isolated to its object. Advisory reads (gate/advisory.py) come after
  serving's raise and are time-boxed; the fail-safe (gate/failsafe.py) and a removed service's release
  (gate/release.py) write through the same functions.

It is written the way Kubernetes controllers are: level-triggered and stateless between ticks (its memory of
each service is a ConfigMap, admission on the workflows), so a tick killed between two writes converges on
the next one; it owns only its own delta (`policy.record.own_baseline`); a fault stays with its service;
a `coordination.k8s.io` Lease serialises writers and a gate that lost it stops writing.
"""

import os
import secrets
import socket
import sys
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TextIO

from offhours.scripts.cluster.base import Cluster
from offhours.scripts.gate import actuate, advisory, failsafe, release
from offhours.scripts.gate.admissions import counted_jobs
from offhours.scripts.gate.log import ERROR, INFO, WARNING, Logger
from offhours.scripts.gate.observe import describe, observe_service, read_load
from offhours.scripts.gate.placement import gang_check, park_unschedulable  # hook: placement
from offhours.scripts.gate.pool import read_pool, stop_squatters  # hook: pool holding
from offhours.scripts.gate.quota import keep_gpu_quota
from offhours.scripts.gate.reconcile import (
    look_ahead,
    readopt,
    reconcile_serving,
    serving_target,
    tick_record,
    unread_ends,
    with_done_runs,
    with_measured_cold_start,
    with_runs_elsewhere,
)
from offhours.scripts.gate.snapshot import Observed, tick_view
from offhours.scripts.gate.tick_state import Basis, LeaseLost, ServiceOutcome, ServingChanged, TickState
from offhours.scripts.metrics.sources import LoadSource, Reading
from offhours.scripts.names import EVENT_GRACE_ABOVE_CAP, EVENT_LENT_UNSCHEDULABLE, EVENT_REPLICAS_ADOPTED
from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.lease import lease_seconds
from offhours.scripts.policy.plan import Job, plan, rotate_stops
from offhours.scripts.policy.record import UnrecordedWrite, with_done

# Re-exported: callers and tests import these from the gate's entry module.
__all__ = ["Basis", "Gate", "LOWER_TRIES", "ServiceOutcome", "look_ahead", "store_progress", "unique_holder",
           "with_measured_cold_start"]

LOWER_TRIES = 2  # re-decisions of one tick after a lower found serving changed; then it holds until the next tick


def unique_holder() -> str:
    """Return a Lease holder identity unique to this process (two gates on one host are two holders)."""
    return f"gate/{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


@dataclass
class Gate:
    """The gate over a cluster, a load source and a configuration.

    Its fields are configuration and collaborators; what a tick learns lives in that tick's `TickState`.
    The one memory kept across ticks is `unrecorded` (see there).
    """

    config: GateConfig
    cluster: Cluster
    source: LoadSource
    # The API server's time (`Cluster.server_time`, when None): what the gate dates its record and decisions by,
    # so that every process (this loop, the next run, the backstop) reads one clock, never a node's.
    clock: Callable[[], float] | None = None
    holder: str = field(default_factory=unique_holder)
    out: TextIO = sys.stdout
    progress: Callable[[Job], float | None] | None = None  # last checkpoint time of a running job
    advisory_timeout: float = 5.0  # one advisory read (checkpoint progress)
    advisory_budget: float = 15.0  # all advisory reads of one tick
    advisory_writes_per_tick: int = 100  # waiting-reason writes of one tick, all services together
    advisory_reads_per_tick: int = 100  # parked copies' originals read in one tick, all services together
    # Stops of workflows the gate did not admit (a tenant's to multiply) in one tick, all services together;
    # the stops of what it admitted are never counted against it.
    research_writes_per_tick: int = 200
    monotonic: Callable[[], float] = time.monotonic
    # The lease on lending also covers the pause between two runs of the gate's CronWorkflow (a 5-minute
    # schedule of 4-minute runs, and a pod start): a healthy gate must never look gone between runs.
    lease_slack_seconds: float = 120.0
    # The token a stop's parked copy carries (`policy.record.Copy`): unguessable, so no workflow made before the copy
    # can carry it.
    token: Callable[[], str] = field(default=lambda: secrets.token_hex(12))
    # Raises written while the record could not be: remembered in this process and noted on the Lease,
    # so the next tick (of this process or another) does not take the gate's own raise for someone else's.
    unrecorded: dict[str, UnrecordedWrite] = field(default_factory=dict)
    unlisted: bool = False  # listing the gate's records failed once (said once per process)

    def now(self) -> float:
        """Return the time decisions and the record are dated by: the API server's (unless a test gives `clock`)."""
        return self.clock() if self.clock is not None else self.cluster.server_time()

    @property
    def lease_seconds(self) -> int:
        """How long one Lease grant lasts."""
        return max(60, 2 * self.config.tick_seconds)

    @property
    def lease_duration(self) -> float:
        """Seconds one tick's renewal of a service's lending holds before the backstop may restore its baseline."""
        return lease_seconds(self.config.lease_ticks, self.config.tick_seconds, self.lease_slack_seconds)

    @property
    def log(self) -> Logger:
        """The gate's log, on `out` (read at each line, so a caller may swap `out`)."""
        return Logger(self.out)

    def tick(self, dry_run: bool = False, *, only: Collection[str] | None = None,
             reclaim_only: bool = False, readings: Mapping[str, Reading] | None = None) -> list[ServiceOutcome]:
        """Run one observe -> reconcile -> actuate pass over every service (or those named in `only`).

        `reclaim_only`: the pass a reclaim check starts between ticks: it acts only on a reclaim,
        deciding on `readings` (the load the check read a moment before) where given.
        """
        ns = self.config.namespace
        t = TickState(dry_run=dry_run, reclaim_only=reclaim_only, only=None if only is None else frozenset(only),
                      readings=readings)
        if not dry_run:
            try:
                held = self.cluster.acquire_lease(ns, self.holder, self.lease_seconds)
            except Exception as err:  # noqa: BLE001 - without the Lease nothing may be written: skip, never crash
                self.log.error(f"could not take the offhours lease: {describe(err)}: skipping this tick")
                return []
            if not held:
                self.log.info("another gate or the backstop holds the offhours lease: skipping this tick")
                return []
            t.renewed = self.monotonic()
        try:
            return self._tick(t)
        except LeaseLost as err:  # raised wherever the gate noticed (observing, failing a service): stop writing
            self.log.warning(f"stopped this tick: {err}")
            return []
        finally:
            if not dry_run:
                try:
                    self.cluster.release_lease(ns, self.holder)
                except Exception as err:  # noqa: BLE001 - an unreleased Lease expires by itself
                    self.log.warning(f"could not release the lease: {err}")

    # -- the tick ---------------------------------------------------------------------------
    def _tick(self, t: TickState) -> list[ServiceOutcome]:
        services = [p for p in self.config.services if t.only is None or p.name in t.only]
        outcomes = {p.name: ServiceOutcome(p.name) for p in services}
        try:
            now = self.now()
        except Exception as err:  # noqa: BLE001 - no clock is every service's failed tick: the fail-safe still counts
            return self._without_clock(t, services, outcomes, f"no server time to date this tick by: {describe(err)}")
        t.deferred = []
        t.turn = int(now // max(1, self.config.tick_seconds))
        observed: list[Observed] = []
        for policy in services:
            try:
                observed.append(observe_service(self.cluster, self.config.namespace, self.config.workflow_namespace,
                                                policy, partial(self.note_of, t)))
            except Exception as err:  # noqa: BLE001 - any fault of one service is that service's failed tick
                failsafe.fail(self, t, policy, outcomes[policy.name], f"observe: {describe(err)}", now)
        observed = self._refuse_shared_deployments(t, observed, outcomes, now)
        release.adopt_unledgered(self, t, observed)  # hook: ledger (an older gate's lend, kept in a record only)
        release.return_stranded(self, t, observed)  # hook: ledger: a raise, before any other write of the tick
        t.view = tick_view(observed)
        t.runs_running = {run: set(names) for run, names in t.view.runs_running.items()}
        # What holds the pool's GPUs (pods as the scheduler counts them), read once a tick. Not in a reclaim check's
        # pass: it would stand between a rise and serving's raise (up to 40 pages a namespace), and a pass decides
        # on the gate's own record, as a tick whose read failed does; the next tick counts the squatters again.
        t.pool = None if t.reclaim_only else read_pool(self, t, observed, counted_jobs)  # hook: pool holding
        readings = read_load(self.source, observed, now) if t.readings is None else t.readings
        # Serving first across services, whatever their number: every service's serving write (a reclaim's
        # raise) comes before any advisory read, the lends' scale-downs and records next, and only then any
        # research-side or advisory write (stops, admissions, waiting reasons) of any service.
        before = {obs.policy.name: obs.current for obs in observed}  # for the GPU quota (gate/quota.py)
        acting = {obs.policy.name: (obs, self._service(t, obs, readings.get(obs.policy.name, Reading(None, "no reading")),
                                                       now, outcomes[obs.policy.name])) for obs in observed}

        def lost(err: LeaseLost, rest: Collection[str]) -> None:
            for name in rest:
                outcomes[name].error = f"not acted on: {err}"

        def after(phase: str) -> None:
            if phase == "serving":  # every raise is written: now the failed services' records and Events
                held, t.deferred = t.deferred or [], None
                for write in held:
                    write()
                keep_gpu_quota(self, t, observed, outcomes, before)  # lowered after serving's raises, before stops

        # The advisory-write budget is spent in the research phase's order: it starts elsewhere each tick.
        actuate.run_phases(acting, t.turn,
                           lambda obs, err: failsafe.fail(self, t, obs.policy, outcomes[obs.policy.name], err, now, obs),
                           lost, after)
        stop_squatters(self, t, observed)  # hook: pool holding (after every serving write)
        if not t.reclaim_only:
            release.release_removed(self, t)  # after every configured service's serving writes
        for outcome in outcomes.values():
            level = ERROR if outcome.failed else WARNING if outcome.error else INFO
            self.log.log(level, outcome.detail(), outcome.service)
        return list(outcomes.values())

    def _without_clock(self, t: TickState, services: list[ServicePolicy], outcomes: dict[str, ServiceOutcome],
                       error: str) -> list[ServiceOutcome]:
        """Count a failed tick for every service (nothing is decided or renewed undated); records after every raise."""
        t.deferred = []
        for policy in services:
            failsafe.fail(self, t, policy, outcomes[policy.name], error, None)
        held, t.deferred = t.deferred, None
        for write in held:
            write()
        for outcome in outcomes.values():
            self.log.log(ERROR if outcome.failed else WARNING, outcome.detail(), outcome.service)
        return list(outcomes.values())

    def note_of(self, t: TickState, service: str) -> UnrecordedWrite | None:
        """Return the gate's unrecorded raise of a service: this process's, or one noted on the Lease."""
        return self.unrecorded.get(service) or actuate.lease_note(self, t, service)

    def _refuse_shared_deployments(self, t: TickState, observed: list[Observed], outcomes: dict[str, ServiceOutcome],
                                   now: float) -> list[Observed]:
        """Two services resolving to one Deployment would flip it between their targets: neither acts."""
        by_uid: dict[str, list[Observed]] = {}
        for obs in observed:
            by_uid.setdefault(obs.dep.uid or f"{obs.dep.namespace}/{obs.dep.name}", []).append(obs)
        kept = []
        for group in by_uid.values():
            if len(group) == 1:
                kept.extend(group)
                continue
            names = ", ".join(o.policy.name for o in group)
            # One fail-safe per Deployment: two would each act on their own (stale) memory of it.
            ours = [o for o in group if o.record.deployment_uid == o.dep.uid] or group
            restorer = min(ours, key=lambda o: o.policy.name)
            for obs in group:
                failsafe.fail(self, t, obs.policy, outcomes[obs.policy.name],
                           f"services {names} all resolve to Deployment {obs.dep.name}: fix the gate config", now, obs,
                           restore=obs is restorer)
        return kept

    def _service(self, t: TickState, obs: Observed, reading: Reading, now: float,
                 outcome: ServiceOutcome) -> Iterator[None]:
        """One service's tick in three phases (`_tick` runs each phase for every service before the next one).

        Reconcile decides (pure); the serving write comes first; then the reads that only a stop or an
        admission needs, the plan and the record; then the research side.
        """
        squatted = t.pool.unexplained_gpus if t.pool is not None else 0  # hook: pool holding
        whole = t.pool.whole if t.pool is not None else True  # hook: pool holding (a reclaim pass never lends)
        intent = reconcile_serving(self.config, obs, reading, now, t.view, squatted, whole)
        policy, dep, jobs, record, decision = intent.policy, obs.dep, intent.jobs, intent.record, intent.decision
        outcome.baseline, outcome.adopted, outcome.decision = intent.baseline, intent.adopted, decision
        if t.dry_run or (t.reclaim_only and decision.target_lent >= decision.lent):
            jobs = advisory.with_template_checks(self, t, jobs, policy) if t.dry_run else jobs  # a dry run writes nothing
            outcome.plan = plan(decision, intent.baseline, jobs, now, explain=not t.reclaim_only)
            outcome.basis = Basis(policy, intent.baseline, decision.lent, obs.pods, obs.record)
            return
        # Serving first: a reclaim raises serving to what the decision needs before anything else.
        if intent.raise_to is not None:
            record = actuate.write_serving(self, t, obs, record, max(obs.current, intent.raise_to))
        yield  # every service's raise is written before anything below, of any service
        if intent.adopted:
            actuate.event(self, policy.name, dep, EVENT_REPLICAS_ADOPTED, intent.adopted)
        if decision.target_lent < decision.lent and self.progress is not None:
            jobs = [advisory.with_progress(self, t, j) for j in jobs]  # advisory: only when a stop is coming
        if not t.reclaim_only and record.releasing:
            record, jobs = advisory.measure_releases(self, t, obs, record, jobs, now)  # advisory, after serving's raise
        # A reclaim pass reads no ends: the ends still to be read stay in the record for the next tick.
        succeeded_runs, pending = ([], unread_ends(obs)) if t.reclaim_only else advisory.ended(self, t, obs, obs.lineages, now)
        done = with_done(record.done, succeeded_runs, now)
        if decision.target_lent > decision.lent:
            # A parked copy's original is read only when something may be admitted (it decides whether the copy may run).
            jobs = advisory.with_originals(self, t, jobs)
        jobs = with_done_runs(jobs, {run for run, _ in done})
        jobs = advisory.with_template_checks(self, t, jobs, policy)
        jobs = with_runs_elsewhere(jobs, t.runs_running, policy.name)
        jobs, unplaced = park_unschedulable(self.cluster, self.config.workflow_namespace, jobs, now)  # hook: placement
        for why in unplaced:  # hook: placement
            actuate.event(self, policy.name, dep, EVENT_LENT_UNSCHEDULABLE, why, warning=True)  # hook: placement
        for tries in range(LOWER_TRIES, -1, -1):
            p = plan(decision, intent.baseline, jobs, now)
            p, ganged = gang_check(self.cluster, dep, p, self.config.workflow_namespace)  # hook: placement
            if ganged:  # hook: placement
                self.log.info(ganged, policy.name)  # hook: placement
            try:
                record = actuate.write_serving(self, t, obs, record, serving_target(decision, p, obs.current))
                break
            except ServingChanged as changed:
                # Another writer changed serving after this tick read it: nothing was written. Read again (the
                # answer is the value found) and decide again on it, its change adopted as the owner's; after
                # LOWER_TRIES, a lend holds (no lower this tick): the next tick decides again.
                intent = readopt(self.config, intent, obs, changed.record, str(changed), now, last_try=not tries)
                record, decision = intent.record, intent.decision
                outcome.baseline, outcome.adopted, outcome.decision = intent.baseline, intent.adopted, decision
                if not tries:
                    # The plan is the final decision's, never the unwritten lend's: nothing is admitted on GPUs
                    # serving still holds. A hold or a reclaim never lowers, so its write (a raise) cannot conflict.
                    p = plan(decision, intent.baseline, jobs, now)
                    record = actuate.write_serving(self, t, obs, record, max(p.scale_to, obs.current))
        # The budgeted stops (of workflows the gate did not admit) start elsewhere each tick: none is left for ever.
        p = replace(p, stop=rotate_stops(p.stop, t.turn, self.research_writes_per_tick))
        for job in (*p.admit, *p.adopt):
            if job.run_id:
                t.runs_running.setdefault(job.run_id, set()).add(policy.name)
        outcome.plan = p
        outcome.applied = obs.current
        # What the gate admits is recorded before it is admitted: only these count as lent on the next tick.
        # A reclaim check's pass admits and adopts nothing (its research side drops them), so records none.
        record = tick_record(intent, obs, record, decision, p, jobs, reading, now,
                             granted=() if t.reclaim_only else (*p.admit, *p.adopt), pending=pending, done=done,
                             lineages=t.view.lineages, token=self.token, lease_duration=self.lease_duration)
        actuate.fence(self, t)
        self.cluster.write_state(self.config.namespace, policy.name, record.to_json())
        t.written[policy.name] = record
        actuate.recorded(self, t, policy.name)
        outcome.basis = Basis(policy, intent.baseline, p.lent_after, obs.pods, record)
        yield  # every service's serving writes and record are written before any research-side write
        actuate.research_side(self, t, obs, decision, p, outcome, record)
        for job in (j for j in intent.over_cap if f"stop {j.name}: " not in (outcome.error or "")):  # said once done
            actuate.event(self, policy.name, dep, EVENT_GRACE_ABOVE_CAP,
                        f"workflow {self.config.workflow_namespace}/{job.name} was admitted but {job.problem}: "
                        "stopped and parked again (its copy's grace is capped when it is admitted)", warning=True)

    # -- faults -----------------------------------------------------------------------------

    # -- events -----------------------------------------------------------------------------




def store_progress(job: Job) -> float | None:
    """Read a job's last checkpoint time from its checkpoint store (`progress.json`, see offhours.scripts.runtime.checkpoint)."""
    from offhours.scripts.runtime.checkpoint import latest_progress_time

    if not job.checkpoint_prefix or not job.checkpoint_prefix.startswith(("file://", "s3://")):
        return None
    return latest_progress_time(job.checkpoint_prefix, os.environ.get("OFFHOURS_S3_ENDPOINT_URL"))
