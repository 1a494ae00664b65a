"""An in-memory `Cluster`: the same contract as the Kubernetes one, for tests and the simulator.

Faults can be injected per call (`fail_next`), to prove the gate's behaviour when the API
answers with conflicts or server errors.
"""

import copy
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.cluster.access import Grant, ModelledAccess
from offhours.scripts.cluster.base import (
    MAX_NODE_PODS,
    MAX_POOL_NODES,
    MAX_POOL_PODS,
    MAX_WORKFLOW_PODS,
    RAISE_TRIES,
    Autoscaler,
    ClusterError,
    ParkedCopy,
    Pod,
    PoolReadCutShort,
    ScaleTarget,
    Serving,
    ServingWrite,
    check_lower,
    check_raise,
    serving_value,
    set_serving_value,
    stop_notes,
)
from offhours.scripts.cluster.scale_target import gpus_per_replica, target_refusal
from offhours.scripts.cluster.template_grace import MAX_TEMPLATES
from offhours.scripts.cluster.workflow import (
    build_parked_copy,
    elsewhere,
    exit_seconds_text,
    grace_capped_parameters,
    is_own_copy,
    own_grace_refusal,
    provenance_at_stop,
    same_workflow,
    workflow_job,
)
from offhours.scripts.names import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_BORROWED_FROM,
    ANNOTATION_EXIT_SECONDS,
    ANNOTATION_PREEMPTED_AT,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROGRESS,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_RETURNED_AT,
    ANNOTATION_WAITING_REASON,
    ARGO_API_VERSION,
    ARGO_LABEL_DOMAIN,
    ARGO_RESUBMITTED_LABEL,
    FINISHED_PHASES,
    JOB_TEMPLATE,
    LABEL_MANAGED,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
    LEASE_NOTE_PREFIX,
    STATE_ADMITTED,
    STATE_PARKED,
    STATE_PREEMPTED,
    STATE_RETURNED,
)
from offhours.scripts.policy.holding import PodSeat
from offhours.scripts.policy.placement import Node, Replica
from offhours.scripts.policy.plan import Job
from offhours.scripts.policy.release import PodExit
from offhours.scripts.policy.target import DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND, ScaleTargetRef, parse_target_text


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

    deployments: dict[tuple[str, str], ScaleTarget] = field(default_factory=dict)
    pods: dict[tuple[str, str], list[Pod]] = field(default_factory=dict)
    workflows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # WorkflowTemplates by (ns, name)
    events: list[Event] = field(default_factory=list)
    research_pods: dict[tuple[str, str], list[PodExit]] = field(default_factory=dict)  # by (ns, workflow name)
    # What a workflow's pods' kubelets report: image (as the pod spec names it) -> digest, by (ns, workflow name).
    image_digests: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    autoscalers: dict[tuple[str, str], Autoscaler] = field(default_factory=dict)  # by (namespace, target name)
    # The kind each autoscaler's scaleTargetRef names, where it is not a Deployment (matched by kind and name).
    autoscaled_kinds: dict[tuple[str, str], str] = field(default_factory=dict)
    pod_gpus: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # by target: the GPUs of each of its pods
    unscalable_kinds: set[str] = field(default_factory=set)  # kinds this API server serves no /scale for
    controllers: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # target -> its controller owner
    states: dict[tuple[str, str], str] = field(default_factory=dict)  # the state ConfigMaps' text by (ns, service)
    ledgers: dict[str, dict[str, str]] = field(default_factory=dict)  # the ConfigMap offhours-lent's data by namespace
    gpu_quotas: dict[str, int] = field(default_factory=dict)  # the ResourceQuota offhours-gpus by namespace
    seats: list[PodSeat] = field(default_factory=list)  # pods as the scheduler counts them (pool_seats)
    node_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> its labels (nodes_selected)
    lease_holder: str | None = None
    lease_until: float = 0.0
    lease_annotations: dict[str, str] = field(default_factory=dict)
    clock: float = 0.0
    fail_next: dict[str, list[Exception]] = field(default_factory=dict)
    changes: int = 0  # workflows finished or returned since the last wait_for_workflow_change
    # UIDs and generated name suffixes from a counter, not uuid4: a fixed-seed campaign must replay
    # the same run (an ordering by UID would otherwise differ from one process to the next).
    serial: int = 0
    # A test's other writer of serving (an on-call human, an HPA controller): called with the target just before
    # each serving write's test, so it lands between the gate's read and its write.
    serving_writer: Callable[[Serving], None] | None = None
    # Placement (issue 36): the nodes, each Deployment's replicas on them (oldest first) and their deletion costs,
    # GPUs other pods hold per node, pods the scheduler found no node for; whether nodes may be read and pods patched.
    nodes: dict[str, Node] = field(default_factory=dict)
    replicas_on_nodes: dict[tuple[str, str], list[Replica]] = field(default_factory=dict)  # by (ns, Deployment)
    deletion_costs: dict[tuple[str, str], int] = field(default_factory=dict)  # by (ns, pod)
    other_gpus: dict[str, int] = field(default_factory=dict)  # GPUs held on each node by pods of no Deployment here
    unschedulable: dict[tuple[str, str], list[tuple[str, float, str]]] = field(default_factory=dict)  # by (ns, workflow)
    nodes_readable: bool = True
    pods_patchable: bool = True
    # Modelled RBAC: the grants of each user ("alice") and group ("group:researchers"); access reviews answer from it.
    rbac: dict[str, list[Grant]] = field(default_factory=dict)

    def _uid(self) -> str:
        self.serial += 1
        return str(uuid.UUID(int=self.serial))

    def _suffix(self) -> str:
        self.serial += 1
        return f"{self.serial:05x}"[-5:]

    def grant(self, subject: str, namespace: str, resource: str, verbs: Collection[str], group: str = "",
              subresource: str = "") -> None:
        """Give `subject` (a user, or `group:NAME`) `verbs` on `resource` in `namespace` ("*": every namespace)."""
        self.rbac.setdefault(subject, []).append(Grant(namespace, resource, frozenset(verbs), group, subresource))

    def access_for(self, user: str, groups: Collection[str] = ()) -> ModelledAccess:
        """Return the access reviews of `user` (and `groups`), answered from the modelled RBAC as the API server would."""
        return ModelledAccess(self.rbac, user, tuple(groups))

    # -- test helpers -----------------------------------------------------------------------
    def add_deployment(self, namespace: str, service: str, replicas: int, pod_ips: list[str] | None = None,
                       name: str | None = None, ref: ScaleTargetRef | None = None) -> ScaleTarget:
        """Add an inference Deployment (or the scale target `ref`) with ready pods (a new incarnation: a new UID)."""
        ref = ref or ScaleTargetRef(DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND, name or service)
        dep = ScaleTarget(namespace, ref.name, service, replicas, {}, f"app={service}", uid=self._uid(),
                          api_version=ref.api_version, kind=ref.kind)
        self.deployments[(namespace, dep.name)] = dep
        ips = pod_ips if pod_ips is not None else [f"10.0.0.{i + 1}" for i in range(replicas)]
        self.pods[(namespace, dep.name)] = [Pod(f"{dep.name}-{i}", ip) for i, ip in enumerate(ips)]
        return dep

    def add_workflow(self, namespace: str, name: str, service: str, replicas: int, state: str = STATE_PARKED,
                     priority: int = 0, created: float = 0.0, phase: str = "Running",
                     progress_at: float | None = None, run_id: str | None = None) -> dict[str, Any]:
        """Add an offhours research workflow (its run id is its name unless given, as `offhours submit` labels it)."""
        wf = {
            "apiVersion": ARGO_API_VERSION, "kind": "Workflow",
            "metadata": {
                "name": name, "namespace": namespace, "creationTimestamp": created, "uid": self._uid(),
                "labels": {LABEL_SERVICE: service, LABEL_REPLICAS: str(replicas), LABEL_MANAGED: "true",
                           LABEL_RUN_ID: run_id or name, **({LABEL_STATE: state} if state else {})},
                "annotations": {ANNOTATION_PRIORITY: str(priority),
                                **({ANNOTATION_PROGRESS: str(progress_at)} if progress_at is not None else {})},
            },
            "spec": {"workflowTemplateRef": {"name": JOB_TEMPLATE},
                     "arguments": {"parameters": [{"name": "service", "value": service},
                                                  {"name": "replicas", "value": str(replicas)}]},
                     **({"suspend": True} if state == STATE_PARKED else {})},
            "status": {"phase": phase},
        }
        self.workflows[(namespace, name)] = wf
        return wf

    def _call(self, what: str) -> None:
        self.calls.append(what)
        # A fault is queued for a kind of call ("stop") or for one call ("list-workflows chat").
        queued = self.fail_next.get(what) or self.fail_next.get(what.split(" ")[0])
        if queued:
            raise queued.pop(0)

    # -- Cluster ----------------------------------------------------------------------------
    def server_time(self) -> float:
        """Return the API server's time: `clock` (the in-memory API server's, whatever its clients' clocks say)."""
        return self.clock

    def deployment(self, namespace: str, service: str, name: str | None = None) -> ScaleTarget:
        """Return the scale target of `service` (refused as the Kubernetes adapter refuses it)."""
        self._call(f"get-deployment {service}")
        ref = _target_ref(name) if name else None
        for (ns, dname), dep in self.deployments.items():
            if ns == namespace and ((dname, dep.kind) == (ref.name, ref.kind) if ref else dep.service == service):
                return self._judged(dep)
        raise ClusterError(f"no {ref or 'Deployment labelled offhours.io/service=' + service} in namespace {namespace}")

    def _judged(self, dep: ScaleTarget) -> ScaleTarget:
        """Return a copy of `dep`, or raise the refusal `target_refusal` makes of it (one line, as on a cluster)."""
        refusal = target_refusal(dep.ref, dep.kind not in self.unscalable_kinds, dep.selector,
                                 self.controllers.get((dep.namespace, dep.name)))
        if refusal:
            raise ClusterError(refusal)
        return copy.deepcopy(dep)

    def _serving_verb(self, target: Serving, value: int) -> str:
        return (f"set-max {target.name} {value}" if isinstance(target, Autoscaler)
                else f"scale {target.name} {value}")

    def _stored_serving(self, target: Serving) -> Serving:
        """Return the stored object a serving write changes (the Deployment of that incarnation, or the autoscaler)."""
        if isinstance(target, Autoscaler):
            for found in self.autoscalers.values():
                if (found.namespace, found.kind, found.name) == (target.namespace, target.kind, target.name):
                    return found
            raise ClusterError(f"patch {target.kind} {target.namespace}/{target.name}: HTTP 404 Not Found")
        current = self.deployments.get((target.namespace, target.name))
        if current is None or current.kind != target.kind or (target.uid and current.uid != target.uid):
            raise ClusterError(f"scale {target.kind.lower()} {target.namespace}/{target.name}: HTTP 404 Not Found")
        return current

    def _test_and_set(self, target: Serving, expected: int, value: int) -> int | None:
        """One JSON-patch `test` + `replace` of the field: None when written, else the value found (a conflict).

        `serving_writer` (a test's other writer: an on-call human, an HPA) acts first: it lands between the
        caller's read and this write, as on a cluster.
        """
        if self.serving_writer is not None:
            self.serving_writer(target)
        stored = self._stored_serving(target)
        found = serving_value(stored)
        if found == value:
            return None  # another writer chose the same value: as the Kubernetes adapter reads it, written
        if found != expected:
            return found
        set_serving_value(stored, value)
        return None

    def lower_serving(self, target: Serving, expected: int, value: int) -> ServingWrite:
        """Lower serving from `expected` to `value` only if it still holds `expected` (else: the value found)."""
        check_lower(expected, value)
        self._call(self._serving_verb(target, value))
        found = self._test_and_set(target, expected, value)
        answer = ServingWrite(value) if found is None else ServingWrite(found, conflict=True)
        set_serving_value(target, answer.value)
        if found is None and not isinstance(target, Autoscaler):
            self._replicaset_deletes(target.namespace, target.name, expected - value)
        return answer

    def _replicaset_deletes(self, namespace: str, name: str, count: int) -> None:
        """Delete `count` of the Deployment's placed pods as its ReplicaSet ranks them (Kubernetes' ranking).

        Ranked once per scale-down, as the controller does: lower deletion cost first; then pods on nodes with
        more replicas of the set; then the newest (the controller breaks ties within one age bucket at random,
        by UID: the newest is one of its possible draws, and keeps tests deterministic).
        """
        pods = self.replicas_on_nodes.get((namespace, name))
        if not pods:
            return
        per_node: dict[str, int] = {}
        for r in pods:
            per_node[r.node] = per_node.get(r.node, 0) + 1
        ranked = sorted(enumerate(pods), key=lambda ir: (self.deletion_costs.get((namespace, ir[1].name), 0),
                                                         -per_node[ir[1].node], -ir[0]))
        for _, victim in ranked[:count]:
            pods.remove(victim)
            self.deletion_costs.pop((namespace, victim.name), None)

    # -- placement (issue 36) --------------------------------------------------------------------
    def serving_replicas(self, dep: ScaleTarget) -> tuple[list[Replica], dict[str, int | None]]:
        """Return the Deployment's placed pods and each one's deletion cost."""
        self._call(f"list pods {dep.name}")
        pods = sorted(self.replicas_on_nodes.get((dep.namespace, dep.name), []), key=lambda r: r.name)
        return pods, {r.name: self.deletion_costs.get((dep.namespace, r.name)) for r in pods}

    def gpu_nodes(self, names: Collection[str]) -> dict[str, Node] | None:
        """Return these nodes; None when nodes may not be read."""
        for name in sorted(set(names)):
            self._call(f"get node {name}")
        if not self.nodes_readable:
            return None
        return {n: self.nodes[n] for n in names if n in self.nodes}

    def gpus_held(self, namespaces: Collection[str], nodes: Collection[str]) -> dict[str, int]:
        """Return the GPUs held on each node: every placed serving pod, and the other pods'."""
        for namespace in sorted(set(namespaces)):
            self._call(f"list pods in {namespace}")
        held = {n: self.other_gpus.get(n, 0) for n in nodes}
        for (ns, _), pods in self.replicas_on_nodes.items():
            if ns in namespaces:
                for r in pods:
                    if r.node in held:
                        held[r.node] += r.gpus
        return held

    def set_deletion_cost(self, namespace: str, pod: str, cost: int | None) -> bool:
        """Write (None: remove) a pod's deletion cost; False when pods may not be patched."""
        self._call(f"mark pod {pod} {cost}")
        if not self.pods_patchable:
            return False
        if cost is None:
            self.deletion_costs.pop((namespace, pod), None)
        else:
            self.deletion_costs[(namespace, pod)] = cost
        return True

    def unschedulable_pods(self, namespace: str, workflows: Collection[str]) -> dict[str, list[tuple[str, float, str]]]:
        """Return, per workflow, its pods the scheduler found no node for (one read for all)."""
        self._call(f"list pending pods in {namespace}")
        return {w: sorted(self.unschedulable.get((namespace, w), [])) for w in sorted(set(workflows))}

    def raise_serving(self, target: Serving, observed: int, at_least: int) -> ServingWrite:
        """Make serving max(what it holds, at_least); a failed test reads again and tries again at once."""
        check_raise(observed, at_least)
        self._call(self._serving_verb(target, at_least))
        expected = observed
        for _ in range(RAISE_TRIES):
            if expected >= at_least:
                answer = ServingWrite(expected)  # already there: nothing to write
                break
            found = self._test_and_set(target, expected, at_least)
            if found is None:
                answer = ServingWrite(at_least)
                break
            expected = found
        else:
            raise ClusterError(f"raise {target.namespace}/{target.name} to {at_least}: its value changed at each "
                               f"of {RAISE_TRIES} tries")
        set_serving_value(target, answer.value)
        return answer

    def autoscaler(self, dep: ScaleTarget) -> Autoscaler | None:
        """Return the autoscaler of `dep` (one added for its kind and name), if any."""
        self._call(f"get-autoscaler {dep.name}")
        found = self.autoscalers.get((dep.namespace, dep.name))
        return copy.deepcopy(found) if found and self.autoscaled_kinds.get((dep.namespace, dep.name),
                                                                            "Deployment") == dep.kind else None

    def read_state(self, namespace: str, service: str) -> str | None:
        """Return the stored state text of `service`."""
        self._call(f"read-state {service}")
        return self.states.get((namespace, service))

    def write_state(self, namespace: str, service: str, text: str) -> None:
        """Store the state text of `service`."""
        self._call(f"write-state {service}")
        self.states[(namespace, service)] = text

    def state_records(self, namespace: str) -> dict[str, str]:
        """Return every stored state text of `namespace`, by service."""
        self._call("list-states")
        return {service: text for (ns, service), text in sorted(self.states.items()) if ns == namespace}

    def state_services(self, namespace: str) -> list[str]:
        """Return the services with a stored state."""
        self._call("list-states")
        return sorted(service for ns, service in self.states if ns == namespace)

    def delete_state(self, namespace: str, service: str) -> None:
        """Remove a service's stored state."""
        self._call(f"delete-state {service}")
        self.states.pop((namespace, service), None)

    def ledger(self, namespace: str) -> dict[str, str]:
        """Return the ledger's entries (object UID -> text); none: {}."""
        self._call("read-ledger")
        return dict(self.ledgers.get(namespace, {}))

    def write_ledger_entry(self, namespace: str, uid: str, text: str | None) -> None:
        """Write (None: remove) one ledger entry; the ledger is made when first written."""
        self._call(f"write-ledger {uid}")
        if text is None:
            self.ledgers.get(namespace, {}).pop(uid, None)
        else:
            self.ledgers.setdefault(namespace, {})[uid] = text

    def find_deployment(self, namespace: str, name: str) -> ScaleTarget | None:
        """Return the scale target of text `name`, or None."""
        self._call(f"find-deployment {name}")
        ref = _target_ref(name)
        dep = self.deployments.get((namespace, ref.name))
        return self._judged(dep) if dep is not None and dep.kind == ref.kind else None

    def workflow_pods(self, namespace: str, workflows: Mapping[str, str]) -> dict[str, list[PodExit]]:
        """Return each workflow's pods as set with `set_workflow_pods` (none: []); one with too many is left out."""
        self._call(f"list-workflow-pods {','.join(sorted(workflows))}")
        return {w: list(pods) for w in workflows
                if len(pods := self.research_pods.get((namespace, w), [])) <= MAX_WORKFLOW_PODS}

    def set_workflow_pods(self, namespace: str, workflow: str, pods: list[PodExit]) -> None:
        """Test helper: what a workflow's pods' status says (the pod runner's part on a real cluster)."""
        self.research_pods[(namespace, workflow)] = list(pods)

    def scheduled_pods(self, dep: ScaleTarget) -> int:
        """Return the Deployment's pods bound to a node: here, its ready pods (none waits for a node)."""
        return len(self.ready_pods(dep))

    def ready_pods(self, dep: ScaleTarget) -> list[Pod]:
        """Return the target's ready pods (as many as its replicas); the GPUs per replica from `pod_gpus`, if set."""
        self._call(f"list-pods {dep.name}")
        if (dep.namespace, dep.name) in self.pod_gpus:
            dep.gpus_per_replica = gpus_per_replica(self.pod_gpus[(dep.namespace, dep.name)],
                                                    self.deployments[(dep.namespace, dep.name)].replicas, dep.group_gpus)
        return list(self.pods.get((dep.namespace, dep.name), []))[: self.deployments[(dep.namespace, dep.name)].replicas]

    def jobs(self, namespace: str, service: str) -> list[Job]:
        """Return the unfinished offhours workflows of `service`."""
        self._call(f"list-workflows {service}")
        jobs = [job for (ns, _), wf in sorted(self.workflows.items())
                if ns == namespace and (job := workflow_job(wf, service)) is not None]
        # What a list answers is a copy: an edit after it is not in what the tick judges (as on a cluster).
        return [job if job.template_spec is None else replace(job, template_spec=copy.deepcopy(job.template_spec))
                for job in jobs]

    def workflow_templates(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Return the WorkflowTemplates added to `namespace` by name, the first `MAX_TEMPLATES` by name."""
        self._call("list-workflowtemplates")
        found = [(name, t) for (ns, name), t in sorted(self.templates.items()) if ns == namespace]
        return {name: copy.deepcopy(t) for name, t in found[:MAX_TEMPLATES]}

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return a workflow object."""
        self._call(f"get-workflow {name}")
        wf = self.workflows.get((namespace, name))
        return copy.deepcopy(wf) if wf else None

    def _stamp(self) -> str:
        return datetime.fromtimestamp(self.clock, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _existing(self, namespace: str, name: str, what: str) -> dict[str, Any]:
        wf = self.workflows.get((namespace, name))
        if wf is None:
            raise ClusterError(f"{what} workflow {namespace}/{name}: HTTP 404 Not Found")
        return wf

    def admit(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Resume and mark admitted (with the job's expected exit time, if known); with a cap, its grace capped."""
        self._call(f"admit {job.name}")
        wf = self._existing(namespace, job.name, "admit")
        _cap_grace(wf, job, max_grace_seconds, f"admit workflow {namespace}/{job.name}")
        wf["spec"].pop("suspend", None)
        self._mark_admitted(wf, deployment_uid)
        if job.exit_learnt and job.exit_seconds is not None:
            wf["metadata"]["annotations"][ANNOTATION_EXIT_SECONDS] = exit_seconds_text(job.exit_seconds)

    def adopt(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Mark admitted; with a cap, its grace capped."""
        self._call(f"adopt {job.name}")
        wf = self._existing(namespace, job.name, "adopt")
        _cap_grace(wf, job, max_grace_seconds, f"adopt workflow {namespace}/{job.name}")
        self._mark_admitted(wf, deployment_uid)

    def _mark_admitted(self, wf: dict[str, Any], deployment_uid: str) -> None:
        wf["metadata"]["labels"][LABEL_STATE] = STATE_ADMITTED
        annotations = wf["metadata"].setdefault("annotations", {})
        annotations[ANNOTATION_ADMITTED_AT] = self._stamp()
        annotations[ANNOTATION_BORROWED_FROM] = deployment_uid
        annotations.pop(ANNOTATION_WAITING_REASON, None)
        annotations.pop(ANNOTATION_QUEUE_POSITION, None)

    def stop(self, namespace: str, job: Job) -> None:
        """Stop and mark preempted."""
        self._call(f"stop {job.name}")
        wf = self._existing(namespace, job.name, "stop")
        # As the API server's UID precondition in the Kubernetes adapter's patch: only the workflow the tick listed.
        if (other := same_workflow(wf, job, "stop")) is not None:
            raise ClusterError(other)
        pinned = provenance_at_stop(wf, self.image_digests.get((namespace, job.name), {}))
        wf["spec"]["shutdown"] = "Stop"
        wf["spec"].pop("suspend", None)  # as the Kubernetes adapter: Argo acts on no suspended workflow's shutdown
        wf["metadata"]["labels"][LABEL_STATE] = STATE_PREEMPTED
        wf["metadata"].setdefault("annotations", {}).update({ANNOTATION_PREEMPTED_AT: self._stamp(), **stop_notes(job),
                                                             **pinned})

    def park_copy(self, namespace: str, job: Job, made: Collection[str] = (), token: str = "") -> ParkedCopy:
        """Create a parked copy; an existing object of that name, or linked to the job, is success only if made by the gate."""
        self._call(f"park-copy {job.name}")
        old = self._existing(namespace, job.name, "park")
        # Copied is the workflow the tick listed, never one made under its name since (it was never admitted).
        if (other := same_workflow(old, job, "park")) is not None:
            raise ClusterError(other)
        new = build_parked_copy(old, token, self.image_digests.get((namespace, job.name), {}))
        name = str(new["metadata"]["name"])
        existing = self.workflows.get((namespace, name))
        if existing is not None:
            if is_own_copy(existing, old, made, token):
                return ParkedCopy(name, str(existing["metadata"]["uid"]))
            found = [(n, wf) for (ns, n), wf in sorted(self.workflows.items()) if ns == namespace
                     and is_own_copy(wf, old, made, token)]
            if found:
                return ParkedCopy(found[0][0], str(found[0][1]["metadata"]["uid"]))
            new = elsewhere(new)
            name = f"{new['metadata'].pop('generateName')}{self._suffix()}"
            new["metadata"]["name"] = name
        new["metadata"]["creationTimestamp"] = self.clock
        new["metadata"]["uid"] = uid = self._uid()
        self.workflows[(namespace, name)] = new
        return ParkedCopy(name, uid)

    def delete_workflow(self, namespace: str, name: str) -> None:
        """Delete a workflow; a missing one is success."""
        self._call(f"delete-workflow {name}")
        self.workflows.pop((namespace, name), None)

    def finish(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        """Test helper: Argo finished a workflow (and its exit hook marked it returned).

        As Argo's controller does, it writes the root node's phase and finish time too: what the gate reads success from.
        """
        wf = self.workflows[(namespace, name)]
        wf["status"]["phase"] = phase
        wf["status"]["finishedAt"] = self._stamp()
        nodes = wf["status"].setdefault("nodes", {})
        root = nodes.setdefault(name, {"id": name, "name": name, "type": "DAG"})
        root.update({"phase": phase, "finishedAt": self._stamp()})
        if wf["metadata"]["labels"].get(LABEL_STATE) != STATE_PREEMPTED:
            wf["metadata"]["labels"][LABEL_STATE] = STATE_RETURNED
        wf["metadata"].setdefault("annotations", {})[ANNOTATION_RETURNED_AT] = self._stamp()
        self.changes += 1

    # -- Argo's own verbs, as Argo v4 applies them (test helpers: a person runs them with `argo <verb>`) ----------
    def argo_verb(self, verb: str, namespace: str, name: str, new_name: str | None = None) -> str | None:
        """Apply `argo <verb>` to a workflow as Argo's server does; return the name of a workflow it created.

        retry: a Failed or Errored workflow runs again (phase Running, `shutdown` cleared, labels kept as they
        were); resubmit: a new workflow from its spec (`shutdown` cleared, `suspend` kept) with its labels and
        annotations; resume/suspend: `spec.suspend` off/on; stop/terminate: `spec.shutdown`; delete.
        """
        wf = self._existing(namespace, name, verb)
        phase = (wf.get("status") or {}).get("phase")
        if verb == "retry":
            if phase not in ("Failed", "Error"):
                raise ClusterError(f"retry workflow {namespace}/{name}: workflow must be Failed/Error to retry")
            wf["spec"].pop("shutdown", None)
            wf["status"] = {"phase": "Running"}
        elif verb == "resubmit":
            new = copy.deepcopy(wf)
            meta = new["metadata"]
            meta["name"] = new_name or f"{name[:240]}-{self._suffix()}"
            meta["uid"], meta["creationTimestamp"] = self._uid(), self.clock
            meta["labels"] = {k: v for k, v in meta.get("labels", {}).items() if not k.startswith(f"{ARGO_LABEL_DOMAIN}/")}
            meta["labels"][ARGO_RESUBMITTED_LABEL] = name
            new["spec"].pop("shutdown", None)
            new["status"] = {"phase": "Running"}
            self.workflows[(namespace, meta["name"])] = new
            return str(meta["name"])
        elif verb == "resume":
            wf["spec"].pop("suspend", None)
        elif verb == "suspend":
            wf["spec"]["suspend"] = True
        elif verb in ("stop", "terminate"):
            if phase not in FINISHED_PHASES:
                wf["spec"]["shutdown"] = verb.capitalize()
        elif verb == "delete":
            del self.workflows[(namespace, name)]
        else:
            raise ValueError(f"argo has no verb {verb!r} here")
        return None

    def gpu_quota(self, namespace: str) -> int | None:
        """Return the GPU quota of `namespace` (None: no quota)."""
        self._call(f"get-gpu-quota {namespace}")
        return self.gpu_quotas.get(namespace)

    def set_gpu_quota(self, namespace: str, gpus: int) -> None:
        """Set the GPU quota of `namespace`."""
        self._call(f"set-gpu-quota {namespace} {gpus}")
        self.gpu_quotas[namespace] = gpus

    def pool_seats(self, namespaces: Collection[str]) -> list[PodSeat]:
        """Return the seats of `namespaces` set in `seats` that hold a node and have not ended.

        As the server's field selectors pick them; cut short past MAX_POOL_PODS a namespace, as the adapter is.
        """
        self._call(f"list-pool-pods {','.join(sorted(set(namespaces)))}")
        out: list[PodSeat] = []
        for namespace in sorted(set(namespaces)):
            held = [s for s in self.seats if s.namespace == namespace and s.node and not s.terminal]
            if len(held) > MAX_POOL_PODS:
                raise PoolReadCutShort(f"list pods {namespace}: more than {MAX_POOL_PODS} pods holding a node")
            out.extend(held)
        return out

    def nodes_selected(self, labels: Collection[tuple[str, str]]) -> list[str]:
        """Return the nodes of `node_labels` carrying every one of `labels`."""
        self._call("list-nodes " + ",".join(f"{k}={v}" for k, v in labels))
        picked = sorted(n for n, have in self.node_labels.items() if all(have.get(k) == v for k, v in labels))
        if len(picked) > MAX_POOL_NODES:
            raise PoolReadCutShort(f"list nodes: more than {MAX_POOL_NODES}")
        return picked

    def node_seats(self, namespace: str, node: str) -> list[PodSeat]:
        """Return the seats of `namespace` bound or nominated to `node`, not ended; cut short past MAX_NODE_PODS."""
        self._call(f"list-node-pods {namespace} {node}")
        held = [s for s in self.seats if s.namespace == namespace and node and s.node == node and not s.terminal]
        if len(held) > MAX_NODE_PODS:
            raise PoolReadCutShort(f"list pods {namespace} on {node}: more than {MAX_NODE_PODS} pods")
        return held

    def delete_pod(self, namespace: str, name: str, uid: str, grace_seconds: int) -> None:
        """Delete a pod's seat: it is terminating (its GPUs stay counted) until a test removes it."""
        self._call(f"delete-pod {namespace}/{name} {grace_seconds}")
        self.seats = [replace(s, terminating=True) if (s.namespace, s.name, s.uid) == (namespace, name, uid) else s
                      for s in self.seats]

    def wait_for_workflow_change(self, namespace: str, timeout: float) -> bool:
        """Return whether a workflow finished since the last call (never blocks: the tests drive the clock)."""
        changed, self.changes = self.changes > 0, 0
        return changed

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
        self._call(f"acquire-lease {holder.split('/')[0]}")
        if self.lease_holder not in (None, holder) and self.lease_until > self.clock:
            return False
        self.lease_holder, self.lease_until = holder, self.clock + seconds
        return True

    def release_lease(self, namespace: str, holder: str) -> None:
        """Release the lease."""
        if self.lease_holder == holder:
            self.lease_holder, self.lease_until = None, 0.0

    def lease_notes(self, namespace: str) -> dict[str, str]:
        """Return the notes on the Lease, by service."""
        self._call("read-lease-notes")
        return {k[len(LEASE_NOTE_PREFIX):]: v for k, v in self.lease_annotations.items() if k.startswith(LEASE_NOTE_PREFIX)}

    def note_on_lease(self, namespace: str, holder: str, service: str, text: str | None) -> bool:
        """Write or remove a note while `holder` holds the Lease."""
        self._call(f"note-lease {service}")
        if self.lease_holder != holder:
            return False
        if text is None:
            self.lease_annotations.pop(LEASE_NOTE_PREFIX + service, None)
        else:
            self.lease_annotations[LEASE_NOTE_PREFIX + service] = text
        return True


def _target_ref(text: str) -> ScaleTargetRef:
    try:
        return parse_target_text(text)
    except ValueError as err:
        raise ClusterError(str(err)) from None


def _cap_grace(wf: dict[str, Any], job: Job, max_grace_seconds: float | None, what: str) -> None:
    """Write the capped grace parameter into `wf`, or refuse its own grace above the cap, as the Kubernetes adapter does."""
    refused = None if max_grace_seconds is None else own_grace_refusal(wf, job, max_grace_seconds)
    if refused:
        raise ClusterError(f"{what}: {refused}")
    capped = None if max_grace_seconds is None else grace_capped_parameters(wf, max_grace_seconds)
    if capped is not None:
        wf["spec"].setdefault("arguments", {})["parameters"] = capped
