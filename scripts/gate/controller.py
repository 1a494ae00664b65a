"""The gate: observe each service's load, decide what may be lent, act through the cluster.

It is written the way Kubernetes controllers are:
- Level-triggered and stateless between ticks: everything it needs is read from Kubernetes
  objects (its memory of each service in a ConfigMap, admission on the workflows), so a tick
  killed between two writes converges on the next one.
- It owns only its own delta: it remembers the replicas (or autoscaler maxReplicas) it applied
  and adopts any other value someone else set (`policy.record.own_baseline`). With an HPA or a
  KEDA ScaledObject it lends by lowering maxReplicas, never by writing the Deployment's replicas.
- A fault stays with its object: any exception while observing, deciding or acting for one
  service is that service's failed tick (counted toward the fail-safe, reported in an Event);
  the other services tick normally.
- Serving first: in a reclaim the first write gives serving its replicas back; research-side
  writes and advisory reads (checkpoint progress, time-boxed) come after and may fail alone.
- A `coordination.k8s.io` Lease serialises writers; it is renewed during a long tick and a gate
  that lost it stops writing.
"""

import os
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, TextIO

from offhours.scripts.cluster.arguments import declared_arguments, undeclared_problem
from offhours.scripts.cluster.base import Autoscaler, Cluster, Deployment, ParkedCopy, Pod
from offhours.scripts.cluster.template_grace import CLUSTER_SCOPED, template_grace_problem
from offhours.scripts.cluster.workflow import (
    CancelledWorkflow,
    before_its_night,
    cancelled,
    measured_exit_seconds,
    night_of,
    succeeded,
)
from offhours.scripts.gate.log import ERROR, INFO, WARNING, Logger
from offhours.scripts.gate.pool import counting_pool, read_pool, stop_squatters
from offhours.scripts.gate.quota import keep_gpu_quota
from offhours.scripts.metrics.sources import LoadSource, Reading, ServiceTarget
from offhours.scripts.names import (
    AGGREGATED_EVENT_REASONS,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_WAITING_REASON,
    EVENT_GATE_HOLD,
    EVENT_GATE_TICK_FAILED,
    EVENT_GPUS_LENT,
    EVENT_GPUS_RECLAIMED,
    EVENT_GRACE_ABOVE_CAP,
    EVENT_REPLICAS_ADOPTED,
    EVENT_RUN_ID_MISMATCH,
    EVENT_SERVICE_RELEASED,
    FINISHED_PHASES,
    state_configmap_name,
)
from offhours.scripts.policy import forecast
from offhours.scripts.policy.capacity import replicas_for_rates
from offhours.scripts.policy.config import Capacity, GateConfig, ServicePolicy
from offhours.scripts.policy.decide import Decision, ServiceState, decide
from offhours.scripts.policy.grace import with_grace_checks
from offhours.scripts.policy.lease import lease_seconds, renewed
from offhours.scripts.policy.plan import ADMITTED, PARKED, UNMANAGED, Job, Plan, plan
from offhours.scripts.policy.record import (
    MAX_COPIES,
    MAX_LINEAGE_MEMBERS,
    MAX_RETURNED,
    Copy,
    ServiceRecord,
    UnrecordedWrite,
    fingerprint,
    need_storage,
    own_baseline,
    with_copies,
    with_done,
    with_lineages,
    with_need,
)
from offhours.scripts.policy.release import measured, with_release_estimates, with_stops
from offhours.scripts.policy.window import lending_allowed

REPLICAS = "replicas"
MAX_PENDING_ENDS = 64  # admitted workflows still ending (or unreadable) whose end is read again next tick
# A reason kept in the record: a load error can carry a whole answer body, and the record must stay far under 1 MiB.
REASON_CHARS = 300
# How far the API server's clock (a workflow's creationTimestamp, whole seconds) may trail the gate's.
CLOCK_SKEW_SECONDS = 2.0
LOWER_TRIES = 2  # re-decisions of one tick after a lower found serving changed; then it holds until the next tick


def unique_holder() -> str:
    """Return a Lease holder identity unique to this process (two gates on one host are two holders)."""
    return f"gate/{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


class ServingChanged(RuntimeError):
    """A lower found serving changed by another writer since the tick read it: nothing was written."""


class LeaseLost(RuntimeError):
    """Another actor holds the Lease now: this gate must not write anything more this tick."""


@dataclass(frozen=True)
class Basis:
    """What a reclaim check between ticks starts from: the service as the last tick left it."""

    policy: ServicePolicy
    baseline: int
    lent: int
    pods: list[Pod]
    record: ServiceRecord


@dataclass
class ServiceOutcome:
    """What one tick decided and did for one service."""

    service: str
    baseline: int | None = None
    decision: Decision | None = None
    plan: Plan | None = None
    parked: list[str] = field(default_factory=list)
    error: str | None = None
    adopted: str | None = None
    applied: int | None = None  # the replicas (or maxReplicas) the service was left at
    basis: Basis | None = None  # for the reclaim checks until the next tick

    @property
    def failed(self) -> bool:
        """Whether the service's tick failed before it was decided and planned."""
        return self.decision is None or self.plan is None

    def detail(self) -> str:
        """Return what was decided and done, without the service's name (the log line names it in its own field)."""
        if self.decision is None or self.plan is None:  # `failed`, spelled out for the type checker
            return f"failed tick: {self.error}"
        d, p = self.decision, self.plan
        parts = [f"{d.action} lent {d.lent} -> {p.lent_after} of baseline {self.baseline}",
                 f"({d.reason})", f"at {self.applied if self.applied is not None else p.scale_to}"]
        if self.adopted:
            parts.append(self.adopted)
        if p.admit:
            parts.append("admit " + ",".join(j.name for j in p.admit))
        if p.adopt:
            parts.append("adopt " + ",".join(j.name for j in p.adopt))
        if p.stop:
            parts.append("stop " + ",".join(j.name for j in p.stop))
        if self.parked:
            parts.append("park " + ",".join(self.parked))
        if self.error:
            parts.append(f"error: {self.error}")
        return "; ".join(parts)


@dataclass
class Observed:
    """One service as observed at the start of a tick."""

    policy: ServicePolicy
    dep: Deployment
    scaler: Autoscaler | None
    record: ServiceRecord
    jobs: list[Job]
    pods: list[Pod]
    stored_text: str | None = None  # the record as read, before any unrecorded write of the gate is applied to it
    lineages: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the record's, as `lineages_of` reads them
    returned: tuple[str, ...] = ()  # UIDs of the listed workflows returned by the record (`returned_by_record`)

    @property
    def writes_to(self) -> str:
        """What the gate writes for this service: the replicas, or the autoscaler's maxReplicas."""
        return f"{self.scaler.kind}/{self.scaler.name}" if self.scaler else REPLICAS

    @property
    def current(self) -> int:
        """The value the gate would write now (replicas, or maxReplicas)."""
        return self.scaler.max_replicas if self.scaler else self.dep.replicas


@dataclass
class _Tick:
    """What one tick knows of itself: made new by each `Gate.tick`, so nothing of one tick leaks into the next."""

    dry_run: bool = False
    renewed: float = 0.0  # when the Lease was last taken or renewed (Gate.monotonic)
    advisory_spent: float = 0.0  # seconds of advisory reads so far, against Gate.advisory_budget
    advisory_writes: int = 0  # waiting-reason writes so far, against Gate.advisory_writes_per_tick
    lease_notes: dict[str, str] | None = None  # the Lease's notes, read once, when first needed
    # A reclaim between ticks (scripts/gate/reclaim.py): it gives back and stops victims, never lends,
    # admits or counts a failed tick; for a service that turns out not to need a reclaim it writes nothing.
    reclaim_only: bool = False
    only: frozenset[str] | None = None  # the services of this pass; None: every service
    readings: Mapping[str, Reading] | None = None  # the load the reclaim check read; None: read it now
    # Record and advisory writes of failed services, held while serving writes of the tick are still to come
    # (observing and the serving phase); None once they are all written: then at once.
    deferred: list[Callable[[], None]] | None = None
    # The research namespace's WorkflowTemplates by name: read once, when a job that may be admitted refers to
    # one; None: not read (yet), or unreadable (then a job that refers to one is not admitted this tick).
    templates: dict[str, dict[str, Any]] | None = None
    templates_read: bool = False
    template_too_large: dict[str, bool] = field(default_factory=dict)  # of `templates`, each measured once a tick
    # Run id -> the services a workflow of it runs for (listed, or admitted this tick): services may share one
    # research namespace, and one run never runs twice at once (its checkpoints are one), whichever service lends.
    runs_running: dict[str, set[str]] = field(default_factory=dict)
    pool: Any = None  # hook: pool holding (gate/pool.py: the pods on serving's nodes, read once a tick)
    # Run id -> the UIDs of its lineage in any service's record (`lineages_of`): only those run it, whichever service.
    lineages: dict[str, set[str]] = field(default_factory=dict)
    carriers: dict[str, str] = field(default_factory=dict)  # run id -> a listed workflow of its lineage (any service)
    # Scheduled run id without a lineage -> the first workflow created of it, of any service (`first_scheduled_claims`).
    first_claims: dict[str, str] = field(default_factory=dict)


@dataclass
class Gate:
    """The gate over a cluster, a load source and a configuration.

    Its fields are configuration and collaborators; what a tick learns lives in that tick's `_Tick`.
    The one memory kept across ticks is `_unrecorded` (see there).
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
    monotonic: Callable[[], float] = time.monotonic
    # The lease on lending also covers the pause between two runs of the gate's CronWorkflow (a 5-minute
    # schedule of 4-minute runs, and a pod start): a healthy gate must never look gone between runs.
    lease_slack_seconds: float = 120.0
    # The token a stop's parked copy carries (`policy.record.Copy`): unguessable, so no workflow made before the copy
    # can carry it.
    token: Callable[[], str] = field(default=lambda: secrets.token_hex(12))
    # Raises written while the record could not be: remembered in this process and noted on the Lease,
    # so the next tick (of this process or another) does not take the gate's own raise for someone else's.
    _unrecorded: dict[str, UnrecordedWrite] = field(default_factory=dict)
    _unlisted: bool = False  # listing the gate's records failed once (said once per process)

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
        """Run one observe -> decide -> act pass over every service (or those named in `only`).

        `reclaim_only`: the pass a reclaim check starts between ticks: it acts only on a reclaim,
        deciding on `readings` (the load the check read a moment before) where given.
        """
        ns = self.config.namespace
        t = _Tick(dry_run=dry_run, reclaim_only=reclaim_only, only=None if only is None else frozenset(only),
                  readings=readings)
        if not dry_run:
            try:
                held = self.cluster.acquire_lease(ns, self.holder, self.lease_seconds)
            except Exception as err:  # noqa: BLE001 - without the Lease nothing may be written: skip, never crash
                self.log.error(f"could not take the offhours lease: {_describe(err)}: skipping this tick")
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
    def _tick(self, t: _Tick) -> list[ServiceOutcome]:
        services = [p for p in self.config.services if t.only is None or p.name in t.only]
        outcomes = {p.name: ServiceOutcome(p.name) for p in services}
        try:
            now = self.now()
        except Exception as err:  # noqa: BLE001 - no clock is every service's failed tick: the fail-safe still counts
            return self._without_clock(t, services, outcomes, f"no server time to date this tick by: {_describe(err)}")
        t.deferred = []
        observed: list[Observed] = []
        for policy in services:
            try:
                observed.append(self._observe(t, policy))
            except Exception as err:  # noqa: BLE001 - any fault of one service is that service's failed tick
                self._fail(t, policy, outcomes[policy.name], f"observe: {_describe(err)}", now)
        observed = self._refuse_shared_deployments(t, observed, outcomes, now)
        for obs in observed:
            obs.lineages = lineages_of(obs.record, obs.jobs)
            for run, uids in obs.lineages.items():
                t.lineages.setdefault(run, set()).update(uids)
        for obs in observed:
            for run, name in lineage_carriers(obs.jobs, obs.lineages).items():
                t.carriers.setdefault(run, name)
            for job in obs.jobs:
                if job.run_id and job.state != PARKED:
                    t.runs_running.setdefault(job.run_id, set()).add(obs.policy.name)
        t.first_claims = first_scheduled_claims([j for obs in observed for j in obs.jobs], t.lineages)
        t.pool = read_pool(self, t, observed, counted_jobs)  # hook: pool holding
        readings = self._read(observed, now) if t.readings is None else t.readings
        # Serving first across services, whatever their number: every service's serving write (a reclaim's
        # raise) comes before any advisory read, the lends' scale-downs and records next, and only then any
        # research-side or advisory write (stops, admissions, waiting reasons) of any service.
        before = {obs.policy.name: obs.current for obs in observed}  # for the GPU quota (gate/quota.py)
        acting = {obs.policy.name: (obs, self._service(t, obs, readings.get(obs.policy.name, Reading(None, "no reading")),
                                                       now, outcomes[obs.policy.name])) for obs in observed}
        for phase in ("serving", "record", "research"):
            order = list(acting.items())
            if phase == "research" and order:
                # The advisory-write budget is spent in this order: start elsewhere each tick, so that no
                # service's waiting reasons wait behind another's for ever.
                turn = int(now // max(1, self.config.tick_seconds)) % len(order)
                order = order[turn:] + order[:turn]
            for name, (obs, steps) in order:
                try:
                    next(steps)
                except StopIteration:
                    del acting[name]
                except LeaseLost as err:
                    for rest in acting:
                        outcomes[rest].error = f"not acted on: {err}"
                    acting.clear()
                    break
                except Exception as err:  # noqa: BLE001 - any fault of one service is that service's failed tick
                    del acting[name]
                    self._fail(t, obs.policy, outcomes[name], f"{_describe(err)}", now, obs)
            if phase == "serving":  # every raise is written: now the failed services' records and Events
                held, t.deferred = t.deferred or [], None
                for write in held:
                    write()
                keep_gpu_quota(self, t, observed, outcomes, before)  # lowered after serving's raises, before stops
        stop_squatters(self, t, observed)  # hook: pool holding (after every serving write)
        if not t.reclaim_only:
            self._release_removed(t)  # after every configured service's serving writes
        for outcome in outcomes.values():
            level = ERROR if outcome.failed else WARNING if outcome.error else INFO
            self.log.log(level, outcome.detail(), outcome.service)
        return list(outcomes.values())

    def _without_clock(self, t: _Tick, services: list[ServicePolicy], outcomes: dict[str, ServiceOutcome],
                       error: str) -> list[ServiceOutcome]:
        """Count a failed tick for every service (nothing is decided or renewed undated); records after every raise."""
        t.deferred = []
        for policy in services:
            self._fail(t, policy, outcomes[policy.name], error, None)
        held, t.deferred = t.deferred, None
        for write in held:
            write()
        for outcome in outcomes.values():
            self.log.log(ERROR if outcome.failed else WARNING, outcome.detail(), outcome.service)
        return list(outcomes.values())

    def _observe(self, t: _Tick, policy: ServicePolicy) -> Observed:
        ns = self.config.namespace
        dep = self.cluster.deployment(ns, policy.name, policy.deployment)
        scaler = self.cluster.autoscaler(dep)
        text = self.cluster.read_state(ns, policy.name)
        jobs = self.cluster.jobs(self.config.workflow_namespace, policy.name)
        pods = self.cluster.ready_pods(dep)
        obs = Observed(policy, dep, scaler, ServiceRecord.from_json(text), jobs, pods, text)
        note = self._unrecorded.get(policy.name) or self._lease_note(t, policy.name)
        if note is not None:
            obs.record = note.supersede(obs.record, text, dep.uid, obs.writes_to)
        obs.jobs, obs.returned = returned_by_record(jobs, obs.record, dep.uid)
        return obs

    def _lease_note(self, t: _Tick, service: str) -> UnrecordedWrite | None:
        """Return this service's note on the Lease (a raise another gate process wrote without its record), if any."""
        if t.lease_notes is None:
            try:
                t.lease_notes = self.cluster.lease_notes(self.config.namespace)
            except Exception as err:  # noqa: BLE001 - unreadable: the stored record alone (a raise then reads as an owner's: the safe side)
                self.log.warning(f"the lease's notes are unreadable: {_describe(err)}")
                t.lease_notes = {}
        return UnrecordedWrite.from_json(t.lease_notes.get(service))

    def _recorded(self, t: _Tick, name: str) -> None:
        """Remove the note of an unrecorded raise once the record is written (best effort: a stale note is ignored)."""
        if self._unrecorded.pop(name, None) is None and name not in (t.lease_notes or {}):
            return
        (t.lease_notes or {}).pop(name, None)
        try:
            self.cluster.note_on_lease(self.config.namespace, self.holder, name, None)
        except Exception as err:  # noqa: BLE001 - a stale note is ignored anyway (it names the record it superseded)
            self.log.warning(f"could not remove the lease's note for {name}: {_describe(err)}", name)

    def _release_removed(self, t: _Tick) -> None:
        """Give back what the gate lent of services no longer configured, then forget them (one Event each).

        The record is the gate's own memory of what it lent: whatever the configuration says now, a
        service it lent from gets its baseline back. A failure leaves the record for the next tick.
        """
        if t.dry_run:
            return
        ns, configured = self.config.namespace, {p.name for p in self.config.services}
        try:
            removed = [s for s in self.cluster.state_services(ns) if s not in configured]
        except Exception as err:  # noqa: BLE001 - advisory for this tick: the next one lists them again
            if not self._unlisted:  # once per process: a Role without the right would say it every tick
                self.log.warning(f"could not list the gate's records (a service removed from the configuration "
                                 f"gets back what was lent only when it can): {_describe(err)}")
            self._unlisted = True
            return
        for service in removed:
            try:
                self._release(t, service)
            except LeaseLost:
                raise
            except Exception as err:  # noqa: BLE001 - that record's fault: kept for the next tick
                self.log.error(f"could not give back what was lent of {service} (no longer configured): "
                               f"{_describe(err)}", service)

    def _release(self, t: _Tick, service: str) -> None:
        ns, wf_ns = self.config.namespace, self.config.workflow_namespace
        text = self.cluster.read_state(ns, service)
        record = ServiceRecord.from_json(text)
        dep = self.cluster.find_deployment(ns, record.deployment or service)
        listed, _ = returned_by_record(self.cluster.jobs(wf_ns, service), record, dep.uid if dep is not None else "")
        what = "nothing to give back"
        if dep is not None:
            scaler = self.cluster.autoscaler(dep)
            obs = Observed(ServicePolicy(name=service, capacity=Capacity(), deployment=dep.name), dep, scaler, record,
                           [], [], text)
            note = self._unrecorded.get(service) or self._lease_note(t, service)
            if note is not None:
                record = obs.record = note.supersede(record, text, dep.uid, obs.writes_to)
            # What the gate lent of this incarnation (by its record; by the marks if the record is unreadable).
            lent = sum(j.replicas for j in counted_jobs(listed, record, dep.uid) if j.state == ADMITTED)
            owned = own_baseline(record, dep.uid, obs.writes_to, obs.current, lent)
            if obs.current < owned.baseline:
                what = f"{obs.writes_to} restored from {obs.current} to its baseline {owned.baseline}"
                self._apply(t, obs, owned.record, owned.baseline)
            elif lent:
                what = f"{obs.writes_to} already at {obs.current} (baseline {owned.baseline})"
            record = obs.record  # as applied: what a later write of this release builds on
        # Then whatever of it runs gives its GPUs back, as in any reclaim (parked again; stopped without a copy if its
        # status says its work is done): what the gate lent, and what runs without admission, which no tick of this
        # service stops any more. Whatever waits parked waits on. A failure keeps the record for the next tick.
        outcome, stopped = ServiceOutcome(service), []
        running = [j for j in listed if j.state != PARKED]
        lineages = lineages_of(record, listed)
        # The gate's own admissions last: the newest stops, which the record keeps (at most MAX_COPIES).
        if to_park := sorted((j for j in running if not j.finishing), key=lambda j: j.state == ADMITTED):
            # As a tick's stops: the copies are recorded (each with its token) before they are made, so a release
            # tried again after a failure knows the copies an earlier try (or an earlier reclaim) made: none twice.
            # A workflow with no run id (one running without admission need carry none) is recorded under
            # NO_RUN, which no run id is (a run id is a DNS label): unrecorded, it got no token, and each try
            # made it another copy. No lineage is ever NO_RUN's, so its copy joins none.
            linked = linked_uids(listed)
            record = replace(record, lineages=with_lineages(lineages, (), linked), copies=with_copies(
                record.copies, [(j.uid, j.run_id or NO_RUN) for j in to_park], linked, self.now(), (), self.token))
            self._fence(t)
            self.cluster.write_state(ns, service, record.to_json())
        tokens = copy_tokens(record.copies)
        deferred = []
        for job in running:
            if not job.finishing and job.uid and job.uid not in tokens and len(to_park) > MAX_COPIES:
                # Its stop did not fit in the record (a tenant's flood of workflows running without admission):
                # parked without a token, a try after a failure would copy it again. A later try parks it. Any
                # other stop the record could not keep (a run id it does not store) is made at once: stopping
                # what holds serving's GPUs comes before a copy made only once.
                deferred.append(job.name)
                continue
            self._fence(t)
            if job.finishing:
                self.cluster.stop(wf_ns, job)
                stopped.append(job.name)
            else:
                self._park_and_stop(t, wf_ns, job, outcome, lineages.get(job.run_id or "", ()), tokens.get(job.uid, ""))
        if outcome.parked:
            what += f"; stopped and parked again {', '.join(outcome.parked)}"
        if stopped:
            what += f"; stopped {', '.join(stopped)}"
        if deferred:
            raise RuntimeError(f"{what}; {len(deferred)} more workflows than the record keeps the stops of, "
                               f"stopped by a later try ({', '.join(deferred[:5])}...)")
        self._fence(t)
        self.cluster.delete_state(ns, service)
        self._recorded(t, service)
        message = f"service {service} is no longer in the gate configuration: {what}; the gate's record of it removed"
        self.log.warning(message, service)
        kind, name = ("Deployment", dep.name) if dep is not None else ("ConfigMap", state_configmap_name(service))
        try:
            self.cluster.record_event(ns, kind, name, EVENT_SERVICE_RELEASED, message, True)
        except Exception as err:  # noqa: BLE001 - an event is a record, not an action
            self.log.warning(f"could not record event {EVENT_SERVICE_RELEASED}: {_describe(err)}", service)

    def _refuse_shared_deployments(self, t: _Tick, observed: list[Observed], outcomes: dict[str, ServiceOutcome],
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
                self._fail(t, obs.policy, outcomes[obs.policy.name],
                           f"services {names} all resolve to Deployment {obs.dep.name}: fix the gate config", now, obs,
                           restore=obs is restorer)
        return kept

    def _read(self, observed: list[Observed], now: float) -> dict[str, Reading]:
        if not observed:
            return {}
        targets = [ServiceTarget(o.policy.name, o.pods, o.record.samples if o.record.deployment_uid == o.dep.uid else {})
                   for o in observed]
        try:
            return self.source.read(targets, now)
        except Exception as err:  # noqa: BLE001 - a broken source is a failed reading for every service, not a crash
            return {t.service: Reading(None, f"load source failed: {_describe(err)}") for t in targets}

    def _service(self, t: _Tick, obs: Observed, reading: Reading, now: float,
                 outcome: ServiceOutcome) -> Iterator[None]:
        """One service's tick in three steps (`_tick` runs each step for every service before the next step)."""
        policy, dep = obs.policy, obs.dep
        # A job's exit time: what its run's recent stops measured, else its declared grace, within the service's cap.
        jobs = with_lineage(counted_jobs(obs.jobs, obs.record, dep.uid), obs.record, t.lineages, t.carriers,
                            t.first_claims)
        jobs = with_release_estimates(jobs, obs.record.releases, policy.max_grace_seconds)
        # A grace the cap does not bound (the workflow's own, or raised since its admission) is that job's problem,
        # and an admitted one's exit time is read as what it is, not as the cap.
        checked = with_grace_checks(jobs, policy.max_grace_seconds, policy.name)
        over_cap = [j for j, was in zip(checked, jobs) if j.state == ADMITTED and j.problem and not was.problem]
        jobs = checked
        lent = sum(j.replicas for j in jobs if j.state == ADMITTED)
        owned = own_baseline(obs.record, dep.uid, obs.writes_to, obs.current, lent)
        baseline, record = owned.baseline, replace(owned.record, deployment=dep.name)
        outcome.baseline, outcome.adopted = baseline, owned.adopted
        if obs.scaler is not None and obs.scaler.min_replicas > policy.min_replicas:
            policy = replace(policy, min_replicas=obs.scaler.min_replicas)  # never cap below the autoscaler's floor
        policy = with_measured_cold_start(policy, obs.pods)
        record, floor = self._look_ahead(policy, record, reading, now)
        decide_on = partial(
            decide,
            now=now,
            policy=policy,
            lent=lent,
            load=reading.load,
            load_error=reading.error,
            lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, timezone.utc)),
            max_age_seconds=self.config.metrics.max_age_seconds,
            failed_ticks_before_reclaim=self.config.failed_ticks_before_reclaim,
            state=record.decision,
            forecast_required=floor,
            tick_seconds=self.config.tick_seconds,
        )
        decide_on = counting_pool(decide_on, lent, self, t, obs)  # hook: pool holding
        decision = decide_on(baseline=baseline)
        outcome.decision = decision
        if t.dry_run or (t.reclaim_only and decision.target_lent >= decision.lent):
            jobs = self._with_template_checks(t, jobs, policy) if t.dry_run else jobs  # a dry run writes nothing
            outcome.plan = plan(decision, baseline, jobs, now, explain=not t.reclaim_only)
            outcome.basis = Basis(policy, baseline, decision.lent, obs.pods, obs.record)
            return
        # Serving first: a reclaim raises serving to what the decision needs before anything else.
        if decision.target_lent < decision.lent:
            record = self._apply(t, obs, record, max(obs.current, baseline - decision.target_lent))
        yield  # every service's raise is written before anything below, of any service
        if owned.adopted:
            self._event(policy.name, dep, EVENT_REPLICAS_ADOPTED, owned.adopted)
        if decision.target_lent < decision.lent and self.progress is not None:
            jobs = [self._with_progress(t, j) for j in jobs]  # advisory: only when a stop is coming
        if not t.reclaim_only and record.releasing:
            record, jobs = self._measure_releases(t, obs, record, jobs, now)  # advisory, after serving's raise
        # A reclaim pass reads no ends: the ends still to be read stay in the record for the next tick.
        succeeded_runs, pending = ([], _unread_ends(obs)) if t.reclaim_only else self._ended(t, obs, obs.lineages, now)
        done = with_done(record.done, succeeded_runs, now)
        if decision.target_lent > decision.lent:
            # A parked copy's original is read only when something may be admitted (it decides whether the copy may run).
            jobs = self._with_originals(t, jobs)
        jobs = _with_done_runs(jobs, {run for run, _ in done})
        jobs = self._with_template_checks(t, jobs, policy)
        jobs = _with_runs_elsewhere(jobs, t.runs_running, policy.name)
        for tries in range(LOWER_TRIES, -1, -1):
            p = plan(decision, baseline, jobs, now)
            scale_to = p.scale_to if decision.action == "lend" else max(p.scale_to, obs.current)  # only a lend lowers
            try:
                record = self._apply(t, obs, record, scale_to)
                break
            except ServingChanged as changed:
                # Another writer changed serving after this tick read it: nothing was written. Read again (the
                # answer is the value found) and decide again on it, its change adopted as the owner's; after
                # LOWER_TRIES, a lend holds (no lower this tick): the next tick decides again.
                owned = own_baseline(obs.record, dep.uid, obs.writes_to, obs.current, lent)
                baseline, record = owned.baseline, replace(owned.record, deployment=dep.name)
                outcome.baseline, outcome.adopted = baseline, f"{changed}; {owned.adopted or 'kept'}"
                decision = decide_on(baseline=baseline)
                if not tries and decision.target_lent > decision.lent:
                    decision = replace(decision, action="hold", target_lent=decision.lent,
                                       reason=f"{decision.reason}; serving changed by another writer at each try: "
                                              "nothing lowered this tick")
                outcome.decision = decision
                if not tries:
                    # The plan is the final decision's, never the unwritten lend's: nothing is admitted on GPUs
                    # serving still holds. A hold or a reclaim never lowers, so its write (a raise) cannot conflict.
                    p = plan(decision, baseline, jobs, now)
                    record = self._apply(t, obs, record, max(p.scale_to, obs.current))
        for job in (*p.admit, *p.adopt):
            if job.run_id:
                t.runs_running.setdefault(job.run_id, set()).add(policy.name)
        outcome.plan = p
        outcome.applied = obs.current
        # What the gate admits is recorded before it is admitted: only these count as lent on the next tick.
        # A reclaim check's pass admits and adopts nothing (its research side drops them), so records none.
        granted = () if t.reclaim_only else (*p.admit, *p.adopt)
        record = replace(record, decision=decision.state, samples=reading.samples or record.samples,
                         last_decision=_last_decision(decision, p, now), deployment=dep.name,
                         admitted={**{j.uid: j.replicas for j in jobs if j.state == ADMITTED and j.uid},
                                   **{j.uid: j.replicas for j in granted if j.uid}},
                         runs={**pending, **{j.uid: (j.run_id, j.name) for j in (*jobs, *granted)
                                             if j.uid and j.run_id and (j.state == ADMITTED or j in granted)}},
                         done=done,
                         # A run the gate admits joins its lineage (the first admitted begins it); a copy once it is
                         # listed (`lineages_of`). Kept while a workflow of it is listed or still ending.
                         lineages=with_lineages(obs.lineages, [(j.run_id, j.uid) for j in granted
                                                               if j.uid in t.lineages.get(j.run_id or "", {j.uid})],
                                                [*(j.uid for j in obs.jobs), *pending, *(j.uid for j in granted)]),
                         returned=obs.returned[-MAX_RETURNED:],
                         # The copies this tick's stops park are recorded before they are made, as admissions are.
                         copies=with_copies(record.copies, [(j.uid, j.run_id) for j in p.stop],
                                            linked_uids(jobs), now,
                                            [j.uid for j in jobs if j.state == ADMITTED and j.uid], self.token),
                         # Only the gate's own admissions are measured: a workflow running without one may carry
                         # any run id (a tenant-written label), and its stop would be measured under that run.
                         # Nor one whose pod GC deletes pods as they end: the slowest may be gone unread.
                         releasing=with_stops(record.releasing,
                                              [j for j in p.stop if j.state == ADMITTED and j.pods_kept], now))
        record = renewed(record, now, self.lease_duration)  # lending is a lease: this tick renews it
        self._fence(t)
        self.cluster.write_state(self.config.namespace, policy.name, record.to_json())
        self._recorded(t, policy.name)
        outcome.basis = Basis(policy, baseline, p.lent_after, obs.pods, record)
        yield  # every service's serving writes and record are written before any research-side write
        self._research_side(t, obs, decision, p, outcome, record)
        for job in (j for j in over_cap if f"stop {j.name}: " not in (outcome.error or "")):  # said once it is done
            self._event(policy.name, dep, EVENT_GRACE_ABOVE_CAP,
                        f"workflow {self.config.workflow_namespace}/{job.name} was admitted but {job.problem}: "
                        "stopped and parked again (its copy's grace is capped when it is admitted)", warning=True)

    def _look_ahead(self, policy: ServicePolicy, record: ServiceRecord, reading: Reading,
                    now: float) -> tuple[ServiceRecord, int | None]:
        return look_ahead(self.config, policy, record, reading, now)

    def _apply(self, t: _Tick, obs: Observed, record: ServiceRecord, value: int) -> ServiceRecord:
        """Write replicas (or the autoscaler's maxReplicas) if they differ; record the intent first.

        Conditional on what this tick read (`obs.current`): a lower writes only if serving still holds it, else
        raises `ServingChanged` with nothing written; a raise makes serving max(what it holds, value) at once.
        """
        if value == obs.current:
            return record
        read = obs.current
        intent = replace(record, applied=value, applying_from=read)
        self._fence(t)
        try:
            self.cluster.write_state(self.config.namespace, obs.policy.name, intent.to_json())
        except Exception:
            if value < obs.current:
                raise  # no lending without the record of it
            self._note_unrecorded(obs, intent)  # a raise for serving goes ahead anyway, noted as the gate's own
        obs.record = intent  # what a failure later in this tick records (not the record as it was read)
        self._fence(t)
        target = obs.scaler if obs.scaler is not None else obs.dep
        if value < read:
            answer = self.cluster.lower_serving(target, read, value)  # leaves `target` (obs.current) at the answer
            if answer.conflict:
                obs.record = replace(intent, applied=read, applying_from=None)  # unwritten: measured from the read
                raise ServingChanged(f"{obs.writes_to} set to {answer.value} by another writer after the gate read "
                                     f"{read} (its lower to {value} not written)")
        elif self.cluster.raise_serving(target, read, value).value != value:
            # Another writer raised it past `value` meanwhile: the gate wrote nothing, and adopts that value as
            # theirs (measured from what it read) at its next read.
            obs.record = replace(intent, applied=read, applying_from=None)
            return obs.record
        obs.record = replace(intent, applying_from=None)
        return obs.record

    def _note_unrecorded(self, obs: Observed, intent: ServiceRecord) -> None:
        assert intent.baseline is not None and intent.applied is not None and intent.applying_from is not None
        note = UnrecordedWrite(obs.dep.uid, obs.writes_to, intent.baseline, intent.applied, intent.applying_from,
                               fingerprint(obs.stored_text))
        self._unrecorded[obs.policy.name] = note
        try:
            self.cluster.note_on_lease(self.config.namespace, self.holder, obs.policy.name, note.to_json())
        except Exception as err:  # noqa: BLE001 - this process still knows; the next one reads the raise as an owner's (the safe side)
            self.log.warning(f"could not note the unrecorded raise of {obs.policy.name} on the lease: {_describe(err)}",
                             obs.policy.name)

    def _research_side(self, t: _Tick, obs: Observed, decision: Decision, p: Plan, outcome: ServiceOutcome,
                       record: ServiceRecord | None = None) -> None:
        """Park, stop, admit, delete, annotate: each job on its own; one failure never undoes serving's writes.

        `record` is the one this tick wrote: a stop's copy carries the token recorded for it there, and a copy
        found already made is the gate's only if its UID is in the stopped run's lineage.
        """
        wf_ns, uid, errors = self.config.workflow_namespace, obs.dep.uid, []
        lineages = dict(record.lineages or ()) if record is not None else {}
        tokens = copy_tokens(record.copies if record is not None else ())
        made: dict[str, ParkedCopy] = {}  # stopped job's name -> its copy
        steps: list[tuple[str, Callable[[], Any], Job | None]] = []
        steps += [(f"stop {j.name}", partial(self._park_and_stop, t, wf_ns, j, outcome,
                                             lineages.get(j.run_id or "", ()), tokens.get(j.uid, ""), made), j)
                  for j in p.stop]
        steps += [(f"stop {j.name}", partial(self.cluster.stop, wf_ns, j), j) for j in p.cancel]
        if t.reclaim_only:
            p = replace(p, admit=(), adopt=(), delete=(), waiting=())  # only what frees GPUs: the rest waits for a tick
        # The grace cap goes into the admission itself: it bounds the pods, not only the plan.
        grace = obs.policy.max_grace_seconds
        steps += [(f"admit {j.name}", partial(self.cluster.admit, wf_ns, j, uid, grace), None) for j in p.admit]
        steps += [(f"adopt {j.name}", partial(self.cluster.adopt, wf_ns, j, uid, grace), None) for j in p.adopt]
        steps += [(f"delete {j.name}", partial(self.cluster.delete_workflow, wf_ns, j.name), None) for j in p.delete]
        # The reason a job waits, on the job itself, written only when it changes and within the tick's budget
        # of advisory writes (what is left over is written by a later tick: it still differs then).
        changed = [(j, position, reason) for j, position, reason in p.waiting
                   if (j.waiting_reason, j.queue_position) != (reason, position)]
        budget = max(0, self.advisory_writes_per_tick - t.advisory_writes)
        if len(changed) > budget:
            self.log.info(f"{len(changed) - budget} waiting reason(s) left for a later tick (advisory writes: "
                          f"{self.advisory_writes_per_tick} a tick)", obs.policy.name)
        t.advisory_writes += min(len(changed), budget)
        steps += [(f"annotate {j.name}", partial(self.cluster.annotate_workflow, wf_ns, j.name,
                                                 _waiting_annotations(reason, position), {}), j)
                  for j, position, reason in changed[:budget]]
        untrusted: list[tuple[str, Job]] = []  # (what was done, job) for each workflow whose run id is untrusted
        for what, step, about in steps:
            try:
                self._fence(t)
                step()
            except LeaseLost:
                raise
            except Exception as err:  # noqa: BLE001 - one job's fault is that job's
                errors.append(f"{what}: {_describe(err)}")
                continue
            if about is not None and about.run_problem:
                untrusted.append(("stopped" if what.startswith("stop ") else "not admitted while it is so", about))
        if record is not None and made:
            try:
                self._record_copies(t, obs, record, [j for j in p.stop if j.name in made], made)
            except LeaseLost:
                raise
            except Exception as err:  # noqa: BLE001 - the next tick knows the copy by its token instead
                errors.append(f"record the parked copies: {_describe(err)}")
        if errors:
            outcome.error = "; ".join(errors)
        self._record_tick_event(obs, decision, p, outcome)
        for done, job in untrusted:  # once each: as its waiting reason is first written, or as it is stopped
            self._event(obs.policy.name, obs.dep, EVENT_RUN_ID_MISMATCH,
                        f"workflow {wf_ns}/{job.name}: {job.run_problem}: {done}", warning=True)

    def _park_and_stop(self, t: _Tick, namespace: str, job: Job, outcome: ServiceOutcome, lineage: Collection[str] = (),
                       token: str = "", made: dict[str, ParkedCopy] | None = None) -> None:
        # Park a copy first (idempotent: a copy the gate made before is known by its UID, in the run's `lineage`),
        # then stop: a stopped job always has its copy, unless its run was cancelled since the tick listed it.
        try:
            parked: ParkedCopy | None = self.cluster.park_copy(namespace, job, lineage, token)
        except CancelledWorkflow as err:
            parked = None
            self.log.info(str(err), job.service)
        if parked is not None:
            outcome.parked.append(parked.name)
        if made is not None and parked is not None:
            made[job.name] = parked
        self._fence(t)
        self.cluster.stop(namespace, job)

    def _record_copies(self, t: _Tick, obs: Observed, record: ServiceRecord, stopped: list[Job],
                       made: Mapping[str, ParkedCopy]) -> None:
        """Write the copies just made into their runs' lineages: a stopped workflow of a lineage goes on in its copy."""
        lineages = dict(record.lineages or ())
        joined = [(j.run_id, made[j.name].uid) for j in stopped
                  if j.run_id and made[j.name].uid and j.uid in lineages.get(j.run_id, ())
                  and made[j.name].uid not in lineages[j.run_id]]
        if not joined:
            return
        kept = with_lineages(lineages, joined, [u for uids in lineages.values() for u in uids])
        self._fence(t)
        self.cluster.write_state(self.config.namespace, obs.policy.name, replace(record, lineages=kept).to_json())

    def _ended(self, t: _Tick, obs: Observed, lineages: Mapping[str, Collection[str]],
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
        ns = self.config.workflow_namespace
        for uid, run, name in ended:
            probe = Job(name=name, service=obs.policy.name, replicas=0, state=UNMANAGED)
            read = self._advisory(t, f"how {name} ended", partial(lambda n: (self.cluster.workflow(ns, n),), name), probe)
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

    def _with_originals(self, t: _Tick, jobs: list[Job]) -> list[Job]:
        """Read the original of each parked copy (`_with_original`) as advisory reads, within the tick's budget.

        The `parked-from` annotation is anyone's to write: one read per workflow that carries it, unbounded, made a
        tenant's thousands of such workflows a tick as long as they liked, and the next tick (the next reclaim) that
        much later. The gate's own copies are read first, then the rest in queue order; one left unread waits.
        """
        wanted = sorted((j for j in jobs if j.state in (PARKED, UNMANAGED) and j.parked_from),
                        key=lambda j: (not j.gate_copy, j.problem is not None, j.state == PARKED, -j.priority,
                                       j.created, j.name))
        read: dict[str, Job] = {}
        ns = self.config.workflow_namespace
        for job in wanted:
            name = job.parked_from or ""
            answer = self._advisory(t, f"original {name} of {job.name}",
                                    partial(lambda n: (self.cluster.workflow(ns, n),), name), job)
            read[job.name] = self._with_original(job, answer[0]) if isinstance(answer, tuple) else \
                replace(job, original_done=False)  # unknown: the copy waits
        return [read.get(j.name, j) for j in jobs]

    def _with_original(self, job: Job, original: dict[str, Any] | None) -> Job:
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

    def _with_template_checks(self, t: _Tick, jobs: list[Job], policy: ServicePolicy) -> list[Job]:
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
            ns = self.config.workflow_namespace
            # Once a tick, time-boxed on its own: a tenant's many parked copies spending the budget on their
            # originals must not leave every job that runs a template unknown, nor this read their originals unread.
            read = self._advisory(t, f"WorkflowTemplates of {ns}", lambda: self.cluster.workflow_templates(ns),
                                  candidates[0], budgeted=False)
            t.templates = read if isinstance(read, dict) else None
        templates = t.templates
        out = []
        for job in jobs:
            problem = None
            if job.state != ADMITTED and job.problem is None and job.template_refs:
                try:
                    problem = self._template_problem(t, job, templates, policy)
                except Exception as err:  # noqa: BLE001 - a tenant's template that breaks the check is that job's
                    problem = f"its templates could not be checked: {_describe(err)}"
            out.append(job if problem is None else replace(job, problem=problem))
        return out

    @staticmethod
    def _template_problem(t: _Tick, job: Job, templates: dict[str, dict[str, Any]] | None,
                          policy: ServicePolicy) -> str | None:
        declared = templates.get(job.template or "") if templates is not None and job.template else None
        problem = None if declared is None else \
            undeclared_problem(job.template or "", job.arguments, declared_arguments(declared))
        return problem or template_grace_problem(job.template_spec, templates, policy.max_grace_seconds, policy.name,
                                                 t.template_too_large)

    def _measure_releases(self, t: _Tick, obs: Observed, record: ServiceRecord, jobs: list[Job],
                          now: float) -> tuple[ServiceRecord, list[Job]]:
        """Read the pods of the jobs stopped earlier, record the releases that ended, plan with them (advisory)."""
        names = {name: uid for name, _, _, uid in record.releasing}
        probe = Job(name=next(iter(names)), service=obs.policy.name, replicas=0, state=UNMANAGED)  # what the log names
        pods = self._advisory(t, f"pods of {len(names)} stopped job(s)",
                              partial(self.cluster.workflow_pods, self.config.workflow_namespace, names), probe)
        releasing, releases = measured(record.releasing, record.releases, pods if isinstance(pods, dict) else {}, now,
                                       obs.policy.max_grace_seconds)
        record = replace(record, releasing=releasing, releases=releases)
        return record, with_release_estimates(jobs, releases, obs.policy.max_grace_seconds)

    def _with_progress(self, t: _Tick, job: Job) -> Job:
        if job.state != ADMITTED or self.progress is None:
            return job
        progress = self.progress
        at = self._advisory(t, f"progress of {job.name}", lambda: progress(job), job)
        if not isinstance(at, (int, float)) or (job.progress_at is not None and job.progress_at >= at):
            return job
        return replace(job, progress_at=float(at))

    def _advisory(self, t: _Tick, what: str, read: Callable[[], Any], job: Job, budgeted: bool = True) -> Any:
        """Run an advisory read about `job` with a per-call timeout inside the tick's budget; None when over either.

        Not `budgeted`: the per-call timeout alone bounds it, and it takes nothing from the budget (a read made
        once a tick, that the reads charged to the budget must neither crowd out nor be crowded out by).
        """
        left = self.advisory_budget - t.advisory_spent if budgeted else self.advisory_timeout
        if left <= 0:
            self.log.warning(f"{what}: skipped, the tick's advisory budget ({self.advisory_budget:.0f} s) is spent",
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
        worker.join(min(self.advisory_timeout, left))
        if budgeted:
            t.advisory_spent += time.monotonic() - started
        if worker.is_alive():
            self.log.warning(f"{what}: no answer within {min(self.advisory_timeout, left):.1f} s: skipped", job.service,
                             job=job.name)
            return None
        if failure:
            self.log.warning(f"{what} unreadable: {_describe(failure[0])}", job.service, job=job.name)
            return None
        return result[0] if result else None

    # -- faults -----------------------------------------------------------------------------
    def _fail(self, t: _Tick, policy: ServicePolicy, outcome: ServiceOutcome, error: str, now: float | None,
              obs: Observed | None = None, restore: bool = True) -> None:
        """Count a failed tick for one service; after enough in a row, restore its whole baseline (unless not `restore`).

        `now` None: no server time; the last decision keeps the time it was dated by.
        """
        outcome.error = error
        if t.dry_run or t.reclaim_only:  # a check is not a tick: the fail-safe counts the ticks' failures only
            return
        ns, name = self.config.namespace, policy.deployment or policy.name
        record: ServiceRecord | None = None
        try:
            self._fence(t)
            text = obs.stored_text if obs is not None else self.cluster.read_state(ns, policy.name)
            record = obs.record if obs is not None else ServiceRecord.from_json(text)
            failed = record.decision.failed_ticks + 1
            record = replace(record, decision=ServiceState((), failed),
                             last_decision={"at": now if now is not None else record.last_decision.get("at"),
                                            "action": "failed", "reason": error[:REASON_CHARS]})
            if failed >= self.config.failed_ticks_before_reclaim and record.baseline is not None and restore:
                # The fail-safe's raise is a serving write: now. Its record and Event wait like any other's.
                record, done = self._restore_baseline(t, policy, record, obs, text)
                error += f"; {failed} failed ticks in a row: {done}"
                outcome.error = error
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - the record is best effort; the Event below still says why
            outcome.error = f"{error}; could not record the failed tick: {_describe(err)}"
            record = None
        self._after_serving(t, partial(self._record_failure, t, policy.name, name, record, outcome, error))

    def _record_failure(self, t: _Tick, service: str, deployment: str, record: ServiceRecord | None,
                        outcome: ServiceOutcome, error: str) -> None:
        """Write a failed tick's record (if it was read) and its Event."""
        ns = self.config.namespace
        if record is not None:
            try:
                self._fence(t)
                self.cluster.write_state(ns, service, record.to_json())
                self._recorded(t, service)
            except LeaseLost:
                raise
            except Exception as err:  # noqa: BLE001 - the record is best effort; the Event below still says why
                outcome.error = f"{error}; could not record the failed tick: {_describe(err)}"
        self._event_on(service, ns, deployment, EVENT_GATE_TICK_FAILED, outcome.error or error, warning=True)

    @staticmethod
    def _after_serving(t: _Tick, write: Callable[[], None]) -> None:
        """Run a record or advisory write now, or, while the tick's serving writes are still to come, after them."""
        if t.deferred is None:
            write()
        else:
            t.deferred.append(write)

    def _restore_baseline(self, t: _Tick, policy: ServicePolicy, record: ServiceRecord, obs: Observed | None,
                          stored_text: str | None) -> tuple[ServiceRecord, str]:
        """Put serving back at its whole baseline (the fail-safe), whatever else cannot be read; say what was done.

        Only ever a raise, and only to the current incarnation's baseline: the Deployment is read again
        right before the write (what the tick observed at its start may be stale: another service's
        fail-safe, an owner's change), and only the gate's own admissions of this incarnation count as lent.
        """
        assert record.baseline is not None
        dep = self.cluster.deployment(self.config.namespace, policy.name, policy.deployment)
        if record.deployment_uid and dep.uid and dep.uid != record.deployment_uid:
            return record, "the Deployment is a new one: nothing the gate lent is on it, nothing to restore"
        fresh = Observed(policy, dep, self.cluster.autoscaler(dep), record, obs.jobs if obs is not None else [], [],
                         stored_text)
        if record.writes_to and fresh.writes_to != record.writes_to:
            # A new writer target (an HPA came or went): its baseline is learned by a tick that can
            # count the lent jobs, not by a fail-safe that could not read them.
            return record, f"the gate now writes {fresh.writes_to}: nothing to restore until a tick learns its baseline"
        if obs is None:
            note = self._unrecorded.get(policy.name) or self._lease_note(t, policy.name)
            if note is not None:
                record = fresh.record = note.supersede(record, stored_text, dep.uid, fresh.writes_to)
        # What someone else set during the failed ticks is theirs: restore the adopted baseline, not the stored one.
        lent = sum(j.replicas for j in counted_jobs(fresh.jobs, record, dep.uid) if j.state == ADMITTED)
        owned = own_baseline(record, dep.uid, fresh.writes_to, fresh.current, lent)
        record = owned.record
        if fresh.current < owned.baseline:
            record = self._apply(t, fresh, record, owned.baseline)
            return record, f"serving restored to its baseline {owned.baseline}"
        return record, f"serving already at {fresh.current} (its baseline is {owned.baseline})"

    def _fence(self, t: _Tick) -> None:
        """Renew the Lease when a third of it has passed; raise `LeaseLost` if another actor has it."""
        if t.dry_run:
            return
        elapsed = self.monotonic() - t.renewed
        if elapsed < self.lease_seconds / 3:
            return
        try:
            held = self.cluster.acquire_lease(self.config.namespace, self.holder, self.lease_seconds)
        except Exception as err:  # noqa: BLE001 - an unreachable API: keep going only while the grant surely holds
            if elapsed < self.lease_seconds * 2 / 3:
                return
            raise LeaseLost(f"the lease could not be renewed ({_describe(err)})") from None
        if not held:
            raise LeaseLost("another actor took the offhours lease")
        t.renewed = self.monotonic()

    # -- events -----------------------------------------------------------------------------
    def _record_tick_event(self, obs: Observed, decision: Decision, p: Plan, outcome: ServiceOutcome) -> None:
        gpus = obs.policy.gpus_per_replica
        message = (f"{decision.action}: {decision.reason}. required={decision.required} baseline={outcome.baseline} "
                   f"lent {decision.lent}->{p.lent_after} replicas ({p.lent_after * gpus} GPUs); "
                   f"{obs.writes_to} at {obs.current}")
        if p.admit or p.adopt:
            message += "; admitted " + ", ".join(j.name for j in (*p.admit, *p.adopt))
        if p.stop:
            message += "; stopped " + ", ".join(j.name for j in p.stop) + "; parked " + ", ".join(outcome.parked)
        if p.notes:
            message += "; " + "; ".join(p.notes)
        if outcome.error:
            message += f"; errors: {outcome.error}"
        reason = (EVENT_GPUS_LENT if p.lent_after > decision.lent
                  else EVENT_GPUS_RECLAIMED if p.lent_after < decision.lent or decision.action == "reclaim"
                  else EVENT_GATE_HOLD)
        self._event(obs.policy.name, obs.dep, reason, message, warning=bool(outcome.error) or (
            decision.action == "reclaim" and "failed ticks" in decision.reason))

    def _event(self, service: str, dep: Deployment, reason: str, message: str, warning: bool = False) -> None:
        self._event_on(service, dep.namespace, dep.name, reason, message, warning)

    def _event_on(self, service: str, namespace: str, name: str, reason: str, message: str, warning: bool = False) -> None:
        try:
            # A hold repeats every tick while nothing changes: one Event per Deployment, counted.
            self.cluster.record_event(namespace, "Deployment", name, reason, message, warning,
                                      aggregate=reason in AGGREGATED_EVENT_REASONS)
        except Exception as err:  # noqa: BLE001 - an event is a record, not an action: never let it undo a tick
            self.log.warning(f"could not record event {reason}: {_describe(err)}", service, reason=reason)


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


def _unread_ends(obs: Observed) -> dict[str, tuple[str, str]]:
    """Return the record's admitted workflows no longer listed: the ends a full tick reads, as the record has them."""
    listed = {j.uid for j in obs.jobs}
    return {uid: entry for uid, entry in (obs.record.runs or {}).items() if uid not in listed}


def _with_runs_elsewhere(jobs: list[Job], running: Mapping[str, set[str]], service: str) -> list[Job]:
    """Make a parked job whose run runs for another service (of the same research namespace) wait for it."""
    out = []
    for job in jobs:
        elsewhere = sorted(running.get(job.run_id or "", set()) - {service})
        if job.state == PARKED and job.problem is None and elsewhere:
            job = replace(job, problem=f"its run {job.run_id} runs for service {elsewhere[0]}: one run never runs "
                                       "twice at once, it waits for that workflow to end")
        out.append(job)
    return out


def _with_done_runs(jobs: list[Job], done: set[str]) -> list[Job]:
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


def _describe(err: BaseException) -> str:
    text = str(err)
    return text if type(err).__name__ in ("ClusterError", "LeaseLost") else f"{type(err).__name__}: {text}"


def _last_decision(decision: Decision, p: Plan, now: float) -> dict[str, Any]:
    return {"at": now, "action": decision.action, "required": decision.required, "lent": p.lent_after,
            "target": decision.target_lent, "reason": decision.reason[:REASON_CHARS]}


def _waiting_annotations(reason: str, position: int) -> dict[str, str]:
    return {ANNOTATION_WAITING_REASON: reason, ANNOTATION_QUEUE_POSITION: str(position)}


def store_progress(job: Job) -> float | None:
    """Read a job's last checkpoint time from its checkpoint store (`progress.json`, see offhours.scripts.runtime.checkpoint)."""
    from offhours.scripts.runtime.checkpoint import latest_progress_time

    if not job.checkpoint_prefix or not job.checkpoint_prefix.startswith(("file://", "s3://")):
        return None
    return latest_progress_time(job.checkpoint_prefix, os.environ.get("OFFHOURS_S3_ENDPOINT_URL"))
