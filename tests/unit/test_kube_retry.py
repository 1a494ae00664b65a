"""KubeCluster's retry policy: conflicts, throttling and server errors are retried with backoff, then reported."""

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.kube import KubeCluster


def cluster_with_sleeps() -> tuple[KubeCluster, list[float]]:
    sleeps: list[float] = []
    return KubeCluster(client.ApiClient(client.Configuration()), retries=4, backoff=0.1, sleep=sleeps.append), sleeps


def failing(statuses: list[int], result: str = "ok"):  # type: ignore[no-untyped-def]
    calls = {"n": 0}

    def call() -> str:
        calls["n"] += 1
        if statuses:
            raise ApiException(status=statuses.pop(0), reason="test")
        return result
    return call, calls


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_transient_answers_are_retried_with_exponential_backoff(status: int) -> None:
    cluster, sleeps = cluster_with_sleeps()
    call, calls = failing([status, status])
    assert cluster._call("scale deployment serving/chat to 8", call) == "ok"
    assert calls["n"] == 3 and sleeps == [0.1, 0.2]


def test_retries_run_out_into_one_error_naming_the_call() -> None:
    cluster, sleeps = cluster_with_sleeps()
    call, calls = failing([503] * 10)
    with pytest.raises(ClusterError, match=r"scale deployment serving/chat to 8: HTTP 503"):
        cluster._call("scale deployment serving/chat to 8", call)
    assert calls["n"] == 5 and sleeps == [0.1, 0.2, 0.4, 0.8]


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_permanent_answers_are_not_retried(status: int) -> None:
    cluster, sleeps = cluster_with_sleeps()
    call, calls = failing([status])
    with pytest.raises(ClusterError, match=f"HTTP {status}"):
        cluster._call("patch workflow research/x", call)
    assert calls["n"] == 1 and sleeps == []


def test_accepted_statuses_are_results_not_errors() -> None:
    cluster, sleeps = cluster_with_sleeps()
    call, calls = failing([404])
    assert cluster._call("get workflow research/gone", call, accept={404: None}) is None
    assert calls["n"] == 1 and sleeps == []
