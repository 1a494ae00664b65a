"""A stop is measured from the workflow's own pods, not from any pod that carries its workflow label."""

from datetime import datetime, timezone
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.names import ARGO_WORKFLOW_LABEL, GPU_RESOURCE
from offhours.scripts.policy.release import release_seconds

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Pods:
    """The research namespace's pods: the victim's one Argo pod (owned by its Workflow), ended, and `extra`."""

    def __init__(self, extra: list[Any]) -> None:
        own = client.V1Pod(
            metadata=client.V1ObjectMeta(name="victim-1", labels={ARGO_WORKFLOW_LABEL: "victim"}, creation_timestamp=AT,
                                         owner_references=[client.V1OwnerReference(
                                             api_version="argoproj.io/v1alpha1", kind="Workflow", name="victim",
                                             uid="u-1")]),
            status=client.V1PodStatus(phase="Failed", container_statuses=[client.V1ContainerStatus(
                name="main", image="i", image_id="", ready=False, restart_count=0,
                state=client.V1ContainerState(terminated=client.V1ContainerStateTerminated(
                    exit_code=143, finished_at=AT.replace(second=20))))]))
        self.items = [own, *extra]

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", limit: int | None = None,
                            _continue: str | None = None) -> Any:
        return client.V1PodList(items=self.items, metadata=client.V1ListMeta())


def _pending_gpu_pod(name: str, owners: list[client.V1OwnerReference] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={ARGO_WORKFLOW_LABEL: "victim"},
                                     creation_timestamp=AT.replace(second=30), owner_references=owners),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", resources=client.V1ResourceRequirements(
            limits={GPU_RESOURCE: "1"}))]),
        status=client.V1PodStatus(phase="Pending"))


@pytest.mark.parametrize("forged", [
    _pending_gpu_pod("no-owner"),
    # An owner reference a tenant wrote itself: the name is right, the uid is not the stopped Workflow's.
    _pending_gpu_pod("wrong-uid", [client.V1OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow",
                                                           name="victim", uid="u-forged")]),
    _pending_gpu_pod("not-a-workflow", [client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="victim",
                                                                uid="u-1")]),
], ids=lambda p: p.metadata.name)
def test_a_pod_labelled_by_another_tenant_does_not_hold_a_stop_unmeasured(forged: client.V1Pod) -> None:
    """Fault: any tenant's pending GPU pod labelled with another's workflow name keeps that workflow's stop unmeasured."""
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.core = Pods([forged])
    pods = cluster.workflow_pods("research", {"victim": "u-1"})["victim"]
    assert [p.name for p in pods] == ["victim-1"]
    # Stopped at :10, the victim's pod ended at :20; a pending pod that never ends must not hold the measurement.
    assert release_seconds(AT.timestamp() + 10, pods, now=AT.timestamp() + 600) == 10


def test_a_stop_recorded_by_an_older_gate_without_a_uid_still_counts_only_pods_a_workflow_owns() -> None:
    """An older record keeps no uid: the pods any Workflow of that name owns count, a bare labelled pod does not."""
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.core = Pods([_pending_gpu_pod("no-owner")])
    assert [p.name for p in cluster.workflow_pods("research", {"victim": ""})["victim"]] == ["victim-1"]
