"""The fault campaign's world: a simulated fleet around the in-memory cluster, and the gate's state machine.

Shared by tests/test_campaign.py (a fixed budget in the offline suite) and bench/bench_campaign.py
(the long variant). Everything runs for real except the vLLM pods: the gate, the policy, the
in-memory cluster (`MemoryCluster`, the same contract as `KubeCluster`) and the exit hook.

The simulated fleet is two services in one gate configuration:
- `code` takes every fault: API errors on its calls, malformed readings and tenant values, a
  corrupted state ConfigMap, its Deployment recreated, exit hooks racing the gate's writes;
- `chat` never takes a service-scoped fault, and is run a second time in a twin cluster where
  `code` does not exist: its outcome must be the same in both (a fault stays with its service).
Faults that hit the whole process (the gate killed between two writes, the Lease taken mid-tick,
an API error on the Lease, the load source raising) are run in the main cluster only, and the
twin is then re-synchronised with it.

Time is modelled in ticks of `TICK` seconds. A serving replica added by the gate is ready
`GRACE + COLD_START` seconds later (the research pod's termination grace, then vLLM's cold
start), so the gate's reaction time to a load rise is the tick that sees it plus
`REACTION_TICKS` ticks.
"""

import copy
import functools
import io
import math
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar
from unittest import mock

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from offhours.scripts.backstop.restore import HELD_LEASES, run_backstop
from offhours.scripts.cluster.base import Autoscaler, ClusterError, Pod, ServingWrite
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.exit_hook import return_gpus
from offhours.scripts.metrics.sources import Reading, ServiceTarget
from offhours.scripts.names import (
    ANNOTATION_BORROWED_FROM,
    ANNOTATION_PARKED_FROM,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROGRESS,
    ANNOTATION_ROOT,
    FINISHED_PHASES,
    LABEL_COPY_OF,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
    LEASE_NOTE_PREFIX,
)
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.plan import ADMITTED
from offhours.scripts.policy.record import ServiceRecord, UnrecordedWrite
from offhours.scripts.policy.samples import CounterSample
from tests.support.templates import install_library_templates

NS = "serving"
TICK = 60
GRACE = 30
COLD_START = 90
REACTION_TICKS = math.ceil((GRACE + COLD_START) / TICK)
MIN_REPLICAS = 2
RPS_PER_REPLICA = 10.0
HEADROOM = 0.25
FAULTY, CLEAN = "code", "chat"
START_REPLICAS = 8
EXIT_HOOK_CALL = "exit-hook:"  # marks a call the job's exit hook made, as the job ended
RESEARCH_WRITES = ("admit", "adopt", "stop", "park-copy", "delete-workflow", "annotate-workflow")
WRITES = ("scale", "set-max", "write-state", "note-lease", "admit", "adopt", "stop", "park-copy", "delete-workflow",
          "annotate-workflow")
GATE_CALLS = ("get-deployment", "get-autoscaler", "read-state", "list-workflows", "list-pods", "get-workflow", *WRITES)

API_ERRORS: tuple[tuple[str, Exception], ...] = (
    ("403", ClusterError("HTTP 403 Forbidden: admission webhook denied the request")),
    ("409", ClusterError("HTTP 409 Conflict: the object has been modified")),
    ("429", ClusterError("HTTP 429 Too Many Requests (retries exhausted)")),
    ("500", ClusterError("HTTP 500 Internal Server Error (retries exhausted)")),
    ("503", ClusterError("HTTP 503 Service Unavailable (retries exhausted)")),
    ("timeout", ClusterError("read timed out after 10 s (retries exhausted)")),
    ("TimeoutError", TimeoutError("timed out")),
    ("ConnectionResetError", ConnectionResetError(104, "Connection reset by peer")),
    ("KeyError", KeyError("status")),
    ("ValueError", ValueError("unexpected answer from the API server")),
)
MALFORMED_READINGS = ("nan", "inf", "overflow", "negative", "partial", "stale", "error", "absurd", "no-pods-read")
TENANT_VALUES: tuple[tuple[str, str, str], ...] = (  # (where, key, value) a tenant can write on its own workflow
    ("annotations", ANNOTATION_PRIORITY, "abc"),
    ("annotations", ANNOTATION_PRIORITY, "1e400"),
    ("annotations", ANNOTATION_PROGRESS, "yesterday"),
    ("annotations", ANNOTATION_PROGRESS, "nan"),
    ("labels", LABEL_REPLICAS, "-3"),
    ("labels", LABEL_REPLICAS, "1e9"),
    ("labels", LABEL_REPLICAS, "abc"),
    ("labels", LABEL_STATE, "admitted"),
    ("labels", LABEL_STATE, "returned"),
    ("annotations", ANNOTATION_BORROWED_FROM, "not-a-uid"),
    ("annotations", ANNOTATION_PRIORITY, "99999"),  # parses, but jumps every queue
    ("annotations", ANNOTATION_PRIORITY, "-1000001"),
    ("annotations", ANNOTATION_PARKED_FROM, "Not A Name/../x"),
    ("annotations", ANNOTATION_ROOT, "code-job1-p1"),  # chosen to collide with another run's copy name
    ("labels", LABEL_RUN_ID, "code-job1"),  # another run's id
)
ARGO_VERBS = ("submit", "retry", "resubmit", "resume", "suspend", "stop", "terminate", "delete")
CORRUPT_STATES = ("", "{", "[]", "null", '"text"', '{"baseline":"8"}', '{"baseline":8.5}', '{"baseline":-1}',
                  '{"baseline":true}', '{"baseline":1e400}', '{"recommendations":[[1,"x"]],"baseline":8}',
                  '{"samples":{"p":[1]},"baseline":8}', '{"lastDecision":5,"baseline":8}', "\x00\xff")


class Killed(BaseException):
    """The gate process died at this call (a BaseException: nothing in the gate may catch it)."""


def required(rps: float, floor: int) -> int:
    """Replicas the true demand needs (the same capacity model the configuration gives the gate)."""
    return max(math.ceil(rps / RPS_PER_REPLICA * (1 + HEADROOM) - 1e-9), floor)


def campaign_config(services: Iterable[str], edits: dict[str, Any] | None = None,
                    service_edits: dict[str, dict[str, Any]] | None = None) -> GateConfig:
    """The campaign's configuration; `edits` replace top-level fields, `service_edits` a service's fields."""
    service_edits = service_edits or {}
    return parse_config({
        "namespace": NS, "tickSeconds": TICK,
        "metrics": {"source": "direct", "maxAgeSeconds": 600, "direct": {"port": 8000}},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        "services": {s: {"capacity": {"requestsPerSecond": RPS_PER_REPLICA}, "headroom": HEADROOM,
                         "minReplicas": MIN_REPLICAS, "stabilizationSeconds": 2 * TICK, "maxLendStep": 2,
                         "gpusPerReplica": 4, **service_edits.get(s, {})} for s in services},
        **(edits or {}),
    })


def service_of(target: str) -> str | None:
    """The service a call's target (a Deployment, a service, a workflow, an autoscaler) belongs to."""
    for service in (FAULTY, CLEAN):
        if target == service or target.startswith(service + "-"):
            return service
    return None


@dataclass
class SimCluster(MemoryCluster):
    """`MemoryCluster` whose injected faults (`fail_next`) hit only the faulty service's calls (and the Lease).

    It also kills the gate at a chosen call, lets another actor take the Lease at a chosen call,
    and lets an exit hook finish a workflow just as the gate writes to it.
    """

    kill_at: int | None = None  # die at this write call of the next tick (0-based)
    lease_taken_at: int | None = None  # another gate takes the Lease at this call of the next tick
    race_at: str | None = None  # the workflow whose job completes at the gate's next write to it
    writes_seen: int = 0
    calls_seen: int = 0
    faulted: set[str] = field(default_factory=set)  # services that took a fault this tick
    dead_lease: tuple[str | None, float] | None = None
    admitted_by_gate: dict[str, str] = field(default_factory=dict)  # workflows the gate admitted or adopted -> against which UID
    lowered: list[str] = field(default_factory=list)  # services whose serving a write lowered, this tick
    # Workflow UIDs the gate decided to lend to: added to its record's admissions (written before the admit or
    # adopt call, which a fault may then stop), or, where its record was lost, read from the marks.
    decided: set[str] = field(default_factory=set)
    # Each process's node clock, as seconds off the API server's (`clock`): see `node`.
    skews: dict[str, float] = field(default_factory=dict)
    # Writes (by verb) to the faulty service whose effect lands but whose answer is lost (a timeout after the write).
    lose_next: dict[str, int] = field(default_factory=dict)
    losing: str | None = None  # the call in progress whose answer will be lost
    # Another actor (a tenant, on-call) whose write lands at the gate's `at`-th call of the next tick.
    meddle_at: tuple[int, Callable[[], None]] | None = None
    refused: set[int] = field(default_factory=set)  # indices in `calls` of lowers whose test failed: not written
    ended: set[str] = field(default_factory=set)  # UIDs of the workflows Argo ended (the truth: not their status)

    def _call(self, what: str) -> None:
        verb, _, rest = what.partition(" ")
        target = rest.split(" ")[0]
        self.calls.append(what)
        self.calls_seen += 1
        if self.meddle_at is not None and self.calls_seen > self.meddle_at[0]:
            meddle, self.meddle_at = self.meddle_at[1], None
            meddle()
        if verb in WRITES and self.lose_next.get(verb) and service_of(target) == FAULTY:
            self.lose_next[verb] -= 1
            self.losing = what
        if self.lease_taken_at is not None and self.calls_seen > self.lease_taken_at:
            self.lease_taken_at = None
            self.lease_holder, self.lease_until = "gate/other-host/7/intruder", self.clock + 2 * TICK
        if verb in WRITES:
            if self.kill_at is not None and self.writes_seen >= self.kill_at:
                self.kill_at = None
                self.dead_lease = (self.lease_holder, self.lease_until)  # a dead process releases nothing
                raise Killed(what)
            self.writes_seen += 1
            if self.race_at is not None and target == self.race_at and verb != "annotate-workflow":
                self.race_at = None
                complete(self, target, "Succeeded")
                self.faulted.add(FAULTY)  # a job that ends during the tick is seen by the next one
        queued = self.fail_next.get(verb)
        if queued and (verb == "acquire-lease" or service_of(target) == FAULTY):
            self.faulted.add(FAULTY if verb != "acquire-lease" else "*")
            raise queued.pop(0)


    def write_state(self, namespace: str, service: str, text: str) -> None:
        before = ServiceRecord.from_json(self.states.get((namespace, service))).admitted
        super().write_state(namespace, service, text)
        record = ServiceRecord.from_json(text)
        new = set(record.admitted or {}) - set(before or {})
        # Learnt afresh (no record, or an unreadable one): parked ones are admissions; running ones were read from
        # their marks for this incarnation, the only evidence left once the gate's memory is lost.
        known = {wf["metadata"]["uid"] for wf in self.workflows.values() if wf["spec"].get("suspend") or
                 wf["metadata"].get("annotations", {}).get(ANNOTATION_BORROWED_FROM) == record.deployment_uid}
        self.decided |= new if before is not None else new & known

    def admit(self, namespace: str, job: Any, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        super().admit(namespace, job, deployment_uid, max_grace_seconds)
        self.admitted_by_gate[job.name] = deployment_uid

    def adopt(self, namespace: str, job: Any, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        super().adopt(namespace, job, deployment_uid, max_grace_seconds)
        self.admitted_by_gate[job.name] = deployment_uid

    def finish(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        super().finish(namespace, name, phase)
        self.ended.add(self.workflows[(namespace, name)]["metadata"]["uid"])

    def lower_serving(self, target: Any, expected: int, value: int) -> ServingWrite:
        at = len(self.calls)  # where its call is logged
        answer = super().lower_serving(target, expected, value)
        if answer.conflict:  # another writer's value was there: nothing written (the logged call wrote nothing)
            self.refused.add(at)
        if not answer.conflict:
            self.lowered.append(service_of(target.name) or target.name if isinstance(target, Autoscaler)
                                else target.service)
        return answer


# The Cluster methods behind the write verbs of `WRITES`: a lost answer is raised after the method's effect landed.
LOSABLE = ("lower_serving", "raise_serving", "write_state", "note_on_lease", "admit", "adopt", "stop", "park_copy",
           "delete_workflow", "annotate_workflow")


def _answer_lost(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: SimCluster, *args: Any, **kwargs: Any) -> Any:
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            self.losing = None
            raise
        if self.losing is not None:
            what, self.losing = self.losing, None
            self.faulted.add(FAULTY)
            raise ClusterError(f"{what}: read timed out after 10 s (the write landed; its answer was lost)")
        return result
    return call


for _name in LOSABLE:
    setattr(SimCluster, _name, _answer_lost(getattr(SimCluster, _name)))


@contextmanager
def node(cluster: "SimCluster", process: str) -> Iterator[None]:
    """Run the block as `process` on its node: `time.time` is the API server's clock plus that node's skew.

    Deterministic (never the real time), so a generated run replays exactly; offhours dates nothing by it (issue
    31 §4), which is what skewing it per process tests.
    """
    skew = cluster.skews.get(process, 0.0)
    with mock.patch("time.time", lambda: cluster.clock + skew):
        yield


def complete(cluster: MemoryCluster, name: str, phase: str) -> None:
    """The job's work ended: Argo runs its exit hook (which marks it), then finishes it."""
    wf = cluster.workflows.get((NS, name))
    if wf is not None:
        wf.setdefault("status", {"phase": "Running"})  # a copy the gate just created: Argo picks it up
    if wf is None or wf.get("status", {}).get("phase") in FINISHED_PHASES:
        return
    wf["status"]["nodes"] = {f"{name}-x": {"name": f"{name}.onExit", "phase": "Running"}}
    mark = len(cluster.calls)
    try:
        if isinstance(cluster, SimCluster):
            with node(cluster, "hook"):  # the exit hook dates its mark by its own node's clock
                return_gpus(cluster, workflow_namespace=NS, workflow_name=name, status=phase, out=io.StringIO())
        else:
            return_gpus(cluster, workflow_namespace=NS, workflow_name=name, status=phase, clock=lambda: cluster.clock,
                        out=io.StringIO())
    except Exception:  # noqa: BLE001 - an exit hook can fail on the API like anything else; Argo still ends the job
        pass
    finally:  # the hook's calls are the workflow's, not the gate's: a job ending mid-tick adds none to the tick's
        cluster.calls[mark:] = [f"{EXIT_HOOK_CALL}{c}" for c in cluster.calls[mark:]]
    cluster.finish(NS, name, phase)


@dataclass
class SimSource:
    """The load source: a `Reading` from the simulated demand, or a malformed one when told to."""

    demand: dict[str, float] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)  # service -> kind, for the next read
    raise_next: Exception | None = None
    bad: set[str] = field(default_factory=set)  # services whose last reading was malformed

    def read(self, targets: list[ServiceTarget], now: float) -> dict[str, Reading]:
        self.bad = set()
        if self.raise_next is not None:
            err, self.raise_next = self.raise_next, None
            self.bad = {t.service for t in targets}
            raise err
        out = {}
        for t in targets:
            rps, n = self.demand.get(t.service, 0.0), len(t.pods)
            kind = self.malformed.pop(t.service, None)
            if kind is not None:
                self.bad.add(t.service)
            samples = {p.name: CounterSample(now, (rps * now, 0.0, 0.0)) for p in t.pods}
            if kind == "error":
                out[t.service] = Reading(None, "2 of 2 pods unreadable: connection refused")
                continue
            values: dict[str, Any] = {"request_rate": rps, "prompt_token_rate": rps * 200.0,
                                      "generation_token_rate": rps * 100.0, "running": rps / 2, "waiting": 0.0,
                                      "kv_cache_usage": 0.3}
            read, age = n, 5.0
            if kind == "nan":
                values["request_rate"] = math.nan
            elif kind == "inf":
                values["prompt_token_rate"] = math.inf
            elif kind == "overflow":
                values["running"] = 1e308 + 1e308
            elif kind == "negative":
                values["waiting"] = -1.0
            elif kind == "partial":
                read = max(0, n - 1)
            elif kind == "stale":
                age = 10_000.0
            elif kind == "absurd":
                values["request_rate"] = 1e12
            elif kind == "no-pods-read":
                read = 0
            out[t.service] = Reading(Load(**values, pods_read=read, pods_expected=n, age_seconds=age), None, samples)
        return out


class World:
    """One cluster, its gate and the simulated fleet around it, with the test's model of each service."""

    def __init__(self, services: tuple[str, ...]) -> None:
        self.services = services
        self.cluster = install_library_templates(SimCluster(), NS)  # its workflows run in NS
        self.config = campaign_config(services)
        self.source = SimSource({s: 0.0 for s in services})
        self.log = io.StringIO()
        self.gate = self.new_gate()
        self.ready_at: dict[str, list[tuple[str, float]]] = {}
        self.baseline: dict[str, int] = {}  # the model: what the owner wants serving at with nothing lent
        self.clean: dict[str, list[tuple[int, bool]]] = {s: [] for s in services}  # per tick: replicas needed, clean
        self.pod_serial = 0
        self.submitted: dict[str, int] = {}  # run -> the replicas it was submitted with (the truth)
        self.tampered: set[str] = set()  # runs whose labels a tenant changed (stuck parked is right for them)
        self.touched: set[str] = set()  # runs a person ran an Argo verb on: run again, stopped or deleted by hand
        self.removed = False  # the faulty service is out of the gate configuration
        self.pending: set[str] = set()  # services whose baseline the gate must learn afresh
        # Services whose owner changed them while the gate's memory showed a write in flight: the owner's
        # baseline (the truth), and the baseline and memory before the change (from which the gate reads
        # it), until the gate's next tick settles on one reading.
        self.unsure: dict[str, tuple[int, int, ServiceRecord]] = {}
        self.tick_calls: list[str] = []
        self.seen_inside: dict[str, tuple[int, int]] = {}  # service -> (lent, value) as a write's answer showed them
        for s in services:
            self.cluster.add_deployment(NS, s, START_REPLICAS)
            self.ready_at[s] = [(p.name, 0.0) for p in self.cluster.pods[(NS, s)]]
            self.baseline[s] = START_REPLICAS

    def new_gate(self) -> Gate:
        """A gate process (a new one has a new Lease holder); it dates by the API server's clock, as deployed."""
        return Gate(self.config, self.cluster, self.source, out=self.log,
                    monotonic=lambda: self.cluster.calls_seen * 5.0)

    # -- the fleet around the gate ------------------------------------------------------------
    def dep(self, service: str) -> Any:
        return self.cluster.deployments[(NS, service)]

    def scaler(self, service: str) -> Autoscaler | None:
        return self.cluster.autoscalers.get((NS, service))

    def policy(self, service: str) -> Any:
        """The service's configuration as the gate has it now (as shipped, while it is out of the configuration)."""
        configured = {p.name: p for p in self.config.services}
        return configured.get(service) or campaign_config([service]).service(service)

    def floor(self, service: str) -> int:
        scaler = self.scaler(service)
        least = self.policy(service).min_replicas
        return max(least, scaler.min_replicas) if scaler else least

    def value(self, service: str) -> int:
        """What the gate writes for the service: replicas, or the autoscaler's maxReplicas."""
        scaler = self.scaler(service)
        return scaler.max_replicas if scaler else self.dep(service).replicas

    def run_autoscalers(self) -> None:
        """The HPA controller: replicas follow the demand between the autoscaler's min and max."""
        for s in self.services:
            scaler = self.scaler(s)
            if scaler is not None:
                need = required(self.source.demand[s], 1)
                self.dep(s).replicas = min(max(need, scaler.min_replicas), scaler.max_replicas)

    def sync_pods(self) -> None:
        """Serving pods: removed at once on a scale-down, ready GRACE + COLD_START after a scale-up."""
        now = self.cluster.clock
        for s in self.services:
            dep, pods = self.dep(s), self.ready_at[s]
            del pods[dep.replicas:]
            while len(pods) < dep.replicas:
                self.pod_serial += 1
                pods.append((f"{s}-pod{self.pod_serial}", now + GRACE + COLD_START))
            self.cluster.pods[(NS, s)] = [Pod(name, f"10.1.{i // 250}.{i % 250 + 1}")
                                          for i, (name, at) in enumerate(pods) if at <= now]

    def in_service(self, service: str) -> int:
        return min(len(self.cluster.pods[(NS, service)]), self.dep(service).replicas)

    def argo(self) -> None:
        """Argo: a stopped workflow runs its exit hook and ends Failed; a finishing one ends Succeeded."""
        for (_, name), wf in list(self.cluster.workflows.items()):
            phase = wf.setdefault("status", {"phase": "Running"}).get("phase")  # Argo picks up a new copy
            if phase in FINISHED_PHASES:
                continue
            if wf["spec"].get("shutdown") == "Stop":
                complete(self.cluster, name, "Failed")
            elif wf.get("status", {}).get("nodes"):
                self.cluster.finish(NS, name, "Succeeded")

    def workflows(self, service: str | None = None) -> list[dict[str, Any]]:
        return [wf for (_, _n), wf in sorted(self.cluster.workflows.items())
                if service is None or wf["metadata"]["labels"].get(LABEL_SERVICE) == service]

    def lent(self, service: str, readable: bool = False) -> int:
        """Replicas research really holds from this Deployment incarnation: admitted, running, as submitted.

        `readable`: as the gate can read them without its memory, i.e. a job whose size label a tenant forged
        counts what the label says (the truth of what was lent is only in the gate's record)."""
        uid = self.dep(service).uid
        if readable:
            # The gate's record of what it admitted to this incarnation (workflow UID -> replicas) is what it
            # reads, whatever a tenant later wrote on the workflow; the marks only where it has no such record.
            record = self.record(service)
            if record.deployment_uid == uid and record.admitted is not None:
                # A suspended one a tenant tampered with may be counted too: its label or status may say it ran, and
                # the gate counts what a tenant claims rather than risk GPUs held uncounted (counting more is safe).
                return sum(record.admitted.get(wf["metadata"]["uid"], 0) for wf in self.workflows()
                           if self.holds(wf))
        total = 0
        runs: set[str] = set()  # without its memory the gate counts one marked workflow per run, the oldest
        # Every workflow, whatever service its label names now (a tenant's to write): the Deployment's UID ties it.
        for wf in sorted(self.workflows(), key=lambda wf: (wf["metadata"].get("creationTimestamp") or 0,
                                                                 wf["metadata"]["name"])):
            meta = wf["metadata"]
            # What a workflow was submitted with: its first workflow's (copies, resubmits and reruns are named after it).
            first = re.match(r"^[a-z]+-job\d+", meta["name"])
            size = self.submitted.get(first.group(0), 0) if first else 0
            # The truth is the gate's admission, whatever state label a tenant wrote since; the marks need it.
            if ((meta["labels"].get(LABEL_STATE) == ADMITTED or not readable) and self.holds(wf)
                    # The truth: the gate admitted it against this incarnation; without its memory, the mark says so.
                    and (self.cluster.admitted_by_gate.get(meta["name"]) == uid if not readable
                         else meta.get("annotations", {}).get(ANNOTATION_BORROWED_FROM) == uid)):
                run = str(meta["labels"].get(LABEL_RUN_ID) or "")
                if readable and run and run in runs:
                    continue
                runs.add(run)
                forged = readable and (run_of(wf) in self.tampered or meta["name"] not in self.cluster.admitted_by_gate)
                label = meta["labels"].get(LABEL_REPLICAS, "")
                total += (int(label) if label.isdigit() else 0) if forged else size
        return total

    def holds(self, wf: dict[str, Any]) -> bool:
        """Whether an admitted workflow holds what it was lent. One a tenant tampered with is judged by the truth,
        not by its status (Argo has not ended it), and suspended may still hold (its owner's pause, or its label
        or status says it ran): the gate counts what a tenant claims rather than risk GPUs held uncounted."""
        if run_of(wf) in self.tampered:
            return wf["metadata"]["uid"] not in self.cluster.ended and not wf["spec"].get("shutdown")
        return holds_lent(wf)

    def finishing(self, service: str) -> bool:
        return any(wf.get("status", {}).get("nodes") and wf.get("status", {}).get("phase") not in FINISHED_PHASES
                   for wf in self.workflows(service))

    def tick(self, second: bool = False) -> dict[str, bool]:
        """One tick of the gate (or of a second gate process); return, per service, whether it ran clean."""
        c = self.cluster
        c.clock += TICK
        c.faulted, c.writes_seen, c.calls_seen = set(), 0, 0
        gate = self.new_gate() if second else self.gate
        fresh = {s: self.value(s) + self.lent(s, readable=True) for s in self.pending}  # what the gate can know at this tick
        seen = {s: (self.lent(s), self.value(s)) for s in self.unsure}  # what the gate reads at this tick
        killed = False
        c.lowered = []
        start = len(c.calls)
        try:
            with node(c, "second-gate" if second else "gate"):
                outcomes = {o.service: o for o in gate.tick()}
        except Killed:
            killed, outcomes = True, {}
            if c.dead_lease is not None:
                c.lease_holder, c.lease_until = c.dead_lease
            self.gate = self.new_gate()  # the next tick is another process
        c.dead_lease, c.kill_at, c.lease_taken_at = None, None, None
        self.tick_calls = c.calls[start:]  # the gate's own calls of this tick
        if not killed:  # no write lowers serving except a lend
            for s in c.lowered:
                o = outcomes.get(s)
                if o is None:  # the tick stopped after its writes (the Lease lost): what it did is in the record
                    action = (self.record(s).last_decision or {}).get("action")
                    assert action == "lend", f"{s}: serving lowered by a tick whose record says {action}"
                    continue
                assert o.decision is not None and o.decision.action == "lend", (
                    f"{s}: serving lowered by a tick that did not lend: {o.detail()}")
        self.run_autoscalers()
        self.sync_pods()
        for s in list(self.pending):
            record = self.record(s)
            if record.baseline is not None and (record.deployment_uid, record.writes_to) == (self.dep(s).uid,
                                                                                            self.target(s)):
                self.baseline[s] = fresh[s]
                self.pending.discard(s)
                self.unsure.pop(s, None)
        for s in list(self.unsure):
            record = self.record(s)
            # Settled: no write in flight, and the value there is the one the record holds (one that landed inside
            # the gate's write is read, and adopted, by its next tick).
            if (record.applying_from is None and record.baseline is not None and record.applied == self.value(s)
                    and (record.deployment_uid, record.writes_to) == (self.dep(s).uid, self.target(s))):
                # The gate settled on a reading of the owner's change: it must be one of two. A change that landed inside
                # the gate's serving write (`owner_sets_inside_a_write`) was read by the gate as it found it then.
                lent, value = seen[s] if s in seen else self.seen_inside.pop(s)
                readings = {max(self.unsure[s][0], lent), max(self.gate_reading(s, value), lent)}
                assert record.baseline in readings, (
                    f"{s}: the gate read the owner's change as baseline {record.baseline}, not one of {readings}")
                self.baseline[s] = record.baseline
                del self.unsure[s]
        clean = {}
        for s in self.services:
            o = outcomes.get(s)
            clean[s] = (not killed and o is not None and o.error is None and o.decision is not None
                        and s not in c.faulted and "*" not in c.faulted and s not in self.source.bad)
            scaler = self.scaler(s)  # with an HPA, its owner's minimum is what low load needs
            floor = scaler.min_replicas if scaler else MIN_REPLICAS
            self.clean[s].append((min(required(self.source.demand[s], floor), self.baseline[s]), clean[s]))
        return clean

    def target(self, service: str) -> str:
        scaler = self.scaler(service)
        return f"{scaler.kind}/{scaler.name}" if scaler else "replicas"

    def record(self, service: str) -> ServiceRecord:
        """The gate's memory of the service as any gate process reads it: the state ConfigMap, superseded by
        the Lease's note of a raise the gate wrote while the ConfigMap could not be."""
        text = self.cluster.states.get((NS, service))
        record = ServiceRecord.from_json(text)
        note = UnrecordedWrite.from_json(self.cluster.lease_annotations.get(LEASE_NOTE_PREFIX + service))
        return note.supersede(record, text, self.dep(service).uid, self.target(service)) if note else record

    def in_flight(self, service: str) -> ServiceRecord | None:
        """The gate's memory if it shows a write in flight (the gate died between recording its intent and
        settling it), else None. An owner's change then is ambiguous to any controller: the gate cannot tell
        whether its write landed before the owner's. It reads a value equal to the one it wrote or wrote from
        as no change, and any other as a change from the value it meant to write."""
        record = self.record(service)
        if (record.applying_from is not None and record.applied is not None
                and (record.deployment_uid, record.writes_to) == (self.dep(service).uid, self.target(service))):
            return record
        return None

    def gate_reading(self, service: str, value: int) -> int:
        """The baseline the gate reads from `value` while unsure (see `in_flight`)."""
        _, before, record = self.unsure[service]
        origin = value if value in (record.applied, record.applying_from) else record.applied
        assert origin is not None
        return before + value - origin

    def owner_sets(self, service: str, value: int) -> None:
        """The model's side of an owner's change: the baseline moves by as much (in flight: see `in_flight`)."""
        current = self.value(service)
        if service not in self.unsure and (record := self.in_flight(service)) is not None:
            self.unsure[service] = (self.baseline[service], self.baseline[service], record)
        if service in self.unsure:
            truth, before, record = self.unsure[service]
            self.unsure[service] = (truth + value - current, before, record)
            # Until the gate settles, a write is bounded by the higher of the two readings.
            self.baseline[service] = max(truth + value - current, self.gate_reading(service, value), self.lent(service))
        else:
            self.baseline[service] = max(self.baseline[service] + value - current, self.lent(service))

    def owner_sets_inside_a_write(self, service: str, value: int) -> None:
        """`owner_sets` for a change landing between the gate's read and its write: the gate reads it from the answer."""
        fresh = service not in self.unsure
        self.owner_sets(service, value)
        if fresh and service in self.unsure:
            self.seen_inside[service] = (self.lent(service), value)

    def rebase(self, service: str) -> None:
        """The gate lost its memory of the service, or meets a new incarnation or writer target: it can know
        only what it sees at its next tick that records the service again (replicas or maxReplicas + lent)."""
        self.pending.add(service)
        self.unsure.pop(service, None)
        self.baseline[service] = self.value(service) + self.lent(service, readable=True)  # until then


@dataclass
class InsideWriter:
    """On-call (or an HPA's owner) whose write lands inside the gate's serving writes: after the gate read the value,
    before its write arrives (installed as `MemoryCluster.serving_writer`).

    `lands`: what it does at each of the next serving writes, per service (key "*": whichever service the write is
    for): nothing (None), or set this value. The model follows: a change the gate must adopt moves the owner's
    baseline; a lower landing inside a raise is overridden by the raise (serving first), so the baseline stays.
    """

    world: "World"
    lands: dict[str, list[int | None]] = field(default_factory=dict)
    moved: set[str] = field(default_factory=set)  # services whose owner's baseline a landed write moved

    def __call__(self, target: Any) -> None:
        w = self.world
        service = target.service if not isinstance(target, Autoscaler) else service_of(target.name)
        assert service is not None
        queue = self.lands.get(service, self.lands.get("*"))
        if not queue:
            return
        value = queue.pop(0)
        if value is None:
            return
        scaler = w.scaler(service)
        if scaler is not None:
            value = max(value, scaler.min_replicas)
        writing = int(w.cluster.calls[-1].split(" ")[-1])  # the value the gate's call writes (its raise's floor)
        current = w.value(service)
        if not (writing > current and value < writing):
            w.owner_sets_inside_a_write(service, value)
            w.clean[service] = []
            self.moved.add(service)
        if scaler is not None:
            scaler.max_replicas = value
        else:
            w.dep(service).replicas = value
        w.run_autoscalers()


def run_of(wf: dict[str, Any]) -> str:
    meta = wf["metadata"]
    return str(meta.get("labels", {}).get(LABEL_RUN_ID) or meta.get("annotations", {}).get(ANNOTATION_ROOT)
               or meta["name"])


def holds_lent(wf: dict[str, Any]) -> bool:
    """Not finished, not stopped, not suspended (the campaign's workflows run no pods of their own), its work not
    done: an admitted workflow in this shape holds what it was lent."""
    return (wf.get("status", {}).get("phase") not in FINISHED_PHASES and not wf["spec"].get("shutdown")
            and not wf["spec"].get("suspend") and not wf.get("status", {}).get("nodes"))


def live(wf: dict[str, Any]) -> bool:
    """Its pods run: not finished, not stopped, not parked."""
    return (wf.get("status", {}).get("phase") not in FINISHED_PHASES and not wf["spec"].get("shutdown")
            and not wf["spec"].get("suspend"))


def view(world: World, service: str) -> tuple[Any, ...]:
    """What a service's outcome is: its replicas, its autoscaler's cap, the gate's memory, its workflows."""
    record = world.record(service)
    scaler = world.scaler(service)
    wfs = tuple((wf["metadata"]["name"], wf["metadata"]["labels"].get(LABEL_STATE), bool(wf["spec"].get("suspend")),
                 wf["spec"].get("shutdown"), wf.get("status", {}).get("phase")) for wf in world.workflows(service))
    return (world.dep(service).replicas, scaler.max_replicas if scaler else None, record.baseline, record.applied,
            record.decision.failed_ticks, record.decision.recommendations, wfs)


RPS = st.sampled_from([0.0, 0.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0])
SERVICE = st.sampled_from([CLEAN, FAULTY])
PICK = st.integers(0, 1000)


class GateCampaign(RuleBasedStateMachine):
    """Ticks, owners, faults, second gates, exit hooks and tenants against the gate; invariants after every step."""

    total_steps: ClassVar[int] = 0  # over every example run in this process (the bench reports it)
    examples: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        GateCampaign.examples += 1
        self.main = World((CLEAN, FAULTY))
        self.twin = World((CLEAN,))
        self.steps = 0
        self.ticked = False
        self.clean: dict[str, bool] = {}
        self.write_marks = 0  # calls of main already checked by the write invariant
        self.twin_marks = 0
        self.jobs = 0

    def config_for(self, services: tuple[str, ...]) -> GateConfig:
        """The configuration of `services` (a subclass that edits the configuration keeps its edits here)."""
        return campaign_config(services)

    def worlds(self, service: str) -> list[World]:
        return [self.main, self.twin] if service == CLEAN else [self.main]

    def _tick(self, chat: float, code: float, second: bool = False, main_only: bool = False) -> None:
        for w in (self.main, self.twin):
            w.source.demand[CLEAN] = chat
        self.main.source.demand[FAULTY] = code
        self.clean = self.main.tick(second)
        twin_clean = self.twin.tick(second)
        if main_only:  # a process-wide fault lasts one tick (if the Lease kept the gate away, it never hit)
            self.main.source.raise_next = None
            self.main.cluster.fail_next.pop("acquire-lease", None)
            self.resync()
        else:
            assert twin_clean[CLEAN] or not self.clean[CLEAN], "the twin failed where the main gate ran clean"
        for w in (self.main, self.twin):
            w.argo()
        self.ticked = True

    def resync(self) -> None:
        """After a fault that hit the whole gate process, the twin starts again from the main cluster's chat."""
        m, t = self.main, self.twin
        t.cluster.deployments[(NS, CLEAN)] = copy.deepcopy(m.dep(CLEAN))
        t.cluster.pods[(NS, CLEAN)] = list(m.cluster.pods[(NS, CLEAN)])
        t.ready_at[CLEAN] = list(m.ready_at[CLEAN])
        t.cluster.autoscalers = {k: copy.deepcopy(v) for k, v in m.cluster.autoscalers.items() if k[1] == CLEAN}
        t.cluster.workflows = {k: copy.deepcopy(wf) for k, wf in m.cluster.workflows.items()
                               if wf["metadata"]["labels"].get(LABEL_SERVICE) == CLEAN}
        # The copies keep the main cluster's UIDs: the twin's counter must not hand one of them out again.
        t.cluster.serial = max(t.cluster.serial, m.cluster.serial)
        t.cluster.states = {k: v for k, v in m.cluster.states.items() if k[1] == CLEAN}
        t.cluster.lease_annotations = {k: v for k, v in m.cluster.lease_annotations.items()
                                       if k == LEASE_NOTE_PREFIX + CLEAN}
        t.cluster.lease_holder, t.cluster.lease_until = m.cluster.lease_holder, m.cluster.lease_until
        t.baseline[CLEAN] = m.baseline[CLEAN]
        t.pending = m.pending & {CLEAN}
        t.unsure = {k: v for k, v in m.unsure.items() if k == CLEAN}
        t.clean[CLEAN] = list(m.clean[CLEAN])
        t.cluster.admitted_by_gate = {n: u for n, u in m.cluster.admitted_by_gate.items() if service_of(n) == CLEAN}
        t.cluster.decided = m.cluster.decided & {wf["metadata"]["uid"] for wf in t.cluster.workflows.values()}
        t.touched = {r for r in m.touched if service_of(r) == CLEAN}
        t.gate = t.new_gate()

    # -- rules --------------------------------------------------------------------------------
    @initialize(chat=PICK, code=PICK)
    def start(self, chat: int, code: int) -> None:
        for i in range(2 + chat % 3):
            self.submit(CLEAN, 1 + (i + chat) % 3, i % 2)
        for i in range(2 + code % 3):
            self.submit(FAULTY, 1 + (i + code) % 3, i % 2)

    def _step(self) -> None:
        self.steps += 1
        GateCampaign.total_steps += 1
        self.ticked = False

    @rule(chat=RPS, code=RPS)
    def tick(self, chat: float, code: float) -> None:
        """A tick of the gate with the load of this minute."""
        self._step()
        self._tick(chat, code)

    @rule(chat=RPS, code=RPS)
    def second_gate_ticks(self, chat: float, code: float) -> None:
        """Another gate process (its own Lease holder) runs the tick."""
        self._step()
        self._tick(chat, code, second=True)

    @rule(ticks=st.integers(1, 3))
    def second_gate_holds_the_lease(self, ticks: int) -> None:
        """Another gate holds the Lease (alive, then expired): this gate must skip, then take over."""
        self._step()
        for w in (self.main, self.twin):
            w.cluster.lease_holder = "gate/other-host/1/0a1b2c3d"
            w.cluster.lease_until = w.cluster.clock + ticks * TICK + 1

    @rule(chat=RPS, code=RPS, at=st.integers(0, 12))
    def gate_killed(self, chat: float, code: float, at: int) -> None:
        """The gate process dies before its `at`-th write of the tick; the next processes must converge."""
        self._step()
        self.main.cluster.kill_at = at
        self._tick(chat, code, main_only=True)

    @rule(chat=RPS, code=RPS, at=st.integers(0, 40))
    def lease_taken_mid_tick(self, chat: float, code: float, at: int) -> None:
        """Another gate takes the Lease at the `at`-th call of the tick (this one's grant lapsed)."""
        self._step()
        self.main.cluster.lease_taken_at = at
        self._tick(chat, code, main_only=True)

    @rule(chat=RPS, code=RPS, error=st.sampled_from(API_ERRORS))
    def lease_api_error(self, chat: float, code: float, error: tuple[str, Exception]) -> None:
        """The API fails the Lease acquire itself: the tick is skipped, never a crash."""
        self._step()
        self.main.cluster.fail_next.setdefault("acquire-lease", []).append(error[1])
        self._tick(chat, code, main_only=True)

    @rule(chat=RPS, code=RPS, error=st.sampled_from([ConnectionError("Prometheus unreachable"),
                                                      ValueError("result is a list")]))
    def load_source_raises(self, chat: float, code: float, error: Exception) -> None:
        """The load source raises for every service at once."""
        self._step()
        self.main.source.raise_next = error
        self._tick(chat, code, main_only=True)

    @rule(verb=st.sampled_from(GATE_CALLS), error=st.sampled_from(API_ERRORS), times=st.integers(1, 3))
    def api_error(self, verb: str, error: tuple[str, Exception], times: int) -> None:
        """The API answers the faulty service's next `verb` call(s) with an error (403/409/429/5xx/timeout/other)."""
        self._step()
        self.main.cluster.fail_next.setdefault(verb, []).extend([error[1]] * times)

    @rule(kind=st.sampled_from(MALFORMED_READINGS))
    def malformed_reading(self, kind: str) -> None:
        """The faulty service's next reading is malformed (NaN, inf, overflow, partial, stale, an error...)."""
        self._step()
        self.main.source.malformed[FAULTY] = kind

    @rule(service=SERVICE, replicas=st.integers(1, 14))
    def owner_scales(self, service: str, replicas: int) -> None:
        """On-call sets the replicas (or, with an HPA, its owner sets maxReplicas): the baseline moves by as much."""
        self._step()
        for w in self.worlds(service):
            scaler = w.scaler(service)
            if scaler is not None:
                replicas = max(replicas, scaler.min_replicas)
            w.owner_sets(service, replicas)
            if scaler is not None:
                scaler.max_replicas = replicas
            else:
                w.dep(service).replicas = replicas
            w.clean[service] = []  # the owner's change restarts the reaction clock
            w.run_autoscalers()
            w.sync_pods()

    @rule(service=SERVICE, low=st.integers(1, 3), high=st.integers(4, 12))
    def hpa_added(self, service: str, low: int, high: int) -> None:
        """An HPA now scales the Deployment: the gate must lend by capping maxReplicas instead."""
        self._step()
        for w in self.worlds(service):
            if w.scaler(service) is None:
                w.cluster.autoscalers[(NS, service)] = Autoscaler("HorizontalPodAutoscaler", NS, f"{service}-hpa",
                                                                  low, high)
                w.run_autoscalers()
                w.sync_pods()
                w.rebase(service)
                w.clean[service] = []

    @rule(replicas=st.integers(1, 12))
    def deployment_recreated(self, replicas: int) -> None:
        """The faulty service's Deployment is deleted and created again (a new UID), with ready pods."""
        self._step()
        w = self.main
        del w.cluster.deployments[(NS, FAULTY)]
        w.cluster.add_deployment(NS, FAULTY, replicas)
        w.ready_at[FAULTY] = [(p.name, w.cluster.clock) for p in w.cluster.pods[(NS, FAULTY)]]
        w.run_autoscalers()
        w.sync_pods()
        w.rebase(FAULTY)
        w.clean[FAULTY] = []

    @rule(text=st.sampled_from(CORRUPT_STATES))
    def state_corrupted(self, text: str) -> None:
        """Someone overwrites the faulty service's state ConfigMap with something unreadable."""
        self._step()
        self.main.cluster.states[(NS, FAULTY)] = text
        self.main.rebase(FAULTY)

    @rule(pick=PICK, value=st.sampled_from(TENANT_VALUES))
    def tenant_writes_a_bad_value(self, pick: int, value: tuple[str, str, str]) -> None:
        """A researcher writes a malformed label or annotation on one of the faulty service's workflows."""
        self._step()
        wfs = [wf for wf in self.main.workflows(FAULTY) if wf.get("status", {}).get("phase") not in FINISHED_PHASES]
        if wfs:
            wf = wfs[pick % len(wfs)]
            where, key, text = value
            self.main.tampered.add(run_of(wf))
            wf["metadata"].setdefault(where, {})[key] = text
            self.main.tampered.add(run_of(wf))  # a run id it took: that run's outcome may change with it

    @rule(service=SERVICE, replicas=st.integers(1, 3), priority=st.integers(0, 2))
    def submit(self, service: str, replicas: int, priority: int) -> None:
        """A researcher submits a job (parked until the gate admits it)."""
        self._step()
        self.jobs += 1
        name = f"{service}-job{self.jobs}"
        for w in self.worlds(service):
            w.cluster.add_workflow(NS, name, service, replicas, priority=priority, created=w.cluster.clock)
            w.submitted[name] = replicas

    @rule(service=SERVICE, pick=PICK, phase=st.sampled_from(["Succeeded", "Succeeded", "Failed"]))
    def job_ends(self, service: str, pick: int, phase: str) -> None:
        """A running job's work ends (its exit hook marks it, Argo finishes it)."""
        self._step()
        names = [wf["metadata"]["name"] for wf in self.main.workflows(service) if live(wf)]
        if names:
            for w in self.worlds(service):
                complete(w.cluster, names[pick % len(names)], phase)

    @rule(pick=PICK)
    def job_ends_during_the_gates_write(self, pick: int) -> None:
        """A faulty-service job completes (exit hook and all) just as the gate's next write to it arrives."""
        self._step()
        names = [wf["metadata"]["name"] for wf in self.main.workflows(FAULTY) if live(wf)]  # a parked job cannot end
        if names:
            self.main.cluster.race_at = names[pick % len(names)]

    @rule(verb=st.sampled_from(ARGO_VERBS), service=SERVICE, pick=PICK)
    def argo_verb(self, verb: str, service: str, pick: int) -> None:
        """A person runs an Argo verb on any of the service's workflows: parked, admitted, preempted, a copy."""
        self._step()
        wfs = self.main.workflows(service)
        if not wfs:
            return
        wf = wfs[pick % len(wfs)]
        name, run = wf["metadata"]["name"], run_of(wf)
        if verb == "retry" and wf.get("status", {}).get("phase") not in ("Failed", "Error"):
            return  # Argo refuses it
        for w in self.worlds(service):
            if (NS, name) not in w.cluster.workflows:
                continue
            if verb == "submit":  # the same run submitted again straight from the template: it runs at once
                again = f"{name}-s{self.steps}"
                w.cluster.add_workflow(NS, again, service, w.submitted.get(run, 1), state="", run_id=run,
                                       created=w.cluster.clock)
                w.cluster.workflows[(NS, again)]["spec"].pop("suspend", None)
            else:
                w.cluster.argo_verb(verb, NS, name, new_name=f"{name}-r{self.steps}")
            if verb not in ("resume",):
                w.touched.add(run)

    @rule(pick=PICK, other=PICK)
    def tenant_forges_the_admission_mark(self, pick: int, other: int) -> None:
        """A researcher copies an admitted workflow's state label and admission mark onto its parked one, and starts it."""
        self._step()
        wfs = self.main.workflows(FAULTY)
        admitted = [wf for wf in wfs if wf["metadata"]["labels"].get(LABEL_STATE) == ADMITTED and live(wf)]
        parked = [wf for wf in wfs if wf["spec"].get("suspend") and wf.get("status", {}).get("phase") not in FINISHED_PHASES]
        if not admitted or not parked:
            return
        source, forger = admitted[pick % len(admitted)], parked[other % len(parked)]
        mark = source["metadata"].get("annotations", {}).get(ANNOTATION_BORROWED_FROM)
        if mark is None:  # labelled admitted by someone else (a tenant, `argo submit`): no mark to copy
            return
        forger["metadata"]["labels"][LABEL_STATE] = ADMITTED
        forger["metadata"].setdefault("annotations", {})[ANNOTATION_BORROWED_FROM] = mark
        forger["spec"].pop("suspend", None)
        self.main.tampered.add(run_of(forger))

    @precondition(lambda self: self.jobs < 300)
    @rule(service=SERVICE, count=st.integers(100, 250), rise=RPS)
    def hundreds_of_parked_jobs(self, service: str, count: int, rise: float) -> None:
        """A researcher's burst of hundreds of parked jobs on one service, for a low-load tick and a tick whose load
        rises on both services; then what still waits of it is cancelled (deleted). In both ticks, whatever their number, every
        serving write (scale, set-max) comes before any research-side or advisory write, and the waiting-reason
        writes of the tick stay within the gate's per-tick budget."""
        self._step()
        burst = []
        for i in range(count):
            self.jobs += 1
            name = f"{service}-job{self.jobs}"
            burst.append(name)
            for w in self.worlds(service):
                w.cluster.add_workflow(NS, name, service, 1 + i % 2, priority=i % 3, created=w.cluster.clock)
                w.submitted[name] = 1 + i % 2
        for chat, code in ((0.0, 0.0), (rise, rise)):
            self._tick(chat, code)
            calls = [c.split(" ")[0] for c in self.main.tick_calls]
            serving = [i for i, verb in enumerate(calls) if verb in ("scale", "set-max")]
            research = [i for i, verb in enumerate(calls) if verb in RESEARCH_WRITES]
            assert not serving or not research or max(serving) < min(research), (
                f"a research-side write before a serving write: {self.main.tick_calls[:40]}")
            annotations = calls.count("annotate-workflow")
            assert annotations <= self.main.gate.advisory_writes_per_tick, f"{annotations} waiting-reason writes"
        for w in self.worlds(service):
            for name in burst:  # `argo delete` of what is still waiting; what ran goes on like any job
                wf = w.cluster.workflows.get((NS, name))
                if wf is not None and wf["spec"].get("suspend") and name not in w.cluster.admitted_by_gate:
                    del w.cluster.workflows[(NS, name)]

    @rule(minutes=st.integers(1, 12), chat=RPS, code=RPS)
    def gate_stopped(self, minutes: int, chat: float, code: float) -> None:
        """The gate is gone for `minutes` (its CronWorkflow suspended, Argo's controller down): no tick runs, only the
        backstop's CronJob, once a minute. Once no tick has renewed a service's lending for the lease bound (twice
        the lease when a dead gate's Lease is still held, plus the minute to the backstop's next run), serving is
        back at the owner's baseline, unless the backstop's last call for it took a fault."""
        self._step()
        for w in (self.main, self.twin):
            w.source.demand[CLEAN] = chat
            if FAULTY in w.services:
                w.source.demand[FAULTY] = code
        for _ in range(minutes):
            for w in (self.main, self.twin):
                c = w.cluster
                c.clock += TICK
                c.faulted, c.writes_seen, c.calls_seen = set(), 0, 0
                with node(c, "backstop"):
                    run_backstop(c, NS, out=w.log, holder="backstop/campaign")
                w.run_autoscalers()
                w.sync_pods()
        for w in (self.main, self.twin):
            for s in w.services:
                w.clean[s] = []  # no tick saw the load meanwhile: the reaction clock starts again with the gate
                record = w.record(s)
                if (record.renewed_at is None or record.lease_seconds is None or s in w.pending or s in w.unsure
                        or s in w.cluster.faulted or (record.deployment_uid, record.writes_to) != (w.dep(s).uid,
                                                                                                w.target(s))):
                    continue
                if w.cluster.clock - record.renewed_at > HELD_LEASES * record.lease_seconds + TICK:
                    assert w.value(s) >= w.baseline[s], (
                        f"{s}: the gate gone for {w.cluster.clock - record.renewed_at:.0f} s (lease "
                        f"{record.lease_seconds:.0f} s), serving at {w.value(s)} of its baseline {w.baseline[s]}")

    @rule(ticks=st.integers(1, 3), chat=RPS, code=RPS)
    def service_removed_from_the_config(self, ticks: int, chat: float, code: float) -> None:
        """The faulty service leaves the gate configuration for a few ticks, then comes back: while it is out, what the
        gate lent of it is given back (its baseline restored on the first tick its calls take no fault)."""
        self._step()
        w = self.main
        w.config, w.removed = self.config_for((CLEAN,)), True
        w.gate = w.new_gate()
        for _ in range(ticks):
            self._tick(chat, code)
            if FAULTY not in w.cluster.faulted and (NS, FAULTY) not in w.cluster.states:
                assert w.value(FAULTY) >= w.baseline[FAULTY], (
                    f"{FAULTY} removed from the config: left at {w.value(FAULTY)} of its baseline {w.baseline[FAULTY]}")
        w.config, w.removed = self.config_for((CLEAN, FAULTY)), False
        w.gate = w.new_gate()
        w.clean[FAULTY] = []
        if (NS, FAULTY) not in w.cluster.states:
            w.rebase(FAULTY)  # its record is gone: the gate learns it afresh

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def only_the_gates_own_admissions_count(self) -> None:
        """What the gate records as lent is what it admitted itself, or decided to (its record is written before the
        admit or adopt call a fault may stop): never a workflow a tenant or Argo's verbs started."""
        for w in (self.main, self.twin):
            ours = {wf["metadata"]["uid"] for wf in w.workflows()
                    if wf["metadata"]["name"] in w.cluster.admitted_by_gate} | w.cluster.decided
            running = {wf["metadata"]["uid"] for wf in w.workflows() if live(wf)}  # recorded, not yet admitted: not running
            for s in w.services:
                admitted = set(ServiceRecord.from_json(w.cluster.states.get((NS, s))).admitted or {}) & running
                assert admitted <= ours, f"{s}: counted as lent without the gate's admission: {admitted - ours}"

    @invariant()
    def serving_within_reaction_time(self) -> None:
        """Serving: once the load has needed R replicas over the tick that saw it and the REACTION_TICKS after
        (tick + grace + cold start), at least min(R, baseline) replicas are in service (ready pods), provided
        the gate could act on that service in the tick that saw it (no fault hit it then)."""
        if not self.ticked:
            return
        for w in (self.main, self.twin):
            for s in w.services:
                window = w.clean[s][-(REACTION_TICKS + 1):]
                if len(window) == REACTION_TICKS + 1 and window[0][1]:
                    need = min(r for r, _ in window)
                    assert w.in_service(s) >= need, (
                        f"{s}: {w.in_service(s)} in service, the load has needed {need} for {REACTION_TICKS + 1} ticks")

    @invariant()
    def never_more_lent_than_baseline_minus_min(self) -> None:
        """After a tick where the gate acted without a fault, research holds at most baseline - minReplicas."""
        if not self.ticked:
            return
        for s in self.main.services:
            if self.clean.get(s):
                assert self.main.lent(s) <= max(0, self.main.baseline[s] - self.main.floor(s)), (
                    f"{s}: {self.main.lent(s)} lent of baseline {self.main.baseline[s]}")

    @invariant()
    def gate_owns_only_its_delta(self) -> None:
        """The gate never writes a value that undoes someone else's change: every replicas (or maxReplicas) it
        writes lies between the floor and the owner's baseline; after a tick without a fault, what it left
        plus what research holds is at least the owner's baseline (it lowered serving only by what it lent)."""
        for w in (self.main, self.twin):
            calls = w.cluster.calls
            start = self.write_marks if w is self.main else self.twin_marks
            for at, call in enumerate(calls[start:], start):
                verb, *rest = call.split(" ")
                if verb in ("scale", "set-max") and at not in w.cluster.refused:
                    s = service_of(rest[0])
                    assert s is not None
                    value = int(rest[1])
                    assert value <= w.baseline[s], f"{call}: above the owner's baseline {w.baseline[s]}"
                    floor = min(w.floor(s), w.baseline[s])
                    assert value >= floor, f"{call}: below the floor {floor}"
            if w is self.main:
                self.write_marks = len(calls)
            else:
                self.twin_marks = len(calls)
            if self.ticked:
                for s in w.services:
                    # What research holds that the gate may count: its own admissions, and, once its record
                    # is lost, what the marks say (the model's baseline then counts them too).
                    held = max(w.lent(s), w.lent(s, readable=True))
                    if self.clean.get(s):
                        assert w.value(s) + held >= w.baseline[s], (
                            f"{s}: left at {w.value(s)} with {held} lent, the owner's baseline is "
                            f"{w.baseline[s]}")

    @invariant()
    def no_work_lost_or_duplicated(self) -> None:
        """Every run has at most one live workflow and at most one that succeeded, nothing live after it
        succeeded, and every workflow the gate stopped (unless its run succeeded) has exactly one parked copy,
        linked by label offhours.io/copy-of."""
        for w in (self.main, self.twin):
            runs: dict[str, list[dict[str, Any]]] = {}
            for wf in w.workflows():
                runs.setdefault(run_of(wf), []).append(wf)
            for run, wfs in runs.items():
                if run in w.tampered:
                    continue  # a tenant who forges its own workflow's labels can run its own work twice anyway
                alive = [wf["metadata"]["name"] for wf in wfs if live(wf)]
                if run in w.touched:
                    # Run again by hand (retry, resubmit, submit): after the gate's next tick that acted on the
                    # service without a fault, never twice at once.
                    service = wfs[0]["metadata"]["labels"].get(LABEL_SERVICE)
                    acted = self.ticked and self.clean.get(service) and w is self.main  # the twin: by the view
                    assert len(alive) <= 1 or not acted, f"run {run}: two live workflows {alive} after a tick"
                    continue
                assert len(alive) <= 1, f"run {run}: two live workflows {alive}"
                done = [wf["metadata"]["name"] for wf in wfs if wf.get("status", {}).get("phase") == "Succeeded"]
                assert len(done) <= 1, f"run {run}: its job succeeded twice: {done}"
                if done:
                    assert not alive, f"run {run}: {alive} runs after {done[0]} succeeded"
                    continue
                for wf in wfs:
                    if wf["spec"].get("shutdown") == "Stop":
                        uid = wf["metadata"]["uid"]
                        copies = [c["metadata"]["name"] for c in wfs if c["metadata"]["labels"].get(LABEL_COPY_OF) == uid]
                        assert len(copies) == 1, f"run {run}: {wf['metadata']['name']} stopped with copies {copies}"

    @invariant()
    def a_fault_in_one_service_never_changes_another(self) -> None:
        """chat's outcome (replicas, the gate's memory of it, its workflows) is the same with the faulty
        neighbour as in the twin cluster where the neighbour does not exist."""
        main, twin = view(self.main, CLEAN), view(self.twin, CLEAN)
        assert main == twin, f"chat with a faulty neighbour: {main}\nchat alone: {twin}\n{self.main.log.getvalue()[-800:]}"

    def teardown(self) -> None:
        """Drain: faults stop, load falls; every parked job that is not a tenant's broken one ends exactly once."""
        drain(self)


def drain(machine: GateCampaign, ticks: int = 60) -> None:
    w = machine.main
    w.cluster.fail_next.clear()
    w.source.malformed.clear()
    w.cluster.race_at = None
    # Room for any job (up to 3 replicas) above the floor, plus the spare replicas the policy keeps before lending.
    spare = {s: w.policy(s).lend_hysteresis for s in w.services}
    for _ in range(ticks):
        for s in w.services:
            scaler = w.scaler(s)
            more = w.floor(s) + 3 + spare[s] - (min(w.unsure[s][0], w.gate_reading(s, w.value(s))) if s in w.unsure
                                     else w.baseline[s])
            if more > 0 and s not in w.pending:  # room for any job: the owner raises the fleet
                w.owner_sets(s, w.value(s) + more)
                if scaler is not None:
                    scaler.max_replicas += more
                else:
                    w.dep(s).replicas += more
        w.source.demand = {s: 0.0 for s in w.services}
        machine.clean = w.tick()
        machine.ticked = True
        machine.never_more_lent_than_baseline_minus_min()
        for wf in w.workflows():
            if live(wf) and wf["metadata"]["labels"].get(LABEL_STATE) == ADMITTED:
                complete(w.cluster, wf["metadata"]["name"], "Succeeded")
        w.argo()
        machine.no_work_lost_or_duplicated()
        if not any(live(wf) or wf["spec"].get("suspend") for wf in w.workflows()
                   if run_of(wf) not in w.tampered | w.touched and wf.get("status", {}).get("phase") not in FINISHED_PHASES):
            break
    ended: dict[str, list[str]] = {}
    for wf in w.workflows():
        run = run_of(wf)
        if run in w.tampered | w.touched:
            continue
        ended.setdefault(run, [])
        phase = wf.get("status", {}).get("phase")  # a job that succeeded as the stop arrived has ended too
        if phase == "Succeeded" or (phase in FINISHED_PHASES and wf["spec"].get("shutdown") != "Stop"):
            ended[run].append(f"{wf['metadata']['name']}:{phase}")
    # Exactly one success; or, if the job failed by itself, no success (a parked copy of a job that then
    # failed on its own resumes it from its checkpoint: a retry, not a duplicate).
    stuck = {run: names for run, names in ended.items()
             if sum(n.endswith(":Succeeded") for n in names) != 1 and not (names and all(n.endswith(":Failed")
                                                                                       for n in names))}
    if stuck:
        detail = [(wf["metadata"]["name"], wf["metadata"]["labels"], wf["metadata"].get("annotations"), wf["spec"],
                   wf.get("status", {}).get("phase")) for wf in w.workflows() if run_of(wf) in stuck]
        state = {s: (w.baseline[s], w.value(s), w.scaler(s), w.cluster.states.get((NS, s))) for s in w.services}
        raise AssertionError(f"runs that did not end exactly once after the drain: {stuck}\n{detail}\n"
                             f"model/state: {state}\n{w.log.getvalue()[-1500:]}")
