"""End to end: serving workloads that are not Deployments, lent and restored through their `/scale` alone.

A StatefulSet (the real kube-controller-manager runs it) and a minimal CRD with a scale subresource, defined
here; its "controller" is this test: a thread that keeps one pod per replica and writes the status its scale
reads (replicas, selector). The gate (with the gate ServiceAccount's token: its rendered RBAC applies) lends
a replica, adopts a human's scale as the owner's, and restores the baseline on a reclaim; with the gate gone,
the backstop (with the backstop ServiceAccount's token) restores it. Stand-ins: kwok nodes, emulated vLLM.
"""

import io
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.backstop.restore import run_backstop
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.policy.record import ServiceRecord
from offhours.workflows.render import write
from tests.support.fleet import free_port

from .conftest import RESEARCH, SERVING, gate_config_raw, serving_deployment, stop_other_gates, wait
from .runner import LocalPodRunner
from .test_gate_e2e import ServingLoad, _job, _tick, token_client
from .test_pipeline_e2e import GROUP, VERSION

CRD_GROUP, CRD_VERSION, CRD_KIND, CRD_PLURAL = "e2e.offhours.io", "v1", "Server", "servers"
REPLICAS = 4
TARGETS = {
    "StatefulSet": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "chat"},
    CRD_KIND: {"apiVersion": f"{CRD_GROUP}/{CRD_VERSION}", "kind": CRD_KIND, "name": "chat"},
}


def serving_stateful_set(name: str, replicas: int, gpus: int = 4) -> dict[str, Any]:
    """The inference server as a StatefulSet (pods started in parallel: vLLM replicas need no order)."""
    manifest = serving_deployment(name, replicas, gpus)
    spec = {k: v for k, v in manifest["spec"].items() if k != "strategy"}
    return {**manifest, "kind": "StatefulSet", "spec": {**spec, "serviceName": name, "podManagementPolicy": "Parallel"}}


def config_raw(port: int, kind: str) -> dict[str, Any]:
    raw = gate_config_raw(port)
    chat = {k: v for k, v in raw["services"]["chat"].items() if k != "deployment"}
    raw["services"] = {"chat": {**chat, "scaleTargetRef": TARGETS[kind]}}
    return raw


SERVER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{CRD_PLURAL}.{CRD_GROUP}"},
    "spec": {"group": CRD_GROUP, "scope": "Namespaced",
             "names": {"plural": CRD_PLURAL, "singular": "server", "kind": CRD_KIND},
             "versions": [{"name": CRD_VERSION, "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                           "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                    "statusReplicasPath": ".status.replicas",
                                                                    "labelSelectorPath": ".status.selector"}}}]},
}


class ServerController:
    """The CRD's controller, played by the test: one pod per replica (`chat-<i>`), status.replicas and selector."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.template = serving_deployment("chat", 1)["spec"]["template"]

    def start(self) -> "ServerController":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)

    def _run(self) -> None:
        while not self.stopped.wait(0.5):
            try:
                self.reconcile()
            except ApiException:
                pass  # a conflict or a server gone for a moment: the next pass does it

    def reconcile(self) -> None:
        server = self.custom.get_namespaced_custom_object(CRD_GROUP, CRD_VERSION, SERVING, CRD_PLURAL, "chat")
        want = int((server.get("spec") or {}).get("replicas") or 0)
        pods = {p.metadata.name: p for p in self.core.list_namespaced_pod(SERVING, label_selector="app=chat").items
                if p.metadata.deletion_timestamp is None}
        for i in range(want):
            if f"chat-{i}" not in pods:
                self.core.create_namespaced_pod(SERVING, {"metadata": {"name": f"chat-{i}", **self.template["metadata"]},
                                                          "spec": self.template["spec"]})
        for name in pods:
            if int(name.rsplit("-", 1)[1]) >= want:
                self.core.delete_namespaced_pod(name, SERVING, grace_period_seconds=0)
        self.custom.patch_namespaced_custom_object_status(CRD_GROUP, CRD_VERSION, SERVING, CRD_PLURAL, "chat", {
            "status": {"replicas": min(want, len(pods)), "selector": "app=chat"}})


@pytest.fixture(scope="module")
def installed(kubectl: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """offhours rendered for a configuration naming both kinds (its RBAC lists statefulsets/scale, servers/scale)."""
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(SERVER_CRD))
    kubectl("wait", "--for=condition=Established", f"crd/{CRD_PLURAL}.{CRD_GROUP}", "--timeout=60s")
    raw = gate_config_raw(8000)
    raw["services"] = {"chat": config_raw(8000, "StatefulSet")["services"]["chat"],
                       "chat-crd": {**config_raw(8000, CRD_KIND)["services"]["chat"]}}
    out = tmp_path_factory.mktemp("manifests")
    write(out, yaml.safe_dump(raw))
    for ns in (SERVING, RESEARCH):
        kubectl("-n", ns, "delete", "serviceaccount,role,rolebinding,cronworkflow,cronjob", "-l",
                "offhours.io/managed=true", "--ignore-not-found", "--wait=true")
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(out))
    kubectl("-n", SERVING, "patch", "cronworkflow", "offhours-gate", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    kubectl("-n", SERVING, "patch", "cronjob", "offhours-backstop", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    return out


def _clear(kubectl: Callable[..., str]) -> None:
    """No other `chat` (an earlier file's Deployment) whose pods the selector app=chat would also select."""
    kubectl("-n", SERVING, "delete", "deployment,statefulset", "chat", "--ignore-not-found", "--wait=true")
    kubectl("-n", SERVING, "delete", CRD_PLURAL, "chat", "--ignore-not-found", "--wait=true")
    kubectl("-n", SERVING, "delete", "pod", "-l", "app=chat", "--ignore-not-found", "--wait=true", "--grace-period=0")
    kubectl("-n", SERVING, "delete", "configmap", "offhours-state-chat", "--ignore-not-found")


@pytest.fixture(params=["StatefulSet", CRD_KIND])
def target_setup(request: pytest.FixtureRequest, api: client.ApiClient, installed: Path, runner: LocalPodRunner,
                 cluster_env: dict[str, str], kubectl: Callable[..., str]) -> Iterator[dict[str, Any]]:
    kind: str = request.param
    custom = client.CustomObjectsApi(api)
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")
    stop_other_gates(api, kubectl)
    _clear(kubectl)
    controller = None
    if kind == "StatefulSet":
        kubectl("apply", "-f", "-", stdin=json.dumps(serving_stateful_set("chat", REPLICAS)))
    else:
        custom.create_namespaced_custom_object(CRD_GROUP, CRD_VERSION, SERVING, CRD_PLURAL, {
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}", "kind": CRD_KIND, "metadata": {"name": "chat"},
            "spec": {"replicas": REPLICAS}})
        controller = ServerController(api).start()
    port = free_port()
    load = ServingLoad(api, port)
    wait("chat's pods ready", lambda: len(load.ready_ips()) == REPLICAS, timeout=90)
    gate_api = token_client(api, cluster_env["KUBECONFIG"], SERVING, "offhours-gate")
    log = io.StringIO()
    gate = Gate(parse_config(config_raw(port, kind)), KubeCluster(gate_api), DirectSource(port=port), out=log,
                holder="gate/e2e")
    yield {"gate": gate, "load": load, "log": log, "gate_api": gate_api, "kind": kind, "api": api}
    load.stop()
    if controller is not None:
        controller.stop()
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")
    _clear(kubectl)


def scale(api: client.ApiClient, kind: str) -> int:
    """The target's replicas as its /scale holds them (read with the admin's credentials)."""
    ref = TARGETS[kind]
    target = KubeCluster(api).find_deployment(SERVING, f"{ref['apiVersion']}/{ref['kind']}/{ref['name']}")
    assert target is not None
    return target.replicas


def set_scale(api: client.ApiClient, kind: str, replicas: int) -> None:
    """A human's `kubectl scale`: a merge patch of /scale with no test."""
    body = {"spec": {"replicas": replicas}}
    if kind == "StatefulSet":
        client.AppsV1Api(api).patch_namespaced_stateful_set_scale("chat", SERVING, body)
    else:
        client.CustomObjectsApi(api).patch_namespaced_custom_object_scale(CRD_GROUP, CRD_VERSION, SERVING, CRD_PLURAL,
                                                                         "chat", body)


def record(api: client.ApiClient) -> ServiceRecord:
    cm = client.CoreV1Api(api).read_namespaced_config_map("offhours-state-chat", SERVING)
    return ServiceRecord.from_json(cm.data["state.json"])


def lend_one(api: client.ApiClient, setup: dict[str, Any], name: str) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", _job(name))
    setup["load"].rps = 5.0  # one replica of 4 serves it
    for _ in range(4):
        _tick(setup)
    wf = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
    assert wf["metadata"]["labels"]["offhours.io/state"] == "admitted", setup["log"].getvalue()


def test_lent_a_humans_scale_adopted_and_restored_on_a_reclaim(api: client.ApiClient,
                                                               target_setup: dict[str, Any]) -> None:
    kind = target_setup["kind"]
    lend_one(api, target_setup, f"research-{kind.lower()}")
    assert scale(api, kind) == REPLICAS - 1, target_setup["log"].getvalue()
    ref = TARGETS[kind]
    lent = record(api)
    assert (lent.baseline, lent.applied) == (REPLICAS, REPLICAS - 1)
    assert lent.deployment == f"{ref['apiVersion']}/{kind}/chat"  # what the backstop restores by
    wait("the lend to reach the pods", lambda: len(target_setup["load"].ready_ips()) == REPLICAS - 1, timeout=60)
    set_scale(api, kind, REPLICAS)  # on-call, for an incident, with the admin's credentials
    for _ in range(2):
        _tick(target_setup)
    assert scale(api, kind) == REPLICAS, target_setup["log"].getvalue()
    assert record(api).baseline == REPLICAS + 1, target_setup["log"].getvalue()  # the human's replica is the owner's
    target_setup["load"].rps = 150.0
    out = _tick(target_setup)
    assert out.decision.action == "reclaim", target_setup["log"].getvalue()
    assert scale(api, kind) == REPLICAS + 1 == record(api).baseline


def test_with_the_gate_gone_the_backstop_restores_the_target(api: client.ApiClient, target_setup: dict[str, Any],
                                                             cluster_env: dict[str, str]) -> None:
    kind = target_setup["kind"]
    lend_one(api, target_setup, f"research-bs-{kind.lower()}")
    assert scale(api, kind) == REPLICAS - 1
    lent = record(api)
    assert lent.lease_seconds is not None and lent.renewed_at is not None
    backstop = KubeCluster(token_client(api, cluster_env["KUBECONFIG"], SERVING, "offhours-backstop"))
    # No tick renews the lease from here on: the gate is gone. Within its lease, the backstop changes nothing.
    assert run_backstop(backstop, SERVING, out=io.StringIO()) == []
    assert scale(api, kind) == REPLICAS - 1
    expired = lent.renewed_at + 2 * lent.lease_seconds + 1  # past the bound even with the Lease held by the gate
    done = run_backstop(backstop, SERVING, clock=lambda: expired, out=io.StringIO())
    assert [(d.service, d.value, d.error) for d in done] == [("chat", REPLICAS, False)], done
    assert scale(api, kind) == REPLICAS
    events = client.CoreV1Api(api).list_namespaced_event(SERVING, field_selector="involvedObject.name=chat").items
    assert any(e.reason == "LendingExpired" and e.involved_object.kind == kind for e in events)
