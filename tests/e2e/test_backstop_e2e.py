"""End to end: the gate gone and the Argo controller stopped, the backstop CronJob gives serving its GPUs back.

Real: API server, kube-controller-manager (its CronJob and Job controllers run the backstop),
kube-scheduler (it preempts the research pod for serving's), the backstop's own ServiceAccount
token. Stopped: the gate (no tick after lending) and Argo's workflow-controller (frozen).
"""

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from offhours.scripts.controlplane.lifecycle import pause, resume

from . import test_gate_e2e
from .conftest import SERVING, wait
from .runner import LocalPodRunner
from .test_gate_controller_e2e import lend_one, record

gate_setup = test_gate_e2e.gate_setup  # the fixture, shared by name

LEASE_SECONDS = 30.0  # tickSeconds 10 x the default 3 ticks; the slack for CronWorkflow runs is 0 here


def test_with_the_gate_and_argo_gone_the_backstop_cronjob_restores_serving(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner, kubectl: Callable[..., str]) -> None:
    """Fault: no gate tick renews the lending and the Argo controller is down; only Kubernetes itself runs."""
    apps = client.AppsV1Api(api)
    gate_setup["gate"].lease_slack_seconds = 0.0
    lend_one(api, gate_setup, "research-bs")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15
    lent = record(api)
    assert lent.lease_seconds == LEASE_SECONDS and lent.renewed_at is not None and lent.deployment == "chat"
    pause("workflow-controller")
    try:
        kubectl("-n", SERVING, "patch", "cronjob", "offhours-backstop", "--type=merge", "-p", '{"spec":{"suspend":false}}')
        # Within the lease, a minute for the CronJob's schedule, and the pod's start.
        wait("the backstop to restore chat to 16", lambda: apps.read_namespaced_deployment(
            "chat", SERVING).spec.replicas == 16, timeout=LEASE_SECONDS + 60 + 45, every=2)
        raised_at = time.time()
        assert raised_at - lent.renewed_at > LEASE_SECONDS  # never before the lease ran out
        # The pass that raised it is recorded once its process has exited (a moment after its write).
        ran = wait("the backstop pass that raised chat", lambda: [
            r for r in runner.ran if r.argv[:2] == ["offhours", "backstop"] and "raised from 15 to the baseline 16"
            in r.output], timeout=30)
        assert ran[0].exit_code == 0, ran[0].output
        # An earlier pass within the lease changed nothing.
        assert all("every lending lease is current" in r.output for r in runner.ran
                   if r.argv[:2] == ["offhours", "backstop"] and r not in ran)
        restored = record(api)
        assert restored.baseline == 16 and restored.applied == 16 and restored.applying_from is None
        events = client.CoreV1Api(api).list_namespaced_event(SERVING, field_selector="involvedObject.name=chat").items
        assert any(e.reason == "LendingExpired" and e.type == "Warning" for e in events)
        # The research pod loses its GPUs to serving's 16th pod through its PriorityClass: no Argo needed.
        wait("serving back at 16 ready replicas", lambda: (apps.read_namespaced_deployment(
            "chat", SERVING).status.ready_replicas or 0) == 16, timeout=90, every=2)
    finally:
        kubectl("-n", SERVING, "patch", "cronjob", "offhours-backstop", "--type=merge", "-p", '{"spec":{"suspend":true}}')
        resume("workflow-controller")
