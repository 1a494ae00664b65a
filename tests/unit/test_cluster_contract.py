"""The `Cluster` contract on the in-memory cluster (tests/e2e runs the same checks on the real API server)."""

import time
from collections.abc import Callable
from typing import Any

import pytest

from offhours.scripts.cluster.base import Autoscaler, Pod
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.policy.target import ScaleTargetRef
from tests.support.cluster_contract import CONTRACT, Harness


class MemoryHarness:
    serving, research = "serving", "research"

    def __init__(self) -> None:
        self.cluster = MemoryCluster(clock=time.time())  # the in-memory API server's clock

    def add_service(self, name: str, replicas: int) -> None:
        self.cluster.add_deployment(self.serving, name, replicas)

    def add_parked(self, name: str, service: str, replicas: int) -> None:
        self.cluster.add_workflow(self.research, name, service, replicas)

    def read_workflow(self, name: str) -> dict[str, Any]:
        return self.cluster.workflows[(self.research, name)]

    def replicas(self, deployment: str) -> int:
        return self.cluster.deployments[(self.serving, deployment)].replicas

    def set_replicas(self, deployment: str, replicas: int) -> None:
        self.cluster.deployments[(self.serving, deployment)].replicas = replicas

    def add_hpa(self, deployment: str, low: int, high: int) -> None:
        self.cluster.autoscalers[(self.serving, deployment)] = Autoscaler(
            "HorizontalPodAutoscaler", self.serving, f"{deployment}-hpa", low, high)

    def set_max_replicas(self, deployment: str, high: int) -> None:
        self.cluster.autoscalers[(self.serving, deployment)].max_replicas = high

    def add_stateful_set(self, name: str, replicas: int) -> None:
        dep = self.cluster.add_deployment(self.serving, name, replicas, ref=ScaleTargetRef("apps/v1", "StatefulSet", name))
        self.cluster.pods[(self.serving, name)] = [Pod(f"{name}-{i}", f"10.1.0.{i + 1}") for i in range(dep.replicas)]

    def scale_of(self, kind: str, name: str) -> int:
        dep = self.cluster.deployments[(self.serving, name)]
        assert dep.kind == kind
        return dep.replicas

    def set_scale(self, kind: str, name: str, replicas: int) -> None:
        assert self.cluster.deployments[(self.serving, name)].kind == kind
        self.cluster.deployments[(self.serving, name)].replicas = replicas

    def add_config_map(self, name: str) -> None:
        self.cluster.add_deployment(self.serving, name, 0, ref=ScaleTargetRef("v1", "ConfigMap", name))
        self.cluster.unscalable_kinds.add("ConfigMap")

    def controlled_replica_set(self, deployment: str) -> str:
        name = f"{deployment}-5d8f7"
        self.cluster.add_deployment(self.serving, deployment, 1, ref=ScaleTargetRef("apps/v1", "ReplicaSet", name))
        self.cluster.controllers[(self.serving, name)] = ("Deployment", deployment)
        return name


@pytest.mark.parametrize("check", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_memory_cluster_keeps_the_contract(check: Callable[[Harness], None]) -> None:
    check(MemoryHarness())
