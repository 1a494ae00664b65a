"""End to end: the gate as a controller among other writers, on the local control plane.

Real: API server, controller-manager (its HPA controller clamps replicas to maxReplicas), Argo
controller, the gate with the gate ServiceAccount's token. Stand-ins: kwok nodes, emulated vLLM.
"""

import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.gate.controller import Gate
from offhours.scripts.policy.record import ServiceRecord

from . import test_gate_e2e
from .conftest import RESEARCH, SERVING, wait
from .test_gate_e2e import ServingLoad, _job, _tick
from .test_pipeline_e2e import GROUP, VERSION

gate_setup = test_gate_e2e.gate_setup  # the fixture, shared by name


def record(api: client.ApiClient) -> ServiceRecord:
    cm = client.CoreV1Api(api).read_namespaced_config_map("offhours-state-chat", SERVING)
    return ServiceRecord.from_json(cm.data["state.json"])


def lend_one(api: client.ApiClient, setup: dict[str, Any], name: str) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", _job(name))
    load: ServingLoad = setup["load"]
    load.rps = 5.0
    for _ in range(4):
        _tick(setup)
    wf = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
    assert wf["metadata"]["labels"]["offhours.io/state"] == "admitted", setup["log"].getvalue()


def writers(api: client.ApiClient) -> str:
    """Who last wrote chat's Deployment and when: names the writer when a count is not the gate's."""
    dep = client.AppsV1Api(api).read_namespaced_deployment("chat", SERVING)
    return ", ".join(f"{f.manager} {f.operation} {f.time}" for f in dep.metadata.managed_fields or [])


def test_a_human_scale_up_during_lending_is_kept(api: client.ApiClient, gate_setup: dict[str, Any]) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    lend_one(api, gate_setup, "research-h")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15, (
        writers(api), gate_setup["log"].getvalue())
    assert record(api).baseline == 16 and record(api).applied == 15
    # On-call scales to 16 for an incident, with the admin's credentials (not the gate's).
    apps.patch_namespaced_deployment_scale("chat", SERVING, {"spec": {"replicas": 16}})
    for _ in range(3):
        _tick(gate_setup)
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16, gate_setup["log"].getvalue()
    assert record(api).baseline == 17
    events = core.list_namespaced_event(SERVING, field_selector="involvedObject.name=chat").items
    assert any(e.reason == "ReplicasAdopted" and "set to 16 by someone else" in e.message for e in events)


def test_with_a_real_hpa_the_gate_caps_max_replicas_and_the_hpa_controller_scales(
        api: client.ApiClient, gate_setup: dict[str, Any], kubectl: Callable[..., str]) -> None:
    apps, autoscaling = client.AppsV1Api(api), client.AutoscalingV2Api(api)
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "chat", "namespace": SERVING},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"},
                    "minReplicas": 1, "maxReplicas": 16,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                        "type": "Utilization", "averageUtilization": 80}}}]}}
    kubectl("apply", "-f", "-", stdin=json.dumps(hpa))
    try:
        lend_one(api, gate_setup, "research-hpa")
        assert autoscaling.read_namespaced_horizontal_pod_autoscaler("chat", SERVING).spec.max_replicas == 15
        assert record(api).writes_to == "HorizontalPodAutoscaler/chat"
        # The HPA controller (in the real controller-manager), not the gate, brings replicas under the cap.
        wait("the HPA controller to clamp chat to 15", lambda: apps.read_namespaced_deployment(
            "chat", SERVING).spec.replicas == 15, timeout=90)
        # spec.replicas was last written by the controller-manager (the one offhours-kube binary), not by the gate.
        managers = {f.manager for f in apps.read_namespaced_deployment("chat", SERVING).metadata.managed_fields or []}
        assert "offhours-kube" in managers and not any((m or "").startswith("OpenAPI-Generator") for m in managers), \
            managers
        gate_setup["load"].rps = 150.0  # reclaim: the cap goes back up first
        out = _tick(gate_setup)
        assert out.decision.action == "reclaim", gate_setup["log"].getvalue()
        assert autoscaling.read_namespaced_horizontal_pod_autoscaler("chat", SERVING).spec.max_replicas == 16
    finally:
        kubectl("-n", SERVING, "delete", "hpa", "chat", "--ignore-not-found")


def test_gate_killed_mid_reclaim_and_serving_restored_by_the_next_tick(
        api: client.ApiClient, gate_setup: dict[str, Any]) -> None:
    apps = client.AppsV1Api(api)
    lend_one(api, gate_setup, "research-k")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15

    class Killed(BaseException):
        """The process dies: nothing after this line runs, the Lease is not given back."""

    class DiesAtScale(KubeCluster):
        def raise_serving(self, target: Any, observed: int, at_least: int) -> Any:
            raise Killed()

        def release_lease(self, namespace: str, holder: str) -> None:
            pass

    first: Gate = gate_setup["gate"]
    dying = Gate(first.config, DiesAtScale(gate_setup["gate_api"]), first.source, out=gate_setup["log"])
    gate_setup["load"].rps = 150.0
    # As a tick does: the counters grow for a while at the new rate before the scrape. Right after the
    # last tick they grew for milliseconds, and the rate since that tick's scrape read as still low.
    time.sleep(1.2)
    gate_setup["load"].advance()
    try:
        dying.tick()
        raise AssertionError("the dying gate should not have finished its tick:\n" + gate_setup["log"].getvalue())
    except Killed:
        pass
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15  # killed before the scale
    assert record(api).applying_from == 15 and record(api).applied == 16  # the intent was recorded first
    assert first.tick() == [], "the dead gate's Lease is still held"
    # A minute later on this gate's own clock, the dead holder's record has not changed: the Lease has expired.
    later = time.monotonic() + first.lease_seconds + 1
    first.cluster.lease_observer.monotonic = lambda: later  # type: ignore[attr-defined]
    out = _tick(gate_setup)
    assert out.decision.action == "reclaim", gate_setup["log"].getvalue()
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    assert record(api).baseline == 16 and record(api).applying_from is None, "its own write was not taken for another's"
