"""The gate: observe each service's load, decide what may be lent, act through the cluster.

One tick is stateless and idempotent: everything it needs is read from the Kubernetes objects
(baseline and gate state on the Deployment, admission on the workflows) and every actor
recomputes the same target, so a tick killed between two actions converges on the next one.
A `coordination.k8s.io` Lease serialises the gate and the exit hooks.
"""

import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import TextIO

from offhours.scripts.cluster.base import (
    ANNOTATION_BASELINE,
    ANNOTATION_GATE_STATE,
    HOLD_REASON,
    Cluster,
    ClusterError,
    Deployment,
)
from offhours.scripts.metrics.load import CounterSample
from offhours.scripts.metrics.sources import LoadSource, Reading, ServiceTarget
from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.decide import Decision, ServiceState, decide
from offhours.scripts.policy.plan import ADMITTED, Job, Plan, plan
from offhours.scripts.policy.schedule import lending_allowed


@dataclass
class StoredState:
    """The gate's memory for one service, kept in the Deployment annotation offhours.io/gate-state."""

    decision: ServiceState = field(default_factory=ServiceState)
    samples: dict[str, CounterSample] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise compactly."""
        return json.dumps({
            "recommendations": [[round(t, 3), r] for t, r in self.decision.recommendations],
            "failedTicks": self.decision.failed_ticks,
            "samples": {pod: [round(s.at, 3), *s.counters] for pod, s in sorted(self.samples.items())},
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> "StoredState":
        """Parse; an unreadable annotation is treated as no memory (the safe side: no lending yet)."""
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            recs = tuple((float(t), int(r)) for t, r in raw.get("recommendations", []))
            samples = {str(p): CounterSample(float(v[0]), (float(v[1]), float(v[2]), float(v[3])))
                       for p, v in raw.get("samples", {}).items()}
            return cls(ServiceState(recs, int(raw.get("failedTicks", 0))), samples)
        except (ValueError, TypeError, IndexError, AttributeError):
            return cls()


@dataclass
class ServiceOutcome:
    """What one tick decided and did for one service."""

    service: str
    baseline: int | None = None
    decision: Decision | None = None
    plan: Plan | None = None
    parked: list[str] = field(default_factory=list)
    error: str | None = None

    def summary(self) -> str:
        """One line for the log."""
        if self.decision is None or self.plan is None:
            return f"{self.service}: error: {self.error}"
        d, p = self.decision, self.plan
        parts = [f"{self.service}: {d.action} lent {d.lent} -> {p.lent_after} of baseline {self.baseline}",
                 f"({d.reason})", f"scale to {p.scale_to}"]
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
class Gate:
    """The gate over a cluster, a load source and a configuration."""

    config: GateConfig
    cluster: Cluster
    source: LoadSource
    clock: Callable[[], float] = time.time
    holder: str = field(default_factory=lambda: f"gate/{socket.gethostname()}")
    out: TextIO = sys.stdout
    progress: Callable[[Job], float | None] | None = None  # last checkpoint time of a running job

    def tick(self, dry_run: bool = False) -> list[ServiceOutcome]:
        """Run one observe -> decide -> act pass over every service."""
        ns = self.config.namespace
        if not dry_run and not self.cluster.acquire_lease(ns, self.holder, max(60, 2 * self.config.tick_seconds)):
            print("another gate or exit hook holds the offhours lease: skipping this tick", file=self.out)
            return []
        try:
            return self._tick(dry_run)
        finally:
            if not dry_run:
                self.cluster.release_lease(ns, self.holder)

    def _tick(self, dry_run: bool) -> list[ServiceOutcome]:
        now = self.clock()
        outcomes: dict[str, ServiceOutcome] = {}
        prepared: list[tuple[ServicePolicy, Deployment, list[Job], StoredState, ServiceTarget]] = []
        for policy in self.config.services:
            outcome = outcomes[policy.name] = ServiceOutcome(policy.name)
            try:
                dep = self.cluster.deployment(self.config.namespace, policy.name, policy.deployment)
                jobs = self.cluster.jobs(self.config.workflow_namespace, policy.name)
                stored = StoredState.from_json(dep.annotations.get(ANNOTATION_GATE_STATE))
                pods = self.cluster.ready_pods(dep)
            except ClusterError as err:
                outcome.error = str(err)
                continue
            prepared.append((policy, dep, jobs, stored, ServiceTarget(policy.name, pods, stored.samples)))

        readings = self.source.read([p[4] for p in prepared], now) if prepared else {}
        for policy, dep, jobs, stored, _ in prepared:
            outcome = outcomes[policy.name]
            reading = readings.get(policy.name, Reading(None, "no reading"))
            try:
                self._service(policy, dep, jobs, stored, reading, now, dry_run, outcome)
            except ClusterError as err:
                outcome.error = str(err)
                if not dry_run:
                    self._event(dep, "GateActionFailed", f"{err}; the next tick recomputes from the objects", True)
        for outcome in outcomes.values():
            print(outcome.summary(), file=self.out)
        return list(outcomes.values())

    def _service(self, policy: ServicePolicy, dep: Deployment, jobs: list[Job], stored: StoredState,
                 reading: Reading, now: float, dry_run: bool, outcome: ServiceOutcome) -> None:
        lent = sum(j.replicas for j in jobs if j.state == ADMITTED)
        baseline = dep.baseline
        if baseline is None:
            # Before the first change: what runs now, plus anything already lent, is the baseline.
            baseline = dep.replicas + lent
            if not dry_run:
                self.cluster.annotate_deployment(dep, {ANNOTATION_BASELINE: str(baseline)})
        outcome.baseline = baseline
        decision = decide(
            now=now,
            policy=policy,
            baseline=baseline,
            lent=lent,
            load=reading.load,
            load_error=reading.error,
            lending_allowed=lending_allowed(policy.schedule, datetime.fromtimestamp(now, timezone.utc)),
            max_age_seconds=self.config.metrics.max_age_seconds,
            failed_ticks_before_reclaim=self.config.failed_ticks_before_reclaim,
            state=stored.decision,
        )
        if decision.target_lent < lent and self.progress is not None:
            jobs = [self._with_progress(j) for j in jobs]  # only when a stop is coming: it costs I/O
        p = plan(decision, baseline, jobs, now)
        outcome.decision, outcome.plan = decision, p
        if dry_run:
            return
        self._act(policy, dep, decision, p, outcome)
        samples = reading.samples or stored.samples
        self.cluster.annotate_deployment(dep, {ANNOTATION_GATE_STATE: StoredState(decision.state, samples).to_json()})

    def _with_progress(self, job: Job) -> Job:
        if job.state != ADMITTED or self.progress is None:
            return job
        try:
            at = self.progress(job)
        except Exception as err:  # noqa: BLE001 - progress is advisory: a stop must never wait on it
            print(f"progress of {job.name} unreadable: {err}", file=self.out)
            return job
        if at is None or (job.progress_at is not None and job.progress_at >= at):
            return job
        return replace(job, progress_at=at)

    def _act(self, policy: ServicePolicy, dep: Deployment, decision: Decision, p: Plan, outcome: ServiceOutcome) -> None:
        wf_ns = self.config.workflow_namespace
        # Reclaim: park a copy first (idempotent by name), then stop, so a stopped job is never lost.
        for job in p.stop:
            outcome.parked.append(self.cluster.park_copy(wf_ns, job))
            self.cluster.stop(wf_ns, job)
        # Scale before admitting: the GPUs are free before research pods ask for them; and at once on reclaim.
        if dep.replicas != p.scale_to:
            self.cluster.scale(dep, p.scale_to)
        for job in p.admit:
            self.cluster.admit(wf_ns, job)
        for job in p.adopt:
            self.cluster.adopt(wf_ns, job)
        gpus = policy.gpus_per_replica
        message = (f"{decision.action}: {decision.reason}. required={decision.required} baseline={outcome.baseline} "
                   f"lent {decision.lent}->{p.lent_after} replicas ({p.lent_after * gpus} GPUs); scale to {p.scale_to}")
        if p.admit or p.adopt:
            message += "; admitted " + ", ".join(j.name for j in (*p.admit, *p.adopt))
        if p.stop:
            message += "; stopped " + ", ".join(j.name for j in p.stop) + "; parked " + ", ".join(outcome.parked)
        if p.notes:
            message += "; " + "; ".join(p.notes)
        reason = ("GPUsLent" if p.lent_after > decision.lent
                  else "GPUsReclaimed" if p.lent_after < decision.lent else HOLD_REASON)
        self._event(dep, reason, message, warning=decision.action == "reclaim" and "failed ticks" in decision.reason)

    def _event(self, dep: Deployment, reason: str, message: str, warning: bool = False) -> None:
        try:
            # A hold repeats every tick while nothing changes: one Event per Deployment, counted.
            self.cluster.record_event(dep.namespace, "Deployment", dep.name, reason, message, warning,
                                      aggregate=reason == HOLD_REASON)
        except ClusterError as err:  # an event is a record, not an action: never let it undo a tick
            print(f"could not record event {reason}: {err}", file=self.out)


def store_progress(job: Job) -> float | None:
    """Read a job's last checkpoint time from its checkpoint store (`progress.json`, see offhours.scripts.checkpoint)."""
    import os

    from offhours.scripts.checkpoint import latest_progress_time

    if not job.checkpoint_prefix or not job.checkpoint_prefix.startswith(("file://", "s3://")):
        return None
    return latest_progress_time(job.checkpoint_prefix, os.environ.get("OFFHOURS_S3_ENDPOINT_URL"))
