"""The Kubernetes adapter's park, against a fake Argo API: it behaves as the in-memory cluster's does.

The fault both guard against: a workflow a tenant made under the copy's usual name, labelled copy-of the
original's UID (labels are anyone's to write), was taken for the gate's copy: nothing of the gate's was
parked, and the tenant's spec ran the stopped run. Only a copy whose UID the gate recorded is its own.
"""

import copy
import itertools
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster.base import ParkedCopy
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.names import LABEL_COPY_OF
from offhours.scripts.policy.plan import ADMITTED, Job


class FakeArgo:
    """Workflows by name: get, create (409 on a taken name, generateName), list by one `key=value` selector."""

    def __init__(self) -> None:
        self.workflows: dict[str, dict[str, Any]] = {}
        self.serial = itertools.count(1)

    def get_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str, name: str) -> dict[str, Any]:
        if name not in self.workflows:
            raise ApiException(status=404)
        return copy.deepcopy(self.workflows[name])

    def create_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str,
                                        body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        meta = body["metadata"]
        if "generateName" in meta:
            meta["name"] = f"{meta.pop('generateName')}{next(self.serial):05d}"
        if meta["name"] in self.workflows:
            raise ApiException(status=409)
        meta["uid"] = f"uid-{next(self.serial)}"
        self.workflows[meta["name"]] = body
        return copy.deepcopy(body)

    def list_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str, label_selector: str = "",
                                      **_: Any) -> dict[str, Any]:
        key, _, value = label_selector.partition("=")
        return {"items": [copy.deepcopy(w) for w in self.workflows.values()
                          if w["metadata"].get("labels", {}).get(key) == value], "metadata": {}}


def original() -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "train", "namespace": "research", "uid": "u-train",
                         "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "2",
                                    "offhours.io/run-id": "train", "offhours.io/state": "admitted"},
                         "annotations": {}},
            "spec": {"arguments": {"parameters": [{"name": "run-id", "value": "train"}]}},
            "status": {"phase": "Running"}}


def decoy() -> dict[str, Any]:
    wf = original()
    wf["metadata"].update(name="train-p1", uid="u-decoy")
    wf["metadata"]["labels"][LABEL_COPY_OF] = "u-train"
    return wf


class FakePods:
    """The API server's pod list by Argo's workflow label: the pods a test set, each owned by its workflow."""

    def __init__(self) -> None:
        self.pods: dict[str, list[client.V1Pod]] = {}

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", **_: Any) -> client.V1PodList:
        _, _, workflow = label_selector.partition("=")
        return client.V1PodList(items=list(self.pods.get(workflow, [])), metadata=client.V1ListMeta())


class Kube:
    def __init__(self) -> None:
        self.api = FakeArgo()
        self.core = FakePods()
        self.cluster = KubeCluster(client.ApiClient(client.Configuration()))
        self.cluster.custom = self.api
        self.cluster.core = self.core

    def add(self, wf: dict[str, Any]) -> None:
        self.api.workflows[wf["metadata"]["name"]] = wf

    def names(self) -> list[str]:
        return sorted(self.api.workflows)


class Memory:
    def __init__(self) -> None:
        self.cluster = MemoryCluster()

    def add(self, wf: dict[str, Any]) -> None:
        self.cluster.workflows[("research", wf["metadata"]["name"])] = wf

    def names(self) -> list[str]:
        return sorted(name for _, name in self.cluster.workflows)


JOB = Job(name="train", service="chat", replicas=2, state=ADMITTED, uid="u-train")


@pytest.mark.parametrize("kind", [Kube, Memory])
def test_a_linked_decoy_under_the_copys_name_is_never_the_copy(kind: type[Kube | Memory]) -> None:
    h = kind()
    h.add(original())
    h.add(decoy())
    made = h.cluster.park_copy("research", JOB, (), "t0k3n")
    assert made.name.startswith("train-p1-") and made.uid not in ("", "u-decoy")
    assert h.names() == ["train", "train-p1", made.name]
    assert h.cluster.park_copy("research", JOB, {made.uid}, "t0k3n") == made  # parked again: found by its UID
    assert h.names() == ["train", "train-p1", made.name]


@pytest.mark.parametrize("kind", [Kube, Memory])
def test_a_copy_the_gate_recorded_under_the_usual_name_is_found_again(kind: type[Kube | Memory]) -> None:
    h = kind()
    h.add(original())
    first = h.cluster.park_copy("research", JOB, (), "t0k3n")
    assert first.name == "train-p1"
    assert h.cluster.park_copy("research", JOB, {first.uid, "u-other"}, "t0k3n") == first
    assert h.names() == ["train", "train-p1"]
    copy_ = h.cluster.workflow("research", "train-p1")
    assert copy_ is not None and copy_["metadata"]["annotations"]["offhours.io/copy-token"] == "t0k3n"
    assert isinstance(first, ParkedCopy)
