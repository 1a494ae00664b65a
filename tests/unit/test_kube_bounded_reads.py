"""KubeCluster's list reads are bounded: pages of a fixed size (limit/continue), finished workflows left out.

The stand-in answers the way kube-apiserver does (a page of `limit` items and a continue token, the
label selector applied server-side); it records every request, so the test sees what was asked.
"""

import json
from typing import Any

from kubernetes import client

from offhours.scripts.cluster import kube
from offhours.scripts.cluster.arguments import declared_arguments
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.cluster.template_grace import MAX_TEMPLATES


def workflow(name: str, completed: bool = False) -> dict[str, Any]:
    labels = {"offhours.io/service": "chat", "offhours.io/replicas": "1", "offhours.io/state": "parked",
              "offhours.io/managed": "true", **({"workflows.argoproj.io/completed": "true"} if completed else {})}
    return {"metadata": {"name": name, "uid": name, "labels": labels, "annotations": {},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"suspend": True}, "status": {"phase": "Succeeded" if completed else ""}}


def matches(labels: dict[str, str], selector: str) -> bool:
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=")
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=")
            if labels.get(key) != value:
                return False
    return True


class Server:
    """Pages over a list the way the API server does; remembers each request's arguments."""

    def __init__(self, workflows: list[dict[str, Any]]) -> None:
        self.workflows, self.requests = workflows, []  # type: ignore[var-annotated]

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      label_selector: str = "", limit: int | None = None,
                                      _continue: str | None = None) -> dict[str, Any]:
        self.requests.append({"selector": label_selector, "limit": limit, "continue": _continue})
        items = [w for w in self.workflows if matches(w["metadata"]["labels"], label_selector)]
        start = int(_continue or 0)
        end = start + limit if limit else len(items)
        token = str(end) if end < len(items) else None
        return {"items": items[start:end], "metadata": {"continue": token}}


def test_jobs_are_read_in_pages_and_finished_workflows_never_leave_the_server(monkeypatch: Any) -> None:
    """Fault: 10,000 retained finished workflows were listed, unpaginated, every tick, into a 512 MiB pod."""
    server = Server([workflow(f"done-{i}", completed=True) for i in range(1000)]
                    + [workflow(f"parked-{i}") for i in range(25)])
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.custom = server
    monkeypatch.setattr(kube, "PAGE_SIZE", 10)
    jobs = cluster.jobs("research", "chat")
    assert sorted(j.name for j in jobs) == sorted(f"parked-{i}" for i in range(25))
    assert [r["limit"] for r in server.requests] == [10, 10, 10]
    assert [r["continue"] for r in server.requests] == [None, "10", "20"]
    assert all(r["selector"] == "offhours.io/service=chat,workflows.argoproj.io/completed!=true"
               for r in server.requests)
    # The usage report wants the finished ones too: it pages through all of them.
    server.requests.clear()
    assert len(cluster.list_workflows("research")) == 1025 and len(server.requests) == 103


class Autoscaling:
    """HPAs listed the way the API server pages them; counts the list requests."""

    def __init__(self, targets: list[str]) -> None:
        self.targets, self.lists = targets, 0

    def list_namespaced_horizontal_pod_autoscaler(self, namespace: str, limit: int | None = None,
                                                  _continue: str | None = None) -> Any:
        self.lists += 1
        start = int(_continue or 0)
        end = start + (limit or len(self.targets))
        items = [client.V2HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name=t), spec=client.V2HorizontalPodAutoscalerSpec(
                max_replicas=20, min_replicas=1, scale_target_ref=client.V2CrossVersionObjectReference(
                    kind="Deployment", name=t)))
            for t in self.targets[start:end]]
        return client.V2HorizontalPodAutoscalerList(
            items=items, metadata=client.V1ListMeta(_continue=str(end) if end < len(self.targets) else None))


def test_one_list_of_the_namespaces_hpas_serves_every_service_of_a_tick(monkeypatch: Any) -> None:
    """Fault: each of 500 services listed every HPA of the namespace: 250,000 objects read a tick."""
    from offhours.scripts.cluster.base import Deployment

    hpas = Autoscaling([f"svc-{i}" for i in range(30)])
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.autoscaling = hpas
    monkeypatch.setattr(kube, "PAGE_SIZE", 20)
    clock = [0.0]
    cluster.monotonic = lambda: clock[0]
    found = [cluster.autoscaler(Deployment("serving", f"svc-{i}", f"svc-{i}", 20)) for i in range(40)]
    assert [f.name if f else None for f in found] == [f"svc-{i}" for i in range(30)] + [None] * 10
    assert hpas.lists == 2  # one list, in two pages
    clock[0] = 6.0  # a later tick lists again: an HPA added since is seen
    hpas.targets.append("svc-35")
    assert cluster.autoscaler(Deployment("serving", "svc-35", "svc-35", 20)) is not None and hpas.lists == 4


class Answer:
    """An HTTP answer as the client library's REST layer hands it on."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data, self.status, self.reason = json.dumps(body).encode(), 200, "OK"

    def getheaders(self) -> dict[str, str]:
        return {"Content-Type": "application/json"}

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.getheaders().get(name, default)


class ConfigMaps:
    """The API server's ConfigMap list: whole objects, or metadata only when the Accept header asks for it."""

    def __init__(self, records: dict[str, str]) -> None:
        self.records, self.answers = records, []  # type: ignore[var-annotated]

    def request(self, method: str, url: str, query_params: Any = None, headers: Any = None, **_: Any) -> Answer:
        query = dict(query_params or [])
        names = sorted(self.records)
        start = int(query.get("continue") or 0)
        end = start + int(query.get("limit") or len(names))
        metadata_only = "as=PartialObjectMetadataList" in str((headers or {}).get("Accept"))
        items = [{"metadata": {"name": n, "labels": {"offhours.io/managed": "true"}},
                  **({} if metadata_only else {"data": {"state.json": self.records[n]}})} for n in names[start:end]]
        body = {"kind": "PartialObjectMetadataList" if metadata_only else "ConfigMapList", "apiVersion": "v1",
                "metadata": {"continue": str(end) if end < len(names) else None}, "items": items}
        answer = Answer(body)
        self.answers.append(len(answer.data))
        return answer


def test_the_gates_list_of_its_records_reads_names_not_their_data(monkeypatch: Any) -> None:
    """Fault: every tick listed every state ConfigMap with its data to learn which services have a record."""
    big = json.dumps({"baseline": 8, "samples": {f"pod-{i}": [0.0, 1.0, 2.0, 3.0] for i in range(2000)}})
    records = {f"offhours-state-svc-{i:03d}": big for i in range(25)}
    server = ConfigMaps(records)
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    monkeypatch.setattr(cluster.api, "request", server.request)
    monkeypatch.setattr(kube, "PAGE_SIZE", 10)
    assert cluster.state_services("serving") == [f"svc-{i:03d}" for i in range(25)]
    assert len(server.answers) == 3  # paginated
    assert sum(server.answers) < len(big)  # all 25 names together weigh less than one record's data


class TemplateServer:
    """Pages over the namespace's WorkflowTemplates the way the API server does; remembers each request."""

    def __init__(self, templates: list[Any]) -> None:
        self.templates, self.requests = templates, []  # type: ignore[var-annotated]

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      limit: int | None = None, _continue: str | None = None) -> dict[str, Any]:
        self.requests.append({"plural": plural, "namespace": namespace, "limit": limit, "continue": _continue})
        start = int(_continue or 0)
        end = start + (limit or len(self.templates))
        return {"items": self.templates[start:end],
                "metadata": {"continue": str(end) if end < len(self.templates) else None}}


def test_templates_are_read_in_pages_and_hostile_ones_are_skipped(monkeypatch: Any) -> None:
    """Fault: a tenant's WorkflowTemplate of any shape, among many, must not fail the read of the others."""
    good = [{"metadata": {"name": f"t-{i}"}, "spec": {"arguments": {"parameters": [{"name": "gpus", "value": "1"}]}}}
            for i in range(23)]
    hostile = ["not an object", {"metadata": None}, {"metadata": "x"}, {"metadata": {"name": "no-spec"}},
               {"metadata": {"name": "odd"}, "spec": {"arguments": {"parameters": [None, {"name": 7}, {"name": "x"}]}}}]
    server = TemplateServer(good + hostile)
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.custom = server
    monkeypatch.setattr(kube, "PAGE_SIZE", 10)
    got = cluster.workflow_templates("research")
    assert sorted(got) == sorted([f"t-{i}" for i in range(23)] + ["no-spec", "odd"])
    assert {name: declared_arguments(t) for name, t in got.items()} == {
        **{f"t-{i}": ("gpus",) for i in range(23)}, "no-spec": (), "odd": ("x",)}
    assert [(r["plural"], r["namespace"], r["limit"], r["continue"]) for r in server.requests] == [
        ("workflowtemplates", "research", 10, None), ("workflowtemplates", "research", 10, "10"),
        ("workflowtemplates", "research", 10, "20")]


def test_templates_past_the_bound_are_not_read(monkeypatch: Any) -> None:
    """Fault: a tenant's thousands of WorkflowTemplates made the gate's per-tick read as long as they liked."""
    server = TemplateServer([{"metadata": {"name": f"t-{i:04d}"}, "spec": {}} for i in range(MAX_TEMPLATES + 300)])
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.custom = server
    monkeypatch.setattr(kube, "PAGE_SIZE", 200)
    got = cluster.workflow_templates("research")
    assert len(got) == MAX_TEMPLATES and "t-0000" in got and f"t-{MAX_TEMPLATES:04d}" not in got
    assert [r["limit"] for r in server.requests] == [200, 200, MAX_TEMPLATES - 400]
