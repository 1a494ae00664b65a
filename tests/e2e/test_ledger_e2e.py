"""End to end: what the gate lowered comes back after the service is renamed and moved (issue 31 §5).

Real: API server, controller-manager, Argo controller, the gate with the gate ServiceAccount's token (its
Role rendered from the installed configuration). The gate lends one replica of chat, then its configuration
renames the service and points it at another Deployment: the next tick gives chat its replicas back, by the
gate's ledger (ConfigMap offhours-lent), whatever the configuration names now.
"""

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.names import LEDGER_CONFIGMAP
from offhours.scripts.policy.ownership import decode_ledger

from . import test_gate_e2e
from .conftest import SERVING, gate_config_raw, serving_deployment
from .test_gate_controller_e2e import lend_one

gate_setup = test_gate_e2e.gate_setup  # the fixture, shared by name


def test_a_renamed_and_moved_service_gives_back_what_was_lowered_of_its_first_deployment(
        api: client.ApiClient, gate_setup: dict[str, Any], kubectl: Callable[..., str]) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment("chat-b", 0)))
    try:
        lend_one(api, gate_setup, "research-ledger")
        chat = apps.read_namespaced_deployment("chat", SERVING)
        assert chat.spec.replicas == 15, gate_setup["log"].getvalue()
        entries, refused = decode_ledger(core.read_namespaced_config_map(LEDGER_CONFIGMAP, SERVING).data)
        assert not refused and entries[chat.metadata.uid].baseline == 16 and entries[chat.metadata.uid].service == "chat"

        first: Gate = gate_setup["gate"]
        raw = gate_config_raw(first.source.port)  # type: ignore[attr-defined]
        raw["services"] = {"chat-renamed": {**raw["services"]["chat"], "deployment": "chat-b"}}
        moved = Gate(parse_config(raw), KubeCluster(gate_setup["gate_api"]), DirectSource(port=first.source.port),  # type: ignore[attr-defined]
                     out=gate_setup["log"], holder="gate/e2e")
        moved.tick()
        assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16, gate_setup["log"].getvalue()
        ledger = core.read_namespaced_config_map(LEDGER_CONFIGMAP, SERVING).data or {}
        assert chat.metadata.uid not in ledger, ledger
        events = core.list_namespaced_event(SERVING, field_selector="involvedObject.name=chat").items
        assert any("which no longer names it: given back from 15 to 16" in (e.message or "") for e in events)
        assert apps.read_namespaced_deployment("chat-b", SERVING).spec.replicas == 0  # never lowered: never written
    finally:
        kubectl("-n", SERVING, "delete", "deployment", "chat-b", "--ignore-not-found")
        kubectl("-n", SERVING, "delete", "configmap", "offhours-state-chat-renamed", "--ignore-not-found")
