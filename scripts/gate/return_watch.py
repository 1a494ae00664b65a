"""Follows each reclaim the gate makes until serving is back, and times its phases on the gate's monotonic clock.

The gate's run loop (scripts/gate/loop.py) tells it of every pass (`passed`): a pass whose decision
reclaimed opens a reclaim in the tracker (scripts/policy/return_phases.py), dated by the loop's own
`time.monotonic()`: the rise seen when the pass began its read of the load, the decision when the pass
returned (its writes answered). A pass that lends the service again cancels the open one. While any
reclaim is open, the loop calls `poll` every `POLL_SECONDS`; each poll reads, per open reclaim:

- the victims' pods (`Cluster.workflow_pods` of the workflows the pass stopped, its own admissions first, at
  most MAX_VICTIMS): gone when every one that
  holds GPUs has ended, or none is left;
- the Deployment's replicas and its pods: scheduled when as many are bound to a node, Ready when as
  many are Ready;
- serving: every Ready pod's vLLM metrics page answers and reads (the same scrape as the direct source);

and the observation is dated when the reads have answered. The reads are the gate's, on its clock; no time
written by a kubelet or a Prometheus sample enters a phase. A read that fails dates nothing (the next poll
reads again). The phases' resolution is the poll period.
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from offhours.scripts.gate.controller import Gate, ServiceOutcome
from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.metrics.scrape import Target, metrics_url, scrape
from offhours.scripts.policy.plan import ADMITTED
from offhours.scripts.policy.return_phases import Observation, Tracker, begin, cancel, observe

POLL_SECONDS = 1.0
MAX_VICTIMS = 64
"""Victims followed per reclaim at most, the gate's own admissions first: each poll lists each one's pods, and
the stops of workflows running without admission are a tenant's to multiply."""


@dataclass
class ReturnWatch:
    """The open reclaims of one gate process, the victims each one waits for, and the metrics they end in."""

    gate: Gate
    metrics: ReturnMetrics
    monotonic: Callable[[], float] = time.monotonic
    tracker: Tracker = field(default_factory=Tracker)
    victims: dict[str, dict[str, str]] = field(default_factory=dict)  # service -> stopped workflow name -> uid

    @property
    def following(self) -> bool:
        """Whether any reclaim is open (the loop then polls every POLL_SECONDS)."""
        return bool(self.tracker.open)

    def passed(self, outcomes: Iterable[ServiceOutcome], began: float) -> None:
        """Take a pass's outcomes: a reclaim opens (seen at `began`, decided now); a lend cancels the open one."""
        decided = self.monotonic()
        for outcome in outcomes:
            if outcome.service not in self.metrics.services or outcome.failed or outcome.decision is None:
                continue
            decision, plan = outcome.decision, outcome.plan
            if decision.action == "reclaim" and decision.target_lent < decision.lent:
                self.tracker, closed = begin(self.tracker, outcome.service, began, decided)
                stops = sorted(plan.stop if plan else (), key=lambda j: j.state != ADMITTED)  # own first, stable
                self.victims[outcome.service] = {j.name: j.uid for j in stops[:MAX_VICTIMS]}
            elif decision.action == "lend" and plan is not None and plan.lent_after > 0:
                self.tracker, closed = cancel(self.tracker, outcome.service)
            else:
                continue
            for c in closed:
                self.metrics.record(c)

    def poll(self) -> None:
        """Read each open reclaim's service once and move its phases on; a failed read dates nothing."""
        for service in [r.service for r in self.tracker.open]:
            try:
                seen = self._read(service)
            except Exception as err:  # noqa: BLE001 - a read that failed is no observation; the next poll reads again
                self.gate.log.warning(f"return path not read: {type(err).__name__}: {err}", service)
                continue
            self.tracker, closed = observe(self.tracker, service, seen, self.monotonic())
            for c in closed:
                self.metrics.record(c)
                self.victims.pop(service, None)

    def _read(self, service: str) -> Observation:
        config, cluster = self.gate.config, self.gate.cluster
        victims = self.victims.get(service, {})
        pods = cluster.workflow_pods(config.workflow_namespace, victims) if victims else {}
        gone = all(p.finished is not None or not p.gpus for listed in pods.values() for p in listed)
        policy = next(p for p in config.services if p.name == service)
        dep = cluster.deployment(config.namespace, service, policy.deployment)
        scheduled = cluster.scheduled_pods(dep) >= dep.replicas
        ready = cluster.ready_pods(dep)
        serving = False
        if len(ready) >= dep.replicas:
            m = config.metrics
            answered = scrape([Target(p.name, metrics_url(p.ip, m.port, m.path)) for p in ready],
                              m.scrape_timeout_seconds, m.concurrency)
            serving = not answered.errors and len(answered.readings) >= dep.replicas
        return Observation(victims_gone=gone, scheduled=scheduled, ready=len(ready) >= dep.replicas, serving=serving)
