"""One read model of the pool, built from the Kubernetes objects alone (pure: dicts in, views out).

What it reads (the contract the gate writes, see ARCHITECTURE.md and scripts/names.py):
- per service, the ConfigMap `offhours-state-<service>` in the serving namespace, key `state.json`
  (`deploymentUID`, `baseline`, `failedTicks`, `lastDecision` {at, action, required, lent, target, reason});
- the service's Deployment (matched by that UID, else by label `offhours.io/service`): replicas,
  ready replicas, and GPUs per replica from its pod template's `nvidia.com/gpu` limits;
- the research workflows: labels `offhours.io/{service,replicas,state,run-id,copy-of}`, annotations
  `offhours.io/{admitted-at,preempted-at,preemptions,parked-from,waiting-reason,queue-position,
  last-checkpoint,returned-at,gpu-seconds,cancelled-at}`, status phase, times and
  `resourcesDuration["nvidia.com/gpu"]`.

Everything on a workflow is tenant-writable, so every value is parsed defensively: a value that
does not parse is treated as absent, never as an error of the whole pool. Where the gate has not
written a waiting reason, one is computed from the service's state (lendable = baseline -
required - lent) and marked as computed.
"""

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from offhours.scripts.cluster.workflow import checkpoint_prefix, run_identity, tenant_priority, tenant_replicas
from offhours.scripts.names import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_CANCELLED_AT,
    ANNOTATION_GPU_SECONDS,
    ANNOTATION_PARKED_FROM,
    ANNOTATION_PREEMPTED_AT,
    ANNOTATION_PREEMPTIONS,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROGRESS,
    ANNOTATION_PROVENANCE,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_RETURNED_AT,
    ANNOTATION_WAITING_REASON,
    ARGO_CREATOR_LABEL,
    ARGO_SHUTDOWN_STRATEGIES,
    CHECK_PARAMETERS,
    GPU_RESOURCE,
    LABEL_COPY_OF,
    LABEL_REPLICAS,
    LABEL_SERVICE,
    LABEL_STATE,
    LABEL_USER,
    RETURN_GPUS,
    STATE_ADMITTED,
    STATE_CONFIGMAP_PREFIX,
    STATE_KEY,
    STATE_PREEMPTED,
)
from offhours.scripts.policy.record import ServiceRecord

GPU = GPU_RESOURCE


# What a researcher sees, per workflow and per run. One meaning per word, in every verb and the console:
# - waiting: not admitted (parked, or run straight from Argo with no pod of its own started): it holds no
#   lent GPUs and waits for the gate's admission, as a Kueue workload waits for its quota;
# - preempted: it held lent GPUs (the gate admitted or adopted it) and was stopped to give them back;
# - stopped-unadmitted: stopped by the gate before it was ever admitted (a copy waits in its place): no
#   GPUs were lent, nothing was lost, and it is not a preemption;
# - a run is one research job (one run id) with every copy of it; a workflow is one Argo Workflow (a copy).
WAITING, ADMITTED, RUNNING, PREEMPTED = "waiting", "admitted", "running", "preempted"
STOPPED_UNADMITTED = "stopped-unadmitted"
RESUMED_WAITING = "preempted→waiting"
SUCCEEDED, FAILED, CANCELLED = "succeeded", "failed", "cancelled"
FINISHED = (SUCCEEDED, FAILED, CANCELLED, PREEMPTED, STOPPED_UNADMITTED)
ENDED_PHASES = ("Succeeded", "Failed", "Error")  # Argo's final workflow phases
UNKNOWN_USER = "unknown"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def parse_time(value: Any) -> datetime | None:
    """Read an RFC 3339 time or epoch seconds; None for anything else."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(float(value), timezone.utc)
        text = str(value).strip()
        try:
            return datetime.fromtimestamp(float(text), timezone.utc)
        except ValueError:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def _int(value: Any, default: int | None = None) -> int | None:
    if isinstance(value, bool):
        return default
    try:
        return int(str(value).strip()) if value is not None else default
    except ValueError:
        return default


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None  # NaN, infinities and negatives are not durations


def ordinal(position: int) -> str:
    """`3` -> `third` (then `11th`)."""
    return ORDINALS[position - 1] if 1 <= position <= len(ORDINALS) else f"{position}th"


@dataclass(frozen=True)
class ServiceView:
    """One serving service: what it runs with, what it needs, what it lends, and the gate's last word."""

    name: str
    namespace: str
    deployment: str | None = None
    baseline: int | None = None
    replicas: int | None = None  # in service: the Deployment's spec.replicas
    ready: int | None = None
    required: int | None = None
    lent: int | None = None
    target: int | None = None
    action: str | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    failed_ticks: int = 0
    gpus_per_replica: int | None = None
    problem: str | None = None  # why part of this service could not be read

    @property
    def lendable(self) -> int | None:
        """Replicas the gate could still lend: baseline - required - lent (never below 0)."""
        if self.baseline is None or self.required is None:
            return None
        return max(0, self.baseline - self.required - (self.lent or 0))

    @property
    def gpus_lent(self) -> int | None:
        """GPUs lent to research now."""
        if self.lent is None or self.gpus_per_replica is None:
            return None
        return self.lent * self.gpus_per_replica


@dataclass(frozen=True)
class JobView:
    """One research workflow (one copy of a run)."""

    name: str
    namespace: str
    uid: str
    run_id: str
    service: str
    replicas: int
    state: str
    phase: str
    created: datetime | None
    started: datetime | None = None
    finished: datetime | None = None
    admitted: datetime | None = None
    preempted: datetime | None = None
    returned: datetime | None = None
    cancelled: datetime | None = None
    last_checkpoint: datetime | None = None
    preemptions: int = 0
    priority: int = 0
    gpu_seconds: float | None = None
    copy_of: str | None = None
    parked_from: str | None = None
    position: int | None = None
    reason: str | None = None
    reason_computed: bool = False
    user: str = UNKNOWN_USER
    labels: Mapping[str, str] = field(default_factory=dict)
    # Every run id it answers to (its run-id parameter, where its steps write checkpoints, and its label): a live
    # workflow is a live copy of each. `run_id` is the one its checkpoints are under, if any (else its name).
    run_ids: tuple[str, ...] = ()
    run_problem: str | None = None  # why its run id cannot be trusted (the gate never admits it)
    checkpoint_prefix: str | None = None  # where its steps record progress, as the gate reads it
    provenance: str | None = None  # its provenance record as written (read only as its run's: runtime.provenance)
    # When a pod of its work (not a CPU-only check or exit hook) first got past Pending, by Argo's node startedAt
    # (the pod's creation: Argo records no running-since); None while none has. Lent GPUs before it are unused.
    work_started: datetime | None = None

    @property
    def ended(self) -> bool:
        """Whether Argo says this workflow is over (finished, or in a final phase), not merely asked to stop."""
        return self.finished is not None or self.phase in ENDED_PHASES

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked (cancel, reclaim) and Argo has not finished the workflow yet: its pods may still run."""
        return self.state in FINISHED and not self.ended

    @property
    def is_preemption(self) -> bool:
        """Whether this workflow counts as a preemption: the one definition the metric, usage, report and pages use.

        Stopped for a reclaim while it held lent GPUs; a stop before admission (no GPUs lent) is none.
        """
        return self.state == PREEMPTED


@dataclass(frozen=True)
class TimelineEntry:
    """One moment in a run's life."""

    at: datetime
    what: str
    workflow: str


@dataclass(frozen=True)
class RunView:
    """One research run: every copy of it (the original and the copies parked after each preemption)."""

    run_id: str
    namespace: str
    service: str
    copies: tuple[JobView, ...]  # oldest first

    @property
    def current(self) -> JobView:
        """The newest copy: the one that says where the run is now."""
        return self.copies[-1]

    @property
    def name(self) -> str:
        """The name of the newest copy."""
        return self.current.name

    @property
    def state(self) -> str:
        """Waiting / admitted / running / preempted→waiting / succeeded / failed / cancelled / stopped-unadmitted."""
        state = self.current.state
        if state == WAITING and self.preemptions:
            return RESUMED_WAITING
        return state

    @property
    def preemptions(self) -> int:
        """Times the run was stopped for a reclaim while it held lent GPUs (a stop before admission is none).

        Each parked copy counts the stops before it (its `preemptions` annotation), stops before admission
        included; those of them still readable are taken off, so a run whose older copies were deleted still
        counts its real preemptions.
        """
        counted = sum(1 for c in self.copies if c.is_preemption)
        unadmitted = sum(1 for c in self.copies if c.state == STOPPED_UNADMITTED)
        return max(counted, max(c.preemptions for c in self.copies) - unadmitted)

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds used by all copies (Argo's resourcesDuration, else the exit hook's annotation)."""
        return sum(c.gpu_seconds or 0.0 for c in self.copies)

    @property
    def submitted(self) -> datetime | None:
        """When the first copy was created."""
        return self.copies[0].created

    @property
    def last_checkpoint(self) -> datetime | None:
        """The newest checkpoint any copy recorded."""
        times = [c.last_checkpoint for c in self.copies if c.last_checkpoint is not None]
        return max(times) if times else None

    def timeline(self) -> list[TimelineEntry]:
        """Submit, admit, start, preempt, park, resume, finish: in time order."""
        entries: list[TimelineEntry] = []
        checkpoints: set[datetime] = set()
        before: JobView | None = None
        unadmitted = 0  # stops before admission so far: the copies' own count includes them
        for index, c in enumerate(self.copies):
            if c.created is not None:
                if index == 0:
                    what = "submitted"
                elif c.copy_of is None and c.parked_from is None:  # no copy of another: submitted again
                    what = f"resubmitted as {c.name}"
                elif before is not None and before.state == STOPPED_UNADMITTED:
                    what = f"parked as {c.name} to wait for admission"
                else:
                    what = f"parked again as {c.name} after preemption {max(1, c.preemptions - unadmitted)}"
                entries.append(TimelineEntry(c.created, what, c.name))
            before = c
            unadmitted += c.state == STOPPED_UNADMITTED
            if c.admitted is not None:
                entries.append(TimelineEntry(c.admitted, "admitted" if index == 0 else "resumed (admitted)", c.name))
            if c.started is not None and c.state != WAITING:
                entries.append(TimelineEntry(c.started, "started", c.name))
            if c.last_checkpoint is not None and c.last_checkpoint not in checkpoints:
                checkpoints.add(c.last_checkpoint)  # parked copies carry their original's last checkpoint
                entries.append(TimelineEntry(c.last_checkpoint, "checkpoint", c.name))
            if c.preempted is not None and c.state == STOPPED_UNADMITTED:
                entries.append(TimelineEntry(c.preempted, "stopped before admission (it held no lent GPUs)", c.name))
            elif c.preempted is not None:
                entries.append(TimelineEntry(c.preempted, "preempted: its replicas went back to serving", c.name))
            if c.cancelled is not None:
                entries.append(TimelineEntry(c.cancelled, "cancelled", c.name))
            if c.finished is not None and c.state in FINISHED:
                entries.append(TimelineEntry(c.finished, f"finished ({c.phase})", c.name))
            if c.returned is not None:
                entries.append(TimelineEntry(c.returned, "GPUs returned", c.name))
        return sorted(entries, key=lambda e: e.at)


@dataclass(frozen=True)
class Pool:
    """Services and runs, read at one moment."""

    services: tuple[ServiceView, ...]
    runs: tuple[RunView, ...]
    read_at: datetime
    problems: tuple[str, ...] = ()

    def service(self, name: str) -> ServiceView | None:
        """Return the service called `name`, if known."""
        return next((s for s in self.services if s.name == name), None)

    def find(self, name: str) -> RunView | None:
        """Return the run that has a copy named `name`, or whose run id is `name`."""
        for run in self.runs:
            if any(c.name == name for c in run.copies):
                return run
        return next((r for r in self.runs if r.run_id == name), None)

    @property
    def jobs(self) -> list[JobView]:
        """Every workflow copy."""
        return [c for r in self.runs for c in r.copies]


# -- services ---------------------------------------------------------------------------------
def _state_json(configmap: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    text = (configmap.get("data") or {}).get(STATE_KEY)
    if not text:
        return {}, "no state.json in the state ConfigMap"
    try:
        state = json.loads(text)
    except json.JSONDecodeError as err:
        return {}, f"state.json is not JSON ({err.msg})"
    except RecursionError:  # hand-edited past the parser's depth: this service's problem, not the pool's
        return {}, "state.json is not JSON (nested too deeply)"
    return (state, None) if isinstance(state, dict) else ({}, "state.json is not an object")


def _gpus_per_replica(deployment: Mapping[str, Any]) -> int | None:
    containers = ((((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [])
    total, seen = 0, False
    for container in containers:
        resources = container.get("resources") or {} if isinstance(container, dict) else {}
        value = (resources.get("limits") or {}).get(GPU, (resources.get("requests") or {}).get(GPU))
        count = _int(value)
        if count is not None:
            total, seen = total + count, True
    return total if seen else None


def service_views(configmaps: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]],
                  namespace: str) -> list[ServiceView]:
    """One view per service that has a state ConfigMap or a Deployment labelled offhours.io/service."""
    deps = [d for d in deployments if isinstance(d, Mapping)]
    by_uid = {(d.get("metadata") or {}).get("uid"): d for d in deps}
    by_service = {((d.get("metadata") or {}).get("labels") or {}).get(LABEL_SERVICE): d for d in deps}
    views: dict[str, ServiceView] = {}
    for cm in configmaps:
        name = str((cm.get("metadata") or {}).get("name", ""))
        if not name.startswith(STATE_CONFIGMAP_PREFIX):
            continue
        service = name[len(STATE_CONFIGMAP_PREFIX):]
        state, problem = _state_json(cm)
        # The gate's own decoder of its record (policy/record.py): what it reads is what is shown; a record it
        # reads as no memory (a field of the wrong type) shows none, with why.
        record = ServiceRecord.from_json((cm.get("data") or {}).get(STATE_KEY))
        if problem is None and state and record == ServiceRecord():
            problem = "the gate reads this state.json as no memory: a field has the wrong type or is out of range"
        dep = (by_uid.get(record.deployment_uid) if record.deployment_uid else None) or by_service.get(service)
        decision: dict[str, Any] = record.last_decision if isinstance(record.last_decision, dict) else {}
        views[service] = _with_deployment(ServiceView(
            name=service, namespace=namespace, baseline=record.baseline,
            required=_int(decision.get("required")), lent=_int(decision.get("lent")), target=_int(decision.get("target")),
            action=str(decision["action"]) if decision.get("action") else None,
            reason=str(decision["reason"]) if decision.get("reason") else None,
            decided_at=parse_time(decision.get("at")), failed_ticks=record.decision.failed_ticks,
            problem=problem), dep)
    for labelled, dep in by_service.items():
        if isinstance(labelled, str) and labelled and labelled not in views:
            service = labelled
            views[service] = _with_deployment(ServiceView(
                name=service, namespace=namespace,
                problem=f"no ConfigMap {STATE_CONFIGMAP_PREFIX}{service}: the gate has not recorded this service yet"), dep)
    return sorted(views.values(), key=lambda v: v.name)


def _with_deployment(view: ServiceView, dep: Mapping[str, Any] | None) -> ServiceView:
    if dep is None:
        problem = view.problem or "its Deployment was not found"
        return dataclasses.replace(view, problem=problem)
    spec, status = dep.get("spec") or {}, dep.get("status") or {}
    return dataclasses.replace(view, deployment=(dep.get("metadata") or {}).get("name"),
                               replicas=_int(spec.get("replicas"), 1), ready=_int(status.get("readyReplicas"), 0),
                               gpus_per_replica=_gpus_per_replica(dep))


# -- jobs -------------------------------------------------------------------------------------
def _job_state(labels: Mapping[str, str], annotations: Mapping[str, str], spec: Mapping[str, Any], phase: str,
               nodes: Any = None, finished: bool = False) -> str:
    offhours_state = labels.get(LABEL_STATE)
    admitted = parse_time(annotations.get(ANNOTATION_ADMITTED_AT)) is not None
    # The gate's stop and a cancel both set `spec.shutdown`; `argo resubmit` copies the label and the
    # annotations but not the shutdown: the copy runs again under them, it is not stopped.
    # Argo stops a workflow only for `Stop` or `Terminate`: any other value a tenant writes runs its pods.
    shutdown = spec.get("shutdown") in ARGO_SHUTDOWN_STRATEGIES
    stopped = shutdown or finished or phase in ("Succeeded", "Failed", "Error")
    if offhours_state == STATE_PREEMPTED and stopped:
        # Stopped for a reclaim: a preemption only if the gate had lent it GPUs (admitted or adopted it).
        return PREEMPTED if admitted else STOPPED_UNADMITTED
    if phase == "Succeeded" and offhours_state != STATE_PREEMPTED:
        return SUCCEEDED  # a cancel that raced completion: the cluster's final state wins over what was asked
    if (annotations.get(ANNOTATION_CANCELLED_AT) and stopped) or (shutdown and phase in ("Failed", "Error", "")):
        return CANCELLED if offhours_state != STATE_PREEMPTED else PREEMPTED
    if phase == "Succeeded":
        return SUCCEEDED
    if phase in ("Failed", "Error"):
        return FAILED
    if spec.get("suspend") and offhours_state != STATE_ADMITTED:
        return WAITING
    if offhours_state == STATE_ADMITTED:
        return RUNNING if phase == "Running" else ADMITTED
    # Not admitted (`argo submit --from`): Argo says Running while its pods are Unschedulable; it runs only
    # once a pod of its own work has started.
    return RUNNING if phase == "Running" and _work_started(nodes) else WAITING


def _work_started(nodes: Any) -> bool:
    """Whether a pod of the workflow's work (not its CPU-only parameter check) has started or finished."""
    for node in nodes.values() if isinstance(nodes, Mapping) else []:
        if not isinstance(node, Mapping) or node.get("type") != "Pod":
            continue
        ref = node.get("templateRef")
        template = ref.get("template") if isinstance(ref, Mapping) else node.get("templateName")
        if template == CHECK_PARAMETERS:
            continue
        if node.get("phase") in ("Running", "Succeeded", "Failed", "Error"):
            return True
    return False


def _first_pod_start(nodes: Any) -> datetime | None:
    """When the workflow's first pod started (Argo's `status.nodes` of type Pod), if any did."""
    starts = [parse_time(n.get("startedAt")) for n in (nodes.values() if isinstance(nodes, Mapping) else [])
              if isinstance(n, Mapping) and n.get("type") == "Pod"]
    return min((t for t in starts if t is not None), default=None)


_NODE_ENDED = ("Succeeded", "Failed", "Error", "Skipped", "Omitted")
_NOT_WORK = (CHECK_PARAMETERS, RETURN_GPUS)  # CPU-only pods: the parameter check and the exit hook hold no lent GPUs


def _work_pods(nodes: Any) -> list[Mapping[str, Any]]:
    """Argo's Pod nodes of the workflow's work: those that hold its GPUs."""
    pods = []
    for node in nodes.values() if isinstance(nodes, Mapping) else []:
        if not isinstance(node, Mapping) or node.get("type") != "Pod":
            continue
        ref = node.get("templateRef")
        template = ref.get("template") if isinstance(ref, Mapping) else node.get("templateName")
        if template not in _NOT_WORK:
            pods.append(node)
    return pods


def _work_start(nodes: Any) -> datetime | None:
    """When the first work pod that got past Pending was started (Argo's startedAt), if any did."""
    starts = [parse_time(n.get("startedAt")) for n in _work_pods(nodes)
              if n.get("phase") in ("Running", "Succeeded", "Failed", "Error")]
    return min((t for t in starts if t is not None), default=None)


def gpus_returned_at(nodes: Any, marked: datetime | None, finished: datetime | None) -> datetime | None:
    """When the workflow's GPUs were given back, as the cluster shows it: its last work pod observed ended.

    A stop request, or the exit hook's `returned-at` mark, precedes the pod's end by up to its grace period (it
    trains and saves meanwhile): while a work pod runs nothing is returned, and a pod that ended after the mark
    moves the return to its end. Where Argo's nodes do not say when (offloaded, or none ran), the mark stands
    once Argo finished the workflow (it finishes after its pods).
    """
    if marked is None:  # no return was made (the exit hook or the gate marks it): none to show
        return None
    pods = _work_pods(nodes)
    if any(n.get("phase") in ("Pending", "Running") for n in pods):
        return None
    ends = [parse_time(n.get("finishedAt")) if n.get("phase") in _NODE_ENDED else None for n in pods]
    if pods and all(t is not None for t in ends):
        return max(marked, *(t for t in ends if t is not None))
    return marked if finished is not None else None


_GATE_TIMES = (ANNOTATION_ADMITTED_AT, ANNOTATION_PREEMPTED_AT, ANNOTATION_RETURNED_AT, ANNOTATION_CANCELLED_AT)
MARK_SKEW = timedelta(seconds=60)  # a gate's clock against the API server's: a mark this much early is still ours


def _before(value: str, created: datetime | None) -> bool:
    at = parse_time(value)
    return at is not None and created is not None and at < created - MARK_SKEW


def job_view(wf: Mapping[str, Any]) -> JobView | None:
    """Read one workflow; None if it is not offhours' (no service label) or has no name."""
    meta = wf.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    service, name = labels.get(LABEL_SERVICE), meta.get("name")
    if not service or not name:
        return None
    spec, status = wf.get("spec") or {}, wf.get("status") or {}
    phase = str(status.get("phase") or "")
    created = parse_time(meta.get("creationTimestamp"))
    # A mark of the gate from before the workflow existed is a copy's (`argo resubmit` copies every annotation).
    annotations = {k: v for k, v in annotations.items() if k not in _GATE_TIMES or not _before(v, created)}
    state = _job_state(labels, annotations, spec, phase, status.get("nodes"), bool(status.get("finishedAt")))
    replicas, _ = tenant_replicas(labels.get(LABEL_REPLICAS))  # the gate's own reading of tenant-written values
    gpu_seconds = _float((status.get("resourcesDuration") or {}).get(GPU))
    if gpu_seconds is None:
        gpu_seconds = _float(annotations.get(ANNOTATION_GPU_SECONDS))
    position = _int(annotations.get(ANNOTATION_QUEUE_POSITION))
    admitted = parse_time(annotations.get(ANNOTATION_ADMITTED_AT))
    # Argo stamps startedAt on a suspended workflow when it first sees it: the job starts with its first pod
    # (a parked job: after its admission; an adopted one: before it).
    started = _first_pod_start(status.get("nodes"))
    if started is None:
        started = parse_time(status.get("startedAt"))
        started = max(started, admitted) if started is not None and admitted is not None else started
    identity = run_identity(dict(wf))
    return JobView(
        name=str(name), namespace=str(meta.get("namespace") or ""), uid=str(meta.get("uid") or ""),
        run_id=identity.run_id or str(name), run_ids=identity.ids, run_problem=identity.problem,
        checkpoint_prefix=checkpoint_prefix(dict(wf)),
        service=service, replicas=replicas,
        state=state, phase=phase, created=created, started=started,
        finished=parse_time(status.get("finishedAt")), admitted=admitted,
        preempted=parse_time(annotations.get(ANNOTATION_PREEMPTED_AT)),
        returned=gpus_returned_at(status.get("nodes"), parse_time(annotations.get(ANNOTATION_RETURNED_AT)),
                                  parse_time(status.get("finishedAt"))),
        cancelled=parse_time(annotations.get(ANNOTATION_CANCELLED_AT)), work_started=_work_start(status.get("nodes")),
        last_checkpoint=parse_time(annotations.get(ANNOTATION_PROGRESS)),
        preemptions=max(0, _int(annotations.get(ANNOTATION_PREEMPTIONS), 0) or 0),
        priority=tenant_priority(annotations.get(ANNOTATION_PRIORITY))[0],
        gpu_seconds=gpu_seconds, copy_of=labels.get(LABEL_COPY_OF), parked_from=annotations.get(ANNOTATION_PARKED_FROM),
        position=position if position is not None and position >= 0 else None,
        reason=(annotations.get(ANNOTATION_WAITING_REASON) or None) if state == WAITING else None,
        user=labels.get(ARGO_CREATOR_LABEL) or labels.get(LABEL_USER) or UNKNOWN_USER, labels=labels,
        provenance=annotations.get(ANNOTATION_PROVENANCE),
    )


def computed_reason(job: JobView, service: ServiceView | None, position: int) -> str:
    """Why a parked job waits, from the service's recorded state (when the gate wrote no reason)."""
    if job.run_problem:  # what the gate reads the same way: it never admits this one, whatever the service lends
        return f"not admitted: {job.run_problem}"
    where = f"{ordinal(position)} in the queue"
    if service is None:
        return f"waiting: no service {job.service} is known to the gate; {where}"
    if service.baseline is None or service.required is None:
        if service.failed_ticks:
            return (f"waiting: the gate has had no usable load data for {service.name} for {service.failed_ticks} "
                    f"tick(s), so it lends nothing; {where}")
        return f"waiting: the gate has not recorded a decision for {service.name} yet; {where}"
    lendable = service.lendable or 0
    lent = f" and lends {service.lent} already" if service.lent else ""
    if lendable >= job.replicas and position == 1:
        return (f"next: {service.name} has {lendable} lendable replica(s) and this job needs {job.replicas}; "
                f"the gate admits it on its next tick")
    head = (f"waiting: {service.name} needs {service.required} of its {service.baseline} replicas{lent}; "
            f"{lendable} {'is' if lendable == 1 else 'are'} lendable and this job needs {job.replicas}; {where}")
    if lendable >= job.replicas:
        head += " behind jobs that are admitted first"
    return head


def _outside_queue(job: JobView) -> bool:
    """Whether the gate wrote that this job is outside the queue (position 0, with its reason).

    A copy whose original has not stopped yet waits outside the queue; a 0 without the gate's
    reason is not trusted (a tenant may write the annotation) and the position is computed.
    """
    return job.position == 0 and job.reason is not None


def _queue(jobs: list[JobView], services: Mapping[str, ServiceView]) -> list[JobView]:
    """Fill in queue positions and reasons of waiting jobs (the gate's when written, else computed)."""
    out: list[JobView] = []
    waiting: dict[tuple[str, str], list[JobView]] = {}
    for job in jobs:
        if job.state == WAITING and not _outside_queue(job):
            waiting.setdefault((job.namespace, job.service), []).append(job)
    order: dict[str, int] = {}
    for queue in waiting.values():
        epoch = datetime.min.replace(tzinfo=timezone.utc)
        # The gate's admission order: priority (high first), then age (old first).
        for index, job in enumerate(sorted(queue, key=lambda j: (-j.priority, j.created or epoch, j.name)), start=1):
            order[job.uid or job.name] = index
    for job in jobs:
        if job.state != WAITING:
            out.append(job)
            continue
        position = 0 if _outside_queue(job) else job.position or order[job.uid or job.name]
        if job.reason:
            out.append(dataclasses.replace(job, position=position))
        else:
            reason = computed_reason(job, services.get(job.service), position)
            out.append(dataclasses.replace(job, position=position, reason=reason, reason_computed=True))
    return out


def _copy_order(copies: list[JobView], epoch: datetime) -> Any:
    """Return the sort key of a run's copies: by chain (an original and its parked copies), then along the chain.

    A chain is ordered by its original's creation, a copy within it by its count of stops: so a resubmission
    of the run id (a new original, counting no preemption of its own) is newer than the old chain's parked
    copies, however many stops they count.
    """
    by_uid = {c.uid: c for c in copies if c.uid}
    by_name = {c.name: c for c in copies}
    links = len(copies)  # read now: a list being sorted is empty to its key

    def root(job: JobView) -> JobView:
        for _ in range(links):  # a loop of tenant-written links ends here
            parent = by_uid.get(job.copy_of or "") or by_name.get(job.parked_from or "")
            if parent is None or parent is job:
                break
            job = parent
        return job

    def key(job: JobView) -> tuple[datetime, str, int, datetime, str]:
        first = root(job)
        return (first.created or epoch, first.name, job.preemptions, job.created or epoch, job.name)

    return key


def _runs(jobs: list[JobView]) -> list[RunView]:
    groups: dict[tuple[str, str], list[JobView]] = {}
    for job in jobs:
        groups.setdefault((job.namespace, job.run_id), []).append(job)
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    runs = []
    for (namespace, run_id), copies in groups.items():
        copies.sort(key=_copy_order(copies, epoch))
        # A parked copy is created by the gate, not its submitter: the run's user is its first known one.
        user = next((c.user for c in copies if c.user != UNKNOWN_USER), UNKNOWN_USER)
        copies = [dataclasses.replace(c, user=user) if c.user == UNKNOWN_USER else c for c in copies]
        runs.append(RunView(run_id, namespace, copies[-1].service, tuple(copies)))
    return sorted(runs, key=lambda r: (r.submitted or epoch, r.run_id), reverse=True)


SKIPPED_WORKFLOW = "workflow "  # how a problem naming a skipped workflow begins (no read error begins so)


def names_a_workflow(problem: str) -> bool:
    """Whether a pool problem names a (skipped) workflow: what a reader who may not list workflows is not shown."""
    return problem.startswith(SKIPPED_WORKFLOW)


def build_pool(configmaps: Iterable[Mapping[str, Any]], deployments: Iterable[Mapping[str, Any]],
               workflows: Iterable[Mapping[str, Any]], serving_namespace: str, now: datetime | None = None,
               problems: Iterable[str] = ()) -> Pool:
    """Build the pool from the objects as the API returns them (JSON dicts)."""
    services = service_views(configmaps, deployments, serving_namespace)
    by_name = {s.name: s for s in services}
    jobs, skipped = [], []
    for wf in workflows:
        try:
            job = job_view(wf) if isinstance(wf, Mapping) else None
        except Exception as err:  # noqa: BLE001 - one malformed workflow is skipped and named, never the whole pool
            skipped.append(f"{SKIPPED_WORKFLOW}{workflow_name(wf)} skipped: it cannot be read ({type(err).__name__})")
            continue
        if job is not None:
            jobs.append(job)
    return Pool(tuple(services), tuple(_runs(_queue(jobs, by_name))), now or datetime.now(timezone.utc),
                (*problems, *skipped))


def workflow_name(wf: Any) -> str:
    """`namespace/name` of a workflow however malformed, for naming it in a problem (never raises)."""
    meta = wf.get("metadata") if isinstance(wf, Mapping) else None
    if not isinstance(meta, Mapping):
        return "(without metadata)"
    return f"{str(meta.get('namespace') or '')[:63]}/{str(meta.get('name') or '(unnamed)')[:253]}"


def gpus_of(job: JobView | RunView, pool: Pool) -> int | None:
    """GPUs a job borrows: replicas x GPUs per replica of its service (None if that is unknown)."""
    service = pool.service(job.service)
    replicas = job.replicas if isinstance(job, JobView) else job.current.replicas
    if service is None or service.gpus_per_replica is None:
        return None
    return replicas * service.gpus_per_replica
