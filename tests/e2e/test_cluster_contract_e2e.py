"""The `Cluster` contract on the real API server, through `KubeCluster` (the same checks as offline)."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from tests.support.cluster_contract import CONTRACT, Harness

from .conftest import RESEARCH, SERVING, serving_deployment, wait
from .test_pipeline_e2e import GROUP, VERSION, workflow


class KubeHarness:
    serving, research = SERVING, RESEARCH

    def __init__(self, api: client.ApiClient, kubectl: Callable[..., str]) -> None:
        self.api, self.kubectl, self.cluster = api, kubectl, KubeCluster(api)
        self.created: list[tuple[str, str]] = []

    def add_service(self, name: str, replicas: int) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment(name, replicas, gpus=0)))
        self.created.append(("deployment", name))
        apps = client.AppsV1Api(self.api)
        wait(f"{name} ready", lambda: (apps.read_namespaced_deployment(name, SERVING).status.ready_replicas or 0)
             == replicas, timeout=60)

    def add_parked(self, name: str, service: str, replicas: int) -> None:
        wf = workflow(name, "offhours-job", {"service": service, "replicas": str(replicas), "run-id": name,
                                             "output-uri": "s3://o", "checkpoint-uri": "s3://c", "gpus": "0"},
                      suspend=True, annotations={"offhours.io/e2e-run-for": "600s"})
        wf["metadata"]["labels"] = {"offhours.io/service": service, "offhours.io/replicas": str(replicas),
                                    "offhours.io/state": "parked", "offhours.io/managed": "true"}
        client.CustomObjectsApi(self.api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf)

    def read_workflow(self, name: str) -> dict[str, Any]:
        return dict(client.CustomObjectsApi(self.api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH,
                                                                                   "workflows", name))

    def replicas(self, deployment: str) -> int:
        return int(client.AppsV1Api(self.api).read_namespaced_deployment(deployment, SERVING).spec.replicas)


@pytest.fixture
def kube_harness(api: client.ApiClient, installed: Any, kubectl: Callable[..., str]) -> Iterator[KubeHarness]:
    harness = KubeHarness(api, kubectl)
    yield harness
    for kind, name in harness.created:
        kubectl("-n", SERVING, "delete", kind, name, "--ignore-not-found", "--wait=false")
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows", label_selector="offhours.io/managed=true")


@pytest.mark.parametrize("check", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_kube_cluster_keeps_the_contract(check: Callable[[Harness], None], kube_harness: KubeHarness) -> None:
    check(kube_harness)
