"""Observe: every read of a tick, as one snapshot per service (gate/snapshot.py): what reconcile decides on."""

from collections.abc import Callable, Sequence

from offhours.scripts.cluster.base import Cluster
from offhours.scripts.cluster.scale_target import measured_policy  # hook: scale target
from offhours.scripts.gate.admissions import lineages_of, returned_by_record
from offhours.scripts.gate.snapshot import Observed, writes_to
from offhours.scripts.metrics.sources import LoadSource, Reading, ServiceTarget
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.policy.record import ServiceRecord, UnrecordedWrite


def observe_service(cluster: Cluster, namespace: str, workflow_namespace: str, policy: ServicePolicy,
                    note: Callable[[str], UnrecordedWrite | None]) -> Observed:
    """Read one service: its Deployment, autoscaler, record, workflows and ready pods (five reads, whatever tenants made).

    `note` answers the gate's unrecorded raise of a service (this process's, or one noted on the Lease).
    """
    dep = cluster.deployment(namespace, policy.name, policy.deployment)
    scaler = cluster.autoscaler(dep)
    text = cluster.read_state(namespace, policy.name)
    listed = cluster.jobs(workflow_namespace, policy.name)
    pods = cluster.ready_pods(dep)
    record = ServiceRecord.from_json(text)
    unrecorded = note(policy.name)
    if unrecorded is not None:
        record = unrecorded.supersede(record, text, dep.uid, writes_to(scaler))
    jobs, returned = returned_by_record(listed, record, dep.uid)
    # hook: scale target (GPUs per replica as measured on the target's pods)
    return Observed(measured_policy(policy, dep), dep, scaler, record, jobs, pods, text, lineages_of(record, jobs),
                    returned)


def read_load(source: LoadSource, observed: Sequence[Observed], now: float) -> dict[str, Reading]:
    """Read every observed service's load at once; a broken source is a failed reading for each, never a crash."""
    if not observed:
        return {}
    targets = [ServiceTarget(o.policy.name, o.pods, o.record.samples if o.record.deployment_uid == o.dep.uid else {})
               for o in observed]
    try:
        return source.read(targets, now)
    except Exception as err:  # noqa: BLE001 - a broken source is a failed reading for every service, not a crash
        return {t.service: Reading(None, f"load source failed: {describe(err)}") for t in targets}


def describe(err: BaseException) -> str:
    """Say what went wrong: the cluster's own errors as they are, any other with its type's name."""
    text = str(err)
    return text if type(err).__name__ in ("ClusterError", "LeaseLost") else f"{type(err).__name__}: {text}"
