"""The interface the gate and the exit hook act through, and the names offhours writes on objects.

Two implementations: `memory.MemoryCluster` (tests, simulator) and `kube.KubeCluster` (the
Kubernetes API with the `kubernetes` client); both read and write Argo Workflow objects through
one codec, `workflow`, and `errors` turns the API's errors into lines. Everything offhours
remembers lives in Kubernetes objects: the gate's memory of each service (baseline, what it last
applied, its recent decisions) in one ConfigMap per service, admission on the workflows. The gate never patches a
Deployment: it writes replicas through the scale subresource, or an autoscaler's maxReplicas, and only
conditionally (`lower_serving`, `raise_serving`): no serving write overwrites a value its caller did not read.
"""

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple, Protocol

from offhours.scripts.names import ANNOTATION_PROGRESS, GPU_RESOURCE
from offhours.scripts.policy.holding import PodSeat
from offhours.scripts.policy.plan import Job
from offhours.scripts.policy.release import PodExit
from offhours.scripts.policy.target import DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND, ScaleTargetRef

# The pods read of one stopped workflow: one with more (a fan-out, retries kept until pod GC) is not measured.
MAX_WORKFLOW_PODS = 1000


def stop_notes(job: Job) -> dict[str, str]:
    """Annotations a stop writes besides its mark: the job's last checkpoint, when the gate read one.

    The read model shows it (`offhours why`) and counts the work lost to the preemption from it
    (`offhours usage`); without it, everything since the run started counts as lost.
    """
    at = job.progress_at
    if at is None or not math.isfinite(at):
        return {}
    try:
        # A tenant writes that annotation too: a time no date can hold must not make the stop itself fail.
        stamp = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return {}
    return {ANNOTATION_PROGRESS: stamp}


class ClusterError(RuntimeError):
    """The API answered with an error that retries did not cure; names the call and the answer."""


# The pool's reads (`pool_seats`, `node_seats`) take only pods that hold a node (bound or nominated: a pending pod
# costs a tenant nothing and holds nothing), so what they read is bounded by what nodes can hold, not by how many
# pods a tenant creates; past these bounds a read is cut short, and the gate then lends nothing new (policy/holding).
MAX_POOL_PODS = 20_000  # pods holding a node read per namespace, at most (40 pages)
MAX_NODE_PODS = 2_000  # pods holding one node read, at most: far past any kubelet's max-pods (110 by default)
MAX_POOL_NODES = 5_000  # nodes a configured pool node selector picks, read at most (Kubernetes' tested fleet size)


class PoolReadCutShort(ClusterError):
    """A read of the pods holding nodes found more than its bound: what it read is not the whole (never the count)."""


class ParkedCopy(NamedTuple):
    """The parked copy a park made or found: its name, and its UID (the API server's: the gate records it)."""

    name: str
    uid: str


@dataclass
class ScaleTarget:
    """A serving workload as offhours sees it: any object with a scale subresource (`policy.target`).

    `replicas` and `selector` are its scale's `spec.replicas` and `status.selector` (a label selector's text):
    the gate reads nothing else of the object's spec, so no kind needs code of its own.
    """

    namespace: str
    name: str
    service: str
    replicas: int
    annotations: dict[str, str] = field(default_factory=dict)
    selector: str = ""
    uid: str = ""  # one incarnation: an object deleted and created again is a new one
    api_version: str = DEPLOYMENT_API_VERSION
    kind: str = DEPLOYMENT_KIND
    labels: dict[str, str] = field(default_factory=dict)
    current_replicas: int = 0  # the scale's status.replicas: the replicas its pods make up now
    # Read from its pods by `ready_pods` (all pods of a multi-node replica); None: not read (the configuration's).
    gpus_per_replica: int | None = None
    # What one replica's group of pods requests by the object's templates, for a kind whose scale selects only some
    # of a replica's pods (a LeaderWorkerSet's leaders: `scale_target.group_gpus`); None for every other kind.
    group_gpus: int | None = None

    @property
    def ref(self) -> ScaleTargetRef:
        """The reference to this object."""
        return ScaleTargetRef(self.api_version, self.kind, self.name)

    @property
    def text(self) -> str:
        """The reference as the service's record keeps it (what the backstop restores by)."""
        return self.ref.text


Deployment = ScaleTarget
"""The name the gate's code has known the scale target by (a Deployment was the only kind)."""


@dataclass
class Autoscaler:
    """An HPA (autoscaling/v2) or a KEDA ScaledObject that scales a scale target (matched by kind and name).

    With one present, the gate lends by lowering its maxReplicas and never writes the
    target's replicas (that would fight the autoscaler).
    """

    kind: str  # "HorizontalPodAutoscaler" or "ScaledObject"
    namespace: str
    name: str
    min_replicas: int
    max_replicas: int


Serving = ScaleTarget | Autoscaler
"""What holds a service's size: a scale target's replicas, or (with an autoscaler) its maxReplicas."""

# A raise whose test keeps failing (another writer changing the field between each read and write) gives up
# after this many tries; each try reads the field again, so a raise lands unless the field changes this often.
RAISE_TRIES = 8


def serving_value(target: Serving) -> int:
    """Return the value a serving write changes: the Deployment's replicas, or the autoscaler's maxReplicas."""
    return target.max_replicas if isinstance(target, Autoscaler) else target.replicas


def set_serving_value(target: Serving, value: int) -> None:
    """Keep the caller's copy of `target` at what the cluster answered."""
    if isinstance(target, Autoscaler):
        target.max_replicas = value
    else:
        target.replicas = value


@dataclass(frozen=True)
class ServingWrite:
    """What a conditional serving write left: the value the field holds now, and whether the write's test failed.

    `conflict`: a lower found another value than the one its decision read (another writer changed it in
    between); nothing was written, and `value` is the other writer's value, which the caller adopts.
    """

    value: int
    conflict: bool = False


def check_lower(expected: int, value: int) -> None:
    """Refuse a lower that does not lower (one clear error, nothing written)."""
    if not 0 <= value < expected:
        raise ValueError(f"a lower of serving goes from {expected} to a smaller value >= 0, not to {value}")


def check_raise(observed: int, at_least: int) -> None:
    """Refuse a raise that does not raise what its caller read (one clear error, nothing written)."""
    if at_least <= observed:
        raise ValueError(f"a raise of serving goes above the {observed} read, not to {at_least}")


GPU_QUOTA_KEY = f"requests.{GPU_RESOURCE}"
"""The key of the GPU requests in the gate's ResourceQuota's spec.hard."""


def gpu_count(quantity: str) -> int:
    """Read a quota's GPU quantity as the gate writes it (a whole number); -1 for anything else (rewritten)."""
    text = str(quantity).strip()
    return int(text) if text.isdigit() else -1


@dataclass(frozen=True)
class Pod:
    """A ready serving pod: name and IP (for direct scraping), and how long it took to start, where known."""

    name: str
    ip: str
    start_seconds: float | None = None  # created -> Ready, from the pod's own conditions


class Cluster(Protocol):
    """What the gate and the exit hook need from Kubernetes and Argo."""

    def server_time(self) -> float:
        """Return the API server's time now (`clock.ServerClock`): the one clock offhours dates and ages anything by."""
        ...

    def deployment(self, namespace: str, service: str, name: str | None = None) -> ScaleTarget:
        """Return the scale target of `service`: `name` is its text (`ScaleTargetRef.text`), or the labelled Deployment.

        A bare name is a Deployment's; None: the Deployment labelled offhours.io/service=<service>.

        Refused (ClusterError, one line naming it, nothing written): a kind without a scale subresource, a scale
        whose selector is empty, an object another controller owns (the top-level object is named instead).
        """
        ...

    def lower_serving(self, target: Serving, expected: int, value: int) -> ServingWrite:
        """Lower serving from `expected` (the value the decision read) to `value`, only if it still holds `expected`.

        The write carries a test of that one field (a JSON-patch `test` + `replace` on the scale subresource's
        `spec.replicas`, or the autoscaler's maxReplicas; never a resourceVersion, which every status update
        changes). When another writer changed it after the read, nothing is written: the answer is the value
        found, `conflict` set, for the caller to adopt and decide again on. `target` is left at the answer.
        """
        ...

    def raise_serving(self, target: Serving, observed: int, at_least: int) -> ServingWrite:
        """Make serving `max(what it holds, at_least)`, at once: a test of `observed` (< at_least) + replace of that field.

        On a failed test it reads the field again and tries again at once (up to `RAISE_TRIES`), never
        lowering what another writer raised meanwhile. `target` is left at the answer.
        """
        ...

    def autoscaler(self, dep: ScaleTarget) -> Autoscaler | None:
        """Return the HPA or KEDA ScaledObject that scales `dep` (its scaleTargetRef names its kind and name), if any."""
        ...

    def read_state(self, namespace: str, service: str) -> str | None:
        """Return the gate's stored memory of `service` (JSON text), or None if there is none."""
        ...

    def write_state(self, namespace: str, service: str, text: str) -> None:
        """Store the gate's memory of `service` (created if missing)."""
        ...

    def state_records(self, namespace: str) -> dict[str, str]:
        """Return every stored memory of a service in `namespace`, service -> JSON text (the backstop's one read)."""
        ...

    def state_services(self, namespace: str) -> list[str]:
        """Return every service the gate keeps a memory of (its state ConfigMaps), configured or not."""
        ...

    def delete_state(self, namespace: str, service: str) -> None:
        """Remove the gate's memory of `service`; a missing one is success."""
        ...

    def ledger(self, namespace: str) -> dict[str, str]:
        """Return the gate's ledger of what it lowered (`policy.ownership`): object UID -> entry text; none: {}."""
        ...

    def write_ledger_entry(self, namespace: str, uid: str, text: str | None) -> None:
        """Write (None: remove) the ledger's entry of the object `uid`, creating the ledger if missing; only that key changes."""
        ...

    def find_deployment(self, namespace: str, name: str) -> ScaleTarget | None:
        """Return the scale target of text `name` (as `deployment`), or None if there is none (any other failure raises)."""
        ...

    def ready_pods(self, dep: ScaleTarget) -> list[Pod]:
        """Return the target's ready pods (those its scale's selector selects).

        The same read sets `dep.gpus_per_replica`: the GPUs its pods hold over its current replicas.
        """
        ...

    def scheduled_pods(self, dep: Deployment) -> int:
        """Return how many of the Deployment's pods, not terminating, are bound to a node (the return path's read)."""
        ...

    def workflow_pods(self, namespace: str, workflows: Mapping[str, str]) -> dict[str, list[PodExit]]:
        """Return the pods each of `workflows` (name -> the Workflow's uid) owns, as their status reads (none: []).

        What the gate measures a stopped job's release from (`policy.release`). A pod counts only if its
        owner reference names that Workflow (and its uid, when known): Argo's workflow label is any
        tenant's to write on a pod of its own, and a pod that never ends would hold the measurement. A name that cannot be a
        label value is left out (no selector can find its pods): it is not measured; so is a workflow with
        more than `MAX_WORKFLOW_PODS` pods (the read of one job stays bounded whatever it left behind).
        """
        ...

    def jobs(self, namespace: str, service: str) -> list[Job]:
        """Return the unfinished offhours workflows that borrow from `service`."""
        ...

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return a workflow object, or None if it does not exist."""
        ...

    def workflow_templates(self, namespace: str) -> dict[str, dict[str, Any]]:
        """Return the WorkflowTemplates of `namespace` by name: one paged list, at most `MAX_TEMPLATES` of them.

        What the gate checks a workflow's arguments against and follows to the grace of the pods it runs
        (`template_grace`); one left out past the bound reads as missing (a workflow running it is not admitted).
        """
        ...

    def admit(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Resume a parked workflow and mark it admitted (against that Deployment incarnation).

        With `max_grace_seconds`, the same write caps the workflow's grace-period parameter
        (`workflow.grace_capped_parameters`), so that no pod it creates may take longer to stop.
        """
        ...

    def adopt(self, namespace: str, job: Job, deployment_uid: str = "", max_grace_seconds: float | None = None) -> None:
        """Mark a workflow that runs without admission as admitted; with `max_grace_seconds`, its grace capped as `admit`.

        The cap reaches the pods it creates from then on; a pod already created keeps its own grace.
        """
        ...

    def stop(self, namespace: str, job: Job) -> None:
        """Stop a workflow (`spec.shutdown: Stop`: exit handlers run) and mark it preempted."""
        ...

    def park_copy(self, namespace: str, job: Job, made: Collection[str] = (), token: str = "") -> ParkedCopy:
        """Create a parked (suspended) copy of a workflow, carrying `token`; return its name and UID.

        Idempotent for the copies the gate recorded making (`made`: their UIDs): an existing object under the
        copy's name, or linked to the workflow by label, is success only if it is one of those. Anything else
        there (a tenant can write any label) is never taken for the copy: a new one is made under a name the API
        server makes unique. A workflow whose run was cancelled (as read now) is never copied: `CancelledWorkflow`.
        """
        ...

    def delete_workflow(self, namespace: str, name: str) -> None:
        """Delete a workflow (a parked copy whose original completed); a missing one is success."""
        ...

    def annotate_workflow(self, namespace: str, name: str, annotations: dict[str, str], labels: dict[str, str]) -> None:
        """Merge annotations and labels into a workflow."""
        ...

    def record_event(self, namespace: str, kind: str, name: str, reason: str, message: str, warning: bool = False,
                     aggregate: bool = False) -> None:
        """Record a Kubernetes Event on an object.

        `aggregate`: keep one Event per object and reason (named `<object>.<reason>`) and count the
        repeats, as the kubelet does: for what the gate says every tick while nothing changes.
        """
        ...

    def acquire_lease(self, namespace: str, holder: str, seconds: int) -> bool:
        """Take the offhours Lease for `seconds`; False if another holder has it."""
        ...

    def release_lease(self, namespace: str, holder: str) -> None:
        """Give the Lease back if `holder` has it."""
        ...

    def lease_notes(self, namespace: str) -> dict[str, str]:
        """Return the gate's notes on its Lease, service -> text (annotations `unrecorded.offhours.io/<service>`)."""
        ...

    def note_on_lease(self, namespace: str, holder: str, service: str, text: str | None) -> bool:
        """Write (with None: remove) a service's note on the Lease while `holder` holds it; False if it does not."""
        ...

    def gpu_quota(self, namespace: str) -> int | None:
        """Return the GPU requests the ResourceQuota `offhours-gpus` of `namespace` allows; None if it is missing."""
        ...

    def set_gpu_quota(self, namespace: str, gpus: int) -> None:
        """Create or update the ResourceQuota `offhours-gpus` of `namespace` to allow `gpus` GPU requests."""
        ...

    def pool_seats(self, namespaces: Collection[str]) -> list[PodSeat]:
        """Return the not-ended pods of `namespaces` bound or nominated to a node, as the scheduler counts them.

        As policy/holding.py reads them; PoolReadCutShort past MAX_POOL_PODS in a namespace.
        """
        ...

    def nodes_selected(self, labels: Collection[tuple[str, str]]) -> list[str]:
        """Return the names of the nodes carrying every one of `labels`; PoolReadCutShort past MAX_POOL_NODES."""
        ...

    def node_seats(self, namespace: str, node: str) -> list[PodSeat]:
        """Return the not-ended pods of `namespace` bound or nominated to `node`; PoolReadCutShort past MAX_NODE_PODS."""
        ...

    def delete_pod(self, namespace: str, name: str, uid: str, grace_seconds: int) -> None:
        """Delete that incarnation of a pod within `grace_seconds` (a squatter); a missing one is success."""
        ...

    def wait_for_workflow_change(self, namespace: str, timeout: float) -> bool:
        """Block up to `timeout` seconds; True as soon as an offhours workflow finished or was returned."""
        ...
