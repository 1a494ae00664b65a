"""The pods of the stopped jobs are read in bounded pages, and one job's thousands of pods leave the others measured.

`KubeCluster.workflow_pods` listed the pods of every stopped workflow being measured in one unpaginated
list: a job that left thousands of pods (a fan-out, or retries kept until pod GC) made that answer
unbounded, and the read ran past the advisory timeout every tick (abandoned in its thread, still
decoding), so no stop of the service was measured at all.
"""

from typing import Any

from kubernetes import client

from offhours.scripts.cluster import kube
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.names import ARGO_WORKFLOW_LABEL


class Pods:
    """The API server's pod list: the label selector applied server-side (`=` or `in (...)`), pages of `limit`."""

    def __init__(self, pods: dict[str, int]) -> None:
        self.pods, self.requests = pods, []  # type: ignore[var-annotated]

    def _owners(self, selector: str) -> list[str]:
        key, _, rest = selector.partition(" in (")
        if rest:
            assert key == ARGO_WORKFLOW_LABEL
            return rest.rstrip(")").split(",")
        key, _, value = selector.partition("=")
        assert key == ARGO_WORKFLOW_LABEL
        return [value]

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", limit: int | None = None,
                            _continue: str | None = None) -> Any:
        self.requests.append({"selector": label_selector, "limit": limit, "continue": _continue})
        items = [(owner, i) for owner in sorted(self._owners(label_selector)) for i in range(self.pods.get(owner, 0))]
        start = int(_continue or 0)
        end = start + limit if limit else len(items)
        at = client.V1ObjectMeta(name="x").creation_timestamp
        page = [client.V1Pod(metadata=client.V1ObjectMeta(
            name=f"{owner}-{i}", labels={ARGO_WORKFLOW_LABEL: owner}, creation_timestamp=at,
            owner_references=[client.V1OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow",
                                                      name=owner, uid=f"uid-{owner}")]),
                             status=client.V1PodStatus()) for owner, i in items[start:end]]
        return client.V1PodList(items=page, metadata=client.V1ListMeta(_continue=str(end) if end < len(items) else None))


def test_the_pods_of_stopped_jobs_are_read_in_pages_and_a_huge_job_leaves_the_others_measured(monkeypatch: Any) -> None:
    """Fault: one unpaginated list of every stopped job's pods; a job with thousands of pods made it unbounded."""
    server = Pods({"fanout": 5000, "small": 2})
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.core = server
    monkeypatch.setattr(kube, "PAGE_SIZE", 100)
    pods = cluster.workflow_pods("research", {"fanout": "uid-fanout", "small": "uid-small"})
    assert all(r["limit"] == 100 for r in server.requests), server.requests  # every answer is bounded
    assert [p.name for p in pods["small"]] == ["small-0", "small-1"]
    assert "fanout" not in pods  # more pods than one read keeps: not measured this tick (its prior stays)
    read = sum(1 for r in server.requests if "fanout" in r["selector"])
    assert read * 100 <= kube.MAX_WORKFLOW_PODS + 100
