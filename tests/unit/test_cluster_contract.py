"""The `Cluster` contract on the in-memory cluster (tests/e2e runs the same checks on the real API server)."""

import time
from collections.abc import Callable
from typing import Any

import pytest

from offhours.scripts.cluster.base import Autoscaler
from offhours.scripts.cluster.memory import MemoryCluster
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


@pytest.mark.parametrize("check", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_memory_cluster_keeps_the_contract(check: Callable[[Harness], None]) -> None:
    check(MemoryHarness())
