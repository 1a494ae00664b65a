"""End to end: a LeaderWorkerSet's GPUs per replica read as its whole group, on the real API server.

The LeaderWorkerSet CRD is defined here with the scale subresource its project declares (replicas at
`.spec.replicas`, the selector at `.status.hpaPodSelector`, which selects the leader pods only); its controller
is this test, which makes each group's pods as the LWS controller names and labels them (a leader `<name>-<i>`
and workers `<name>-<i>-<j>`, all labelled `leaderworkerset.sigs.k8s.io/name`). The gate's adapter
(`KubeCluster`) reads the target and its pods: one replica holds the leader's and every worker's GPUs, not the
leader's alone. The pods stay Pending (a node selector no node has): nothing is scheduled or preempted.
"""

import json
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.cluster.scale_target import LWS_NAME_LABEL

from .conftest import SERVING

GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "leaderworkerset", "kind": "LeaderWorkerSet"},
             "versions": [{"name": VERSION, "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                           "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                    "statusReplicasPath": ".status.replicas",
                                                                    "labelSelectorPath": ".status.hpaPodSelector"}}}]},
}
NOWHERE = {"offhours.io/pool": "no-such-pool"}


def template(gpus: int) -> dict[str, object]:
    return {"spec": {"nodeSelector": NOWHERE, "containers": [
        {"name": "vllm", "image": "vllm/vllm-openai:v0.12.0",
         "resources": {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@pytest.fixture
def lws(api: client.ApiClient, kubectl: Callable[..., str]) -> Iterator[str]:
    """LeaderWorkerSet `big`: 2 groups of 4 pods, a 2-GPU leader and three 8-GPU workers each."""
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(LWS_CRD))
    kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}", "--timeout=60s")
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LeaderWorkerSet",
            "metadata": {"name": "big", "namespace": SERVING, "labels": {"offhours.io/service": "big"}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": template(2),
                                                             "workerTemplate": template(8)}}}
    custom.create_namespaced_custom_object(GROUP, VERSION, SERVING, PLURAL, body)
    for group in range(2):
        for worker in range(4):
            name = f"big-{group}" if worker == 0 else f"big-{group}-{worker}"
            labels = {LWS_NAME_LABEL: "big", "leaderworkerset.sigs.k8s.io/group-index": str(group),
                      "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}
            core.create_namespaced_pod(SERVING, {"metadata": {"name": name, "labels": labels},
                                                 **template(2 if worker == 0 else 8)})
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, SERVING, PLURAL, "big", {"status": {
        "replicas": 2, "hpaPodSelector": f"{LWS_NAME_LABEL}=big,leaderworkerset.sigs.k8s.io/worker-index=0"}})
    yield "big"
    custom.delete_namespaced_custom_object(GROUP, VERSION, SERVING, PLURAL, "big")
    core.delete_collection_namespaced_pod(SERVING, label_selector=f"{LWS_NAME_LABEL}=big", grace_period_seconds=0)


def test_a_leaderworkerset_replica_holds_its_leaders_and_workers_gpus(api: client.ApiClient, lws: str) -> None:
    cluster = KubeCluster(api)
    target = cluster.deployment(SERVING, "big", f"{GROUP}/{VERSION}/LeaderWorkerSet/{lws}")
    assert target.selector.endswith("worker-index=0") and target.current_replicas == 2
    assert target.group_gpus == 2 + 3 * 8  # what its templates make one group request
    cluster.ready_pods(target)
    # The scale's selector selects the two 2-GPU leaders (2 GPUs a replica); a replica is 26 GPUs.
    assert target.gpus_per_replica == 26
