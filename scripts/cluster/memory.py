"""An in-memory `Cluster`: the same contract as the Kubernetes one, for tests and the simulator.

Faults can be injected per call (`fail_next`), to prove the gate's behaviour when the API
answers with conflicts or server errors.
"""

import copy
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.cluster.base import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_PARKED_FROM,
    ANNOTATION_PREEMPTIONS,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROGRESS,
    FINISHED_PHASES,
    LABEL_REPLICAS,
    LABEL_SERVICE,
    LABEL_STATE,
    STATE_ADMITTED,
    STATE_PARKED,
    STATE_PREEMPTED,
    STATE_RETURNED,
    ClusterError,
    Deployment,
    Pod,
)
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job


@dataclass
class Event:
    """A recorded event."""

    namespace: str
    kind: str
    name: str
    reason: str
    message: str
    warning: bool
    count: int = 1


@dataclass
class MemoryCluster:
    """Deployments, pods and Argo workflows held in dictionaries."""

    deployments: dict[tuple[str, str], Deployment] = field(default_factory=dict)
    pods: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)
    workflows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    lease_holder: str | None = None
    lease_until: float = 0.0
    clock: float = 0.0
    fail_next: dict[str, list[Exception]] = field(default_factory=dict)

    # -- test helpers -----------------------------------------------------------------------
    def add_deployment(self, namespace: str, service: str, replicas: int, pod_ips: list[str] | None = None,
                       name: str | None = None) -> Deployment:
        """Add an inference Deployment with ready pods."""
        dep = Deployment(namespace, name or service, service, replicas, {}, {"app": service})
        self.deployments[(namespace, dep.name)] = dep
        ips = pod_ips if pod_ips is not None else [f"10.0.0.{i + 1}" for i in range(replicas)]
        self.pods[(namespace, dep.name)] = [Pod(f"{dep.name}-{i}", ip) for i, ip in enumerate(ips)]
        return dep

    def add_workflow(self, namespace: str, name: str, service: str, replicas: int, state: str = STATE_PARKED,
                     priority: int = 0, created: float = 0.0, phase: str = "Running",
                     progress_at: float | None = None) -> dict[str, Any]:
        """Add an offhours research workflow."""
        wf = {
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {
                "name": name, "namespace": namespace, "creationTimestamp": created,
                "labels": {LABEL_SERVICE: service, LABEL_REPLICAS: str(replicas), "offhours.io/managed": "true",
                           **({LABEL_STATE: state} if state else {})},
                "annotations": {ANNOTATION_PRIORITY: str(priority),
                                **({ANNOTATION_PROGRESS: str(progress_at)} if progress_at is not None else {})},
            },
            "spec": {"workflowTemplateRef": {"name": "offhours-job"},
                     "arguments": {"parameters": [{"name": "service", "value": service},
                                                  {"name": "replicas", "value": str(replicas)}]},
                     **({"suspend": True} if state == STATE_PARKED else {})},
            "status": {"phase": phase},
        }
        self.workflows[(namespace, name)] = wf
        return wf

    def _call(self, what: str) -> None:
        self.calls.append(what)
        queued = self.fail_next.get(what.split(" ")[0])
        if queued:
            raise queued.pop(0)

    # -- Cluster ----------------------------------------------------------------------------
    def deployment(self, namespace: str, service: str, name: str | None = None) -> Deployment:
        """Return the Deployment of `service`."""
        self._call(f"get-deployment {service}")
        for (ns, dname), dep in self.deployments.items():
            if ns == namespace and (dname == name if name else dep.service == service):
                return copy.deepcopy(dep)
        raise ClusterError(f"no Deployment labelled offhours.io/service={service} in namespace {namespace}")

    def annotate_deployment(self, dep: Deployment, annotations: dict[str, str]) -> None:
        """Merge annotations into the Deployment."""
        self._call(f"annotate-deployment {dep.name}")
        self.deployments[(dep.namespace, dep.name)].annotations.update(annotations)
        dep.annotations.update(annotations)

    def scale(self, dep: Deployment, replicas: int) -> None:
        """Set the Deployment's replicas."""
        self._call(f"scale {dep.name} {replicas}")
        self.deployments[(dep.namespace, dep.name)].replicas = replicas
        dep.replicas = replicas

    def ready_pods(self, dep: Deployment) -> list[Pod]:
        """Return the Deployment's ready pods (as many as its replicas)."""
        self._call(f"list-pods {dep.name}")
        return list(self.pods.get((dep.namespace, dep.name), []))[: self.deployments[(dep.namespace, dep.name)].replicas]

    def jobs(self, namespace: str, service: str) -> list[Job]:
        """Return the unfinished offhours workflows of `service`."""
        self._call(f"list-workflows {service}")
        return [job for (ns, _), wf in sorted(self.workflows.items())
                if ns == namespace and (job := workflow_job(wf, service)) is not None]

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return a workflow object."""
        self._call(f"get-workflow {name}")
        wf = self.workflows.get((namespace, name))
        return copy.deepcopy(wf) if wf else None

    def admit(self, namespace: str, job: Job) -> None:
        """Resume and mark admitted."""
        self._call(f"admit {job.name}")
        wf = self.workflows[(namespace, job.name)]
        wf["spec"].pop("suspend", None)
        self._mark_admitted(wf)

    def adopt(self, namespace: str, job: Job) -> None:
        """Mark admitted."""
        self._call(f"adopt {job.name}")
        self._mark_admitted(self.workflows[(namespace, job.name)])

    def _mark_admitted(self, wf: dict[str, Any]) -> None:
        wf["metadata"]["labels"][LABEL_STATE] = STATE_ADMITTED
        stamp = datetime.fromtimestamp(self.clock, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        wf["metadata"].setdefault("annotations", {})[ANNOTATION_ADMITTED_AT] = stamp

    def stop(self, namespace: str, job: Job) -> None:
        """Stop and mark preempted."""
        self._call(f"stop {job.name}")
        wf = self.workflows[(namespace, job.name)]
        wf["spec"]["shutdown"] = "Stop"
        wf["metadata"]["labels"][LABEL_STATE] = STATE_PREEMPTED

    def park_copy(self, namespace: str, job: Job) -> str:
        """Create a parked copy."""
        self._call(f"park-copy {job.name}")
        new = build_parked_copy(self.workflows[(namespace, job.name)])
        name = str(new["metadata"]["name"])
        if (namespace, name) not in self.workflows:  # idempotent: a retried park finds its copy
            new["metadata"]["creationTimestamp"] = self.clock
            self.workflows[(namespace, name)] = new
        return name

    def annotate_workflow(self, namespace: str, name: str, annotations: dict[str, str], labels: dict[str, str]) -> None:
        """Merge annotations and labels."""
        self._call(f"annotate-workflow {name}")
        meta = self.workflows[(namespace, name)]["metadata"]
        meta.setdefault("annotations", {}).update(annotations)
        meta.setdefault("labels", {}).update(labels)

    def record_event(self, namespace: str, kind: str, name: str, reason: str, message: str, warning: bool = False,
                     aggregate: bool = False) -> None:
        """Record an event (one per object and reason, counted, when `aggregate`)."""
        if aggregate:
            for event in self.events:
                if (event.namespace, event.kind, event.name, event.reason) == (namespace, kind, name, reason):
                    event.count += 1
                    event.message, event.warning = message, warning
                    return
        self.events.append(Event(namespace, kind, name, reason, message, warning))

    def acquire_lease(self, namespace: str, holder: str, seconds: int) -> bool:
        """Take the lease unless someone else holds an unexpired one."""
        self._call(f"acquire-lease {holder}")
        if self.lease_holder not in (None, holder) and self.lease_until > self.clock:
            return False
        self.lease_holder, self.lease_until = holder, self.clock + seconds
        return True

    def release_lease(self, namespace: str, holder: str) -> None:
        """Release the lease."""
        if self.lease_holder == holder:
            self.lease_holder, self.lease_until = None, 0.0


def workflow_job(wf: dict[str, Any], service: str | None = None) -> Job | None:
    """Read a workflow as a `Job`, or None if it is finished, stopped or not offhours'."""
    meta = wf.get("metadata", {})
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if service is not None and labels.get(LABEL_SERVICE) != service:
        return None
    if (wf.get("status") or {}).get("phase") in FINISHED_PHASES or (wf.get("spec") or {}).get("shutdown"):
        return None
    state = labels.get(LABEL_STATE)
    if state in (STATE_PREEMPTED, STATE_RETURNED):
        return None
    if (wf.get("spec") or {}).get("suspend") and state != STATE_ADMITTED:
        state = PARKED
    elif state != STATE_ADMITTED:
        state = "unmanaged"
    else:
        state = ADMITTED
    try:
        replicas = int(labels.get(LABEL_REPLICAS, "0"))
    except ValueError:
        replicas = 0
    progress = annotations.get(ANNOTATION_PROGRESS)
    started = (wf.get("status") or {}).get("startedAt")
    return Job(
        name=meta["name"],
        service=labels.get(LABEL_SERVICE, ""),
        replicas=replicas,
        state=state,
        priority=_int(annotations.get(ANNOTATION_PRIORITY), 0),
        created=_timestamp(meta.get("creationTimestamp")),
        progress_at=_timestamp(progress) if progress else None,
        started=_timestamp(started) if started else None,
        parked_from=annotations.get(ANNOTATION_PARKED_FROM),
        checkpoint_prefix=_checkpoint_prefix(wf),
    )


def _checkpoint_prefix(wf: dict[str, Any]) -> str | None:
    params = {p.get("name"): p.get("value") for p in ((wf.get("spec") or {}).get("arguments") or {}).get("parameters")
              or [] if isinstance(p, dict)}
    uri, run_id = params.get("checkpoint-uri"), params.get("run-id")
    return f"{str(uri).rstrip('/')}/{run_id}" if uri and run_id else None


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _timestamp(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if not value:
        return 0.0
    try:
        return float(value)
    except ValueError:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def parked_copy_name(name: str, preemptions: int) -> str:
    """Name the parked copy after a job's `preemptions`-th stop: deterministic, so parking is idempotent."""
    base = name
    head, sep, tail = name.rpartition("-p")
    if sep and tail.isdigit():
        base = head
    return f"{base}-p{preemptions}"


def build_parked_copy(old: dict[str, Any]) -> dict[str, Any]:
    """Return a new Workflow that runs `old` again from its checkpoints: same spec and run id, parked.

    Only what defines the job is copied (spec, labels, annotations); status and identity are
    new. The preemption count goes up by one, so preemptions are told apart from failures.
    """
    meta = old["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("workflows.argoproj.io/")}
    labels[LABEL_STATE] = STATE_PARKED
    annotations = dict(meta.get("annotations") or {})
    annotations[ANNOTATION_PREEMPTIONS] = str(_int(annotations.get(ANNOTATION_PREEMPTIONS), 0) + 1)
    annotations[ANNOTATION_PARKED_FROM] = meta["name"]
    spec = copy.deepcopy(old["spec"])
    spec.pop("shutdown", None)
    spec["suspend"] = True
    name = parked_copy_name(meta["name"], int(annotations[ANNOTATION_PREEMPTIONS]))
    return {
        "apiVersion": old.get("apiVersion", "argoproj.io/v1alpha1"),
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": meta.get("namespace"), "labels": labels, "annotations": annotations},
        "spec": spec,
    }
