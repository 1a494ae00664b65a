"""The interface the gate and the exit hook act through, and the names offhours writes on objects.

Two implementations: `memory.MemoryCluster` (tests, simulator) and `kube.KubeCluster` (the
Kubernetes API with the `kubernetes` client). Everything offhours remembers lives on these
objects: the baseline and the gate's state on the Deployment, admission on the workflows.
"""

from dataclasses import dataclass, field
from typing import Any, Protocol

from offhours.scripts.policy.plan import Job

ANNOTATION_BASELINE = "offhours.io/baseline-replicas"
ANNOTATION_GATE_STATE = "offhours.io/gate-state"
ANNOTATION_PREEMPTIONS = "offhours.io/preemptions"
ANNOTATION_PRIORITY = "offhours.io/priority"
ANNOTATION_PROGRESS = "offhours.io/last-checkpoint"
ANNOTATION_GPU_SECONDS = "offhours.io/gpu-seconds"
ANNOTATION_PARKED_FROM = "offhours.io/parked-from"
ANNOTATION_ADMITTED_AT = "offhours.io/admitted-at"
LABEL_STATE = "offhours.io/state"
LABEL_SERVICE = "offhours.io/service"
LABEL_REPLICAS = "offhours.io/replicas"
STATE_PARKED = "parked"
STATE_ADMITTED = "admitted"
STATE_PREEMPTED = "preempted"
STATE_RETURNED = "returned"
FINISHED_PHASES = ("Succeeded", "Failed", "Error")
LEASE_NAME = "offhours-gate"
HOLD_REASON = "GateHold"


def aggregated_event_name(name: str, reason: str) -> str:
    """Name of the one Event kept per object and reason when repeats are counted."""
    return f"{name}.{reason.lower()}"


class ClusterError(RuntimeError):
    """The API answered with an error that retries did not cure; names the call and the answer."""


@dataclass
class Deployment:
    """An inference Deployment as offhours sees it."""

    namespace: str
    name: str
    service: str
    replicas: int
    annotations: dict[str, str] = field(default_factory=dict)
    selector: dict[str, str] = field(default_factory=dict)

    @property
    def baseline(self) -> int | None:
        """The recorded baseline replicas, or None before the first change."""
        value = self.annotations.get(ANNOTATION_BASELINE)
        return int(value) if value is not None else None


@dataclass(frozen=True)
class Pod:
    """A ready serving pod: name and IP (for direct scraping)."""

    name: str
    ip: str


class Cluster(Protocol):
    """What the gate and the exit hook need from Kubernetes and Argo."""

    def deployment(self, namespace: str, service: str, name: str | None = None) -> Deployment:
        """Return the Deployment of `service` (by name, or by label offhours.io/service)."""
        ...

    def annotate_deployment(self, dep: Deployment, annotations: dict[str, str]) -> None:
        """Merge annotations into the Deployment."""
        ...

    def scale(self, dep: Deployment, replicas: int) -> None:
        """Set the Deployment's replicas through the scale subresource."""
        ...

    def ready_pods(self, dep: Deployment) -> list[Pod]:
        """Return the Deployment's ready pods."""
        ...

    def jobs(self, namespace: str, service: str) -> list[Job]:
        """Return the unfinished offhours workflows that borrow from `service`."""
        ...

    def workflow(self, namespace: str, name: str) -> dict[str, Any] | None:
        """Return a workflow object, or None if it does not exist."""
        ...

    def admit(self, namespace: str, job: Job) -> None:
        """Resume a parked workflow and mark it admitted."""
        ...

    def adopt(self, namespace: str, job: Job) -> None:
        """Mark a workflow that runs without admission as admitted."""
        ...

    def stop(self, namespace: str, job: Job) -> None:
        """Stop a workflow (`spec.shutdown: Stop`: exit handlers run) and mark it preempted."""
        ...

    def park_copy(self, namespace: str, job: Job) -> str:
        """Create a parked (suspended) copy of a stopped workflow; return its name."""
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
