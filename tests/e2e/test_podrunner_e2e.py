"""End to end: the local pod runner reports what goes wrong in the pod's status, and never runs a pod twice.

Real: API server, scheduler, kwok nodes (which leave offhours.io/local-run pods to the runner),
the runner's processes. No stand-in beyond kwok's nodes.
"""

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.controlplane.podrunner import CLAIM
from offhours.scripts.controlplane.podrunner import LocalPodRunner as Runner

from .conftest import RESEARCH, wait
from .runner import LocalPodRunner


def local_pod(name: str, code: str, volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    mounts = [{"name": v["name"], "mountPath": f"/etc/{v['name']}"} for v in volumes or []]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": RESEARCH, "labels": {"offhours.io/local-run": "true"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "main", "image": "offhours.local/test:1", "command": ["python", "-c", code],
                                     "volumeMounts": mounts}],
                     "volumes": volumes or []}}


@pytest.fixture
def pods(api: client.ApiClient) -> Iterator[Callable[[dict[str, Any]], str]]:
    core = client.CoreV1Api(api)
    made: list[str] = []

    def create(body: dict[str, Any]) -> str:
        core.create_namespaced_pod(RESEARCH, body)
        made.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])
    yield create
    for name in made:
        try:
            core.delete_namespaced_pod(name, RESEARCH, grace_period_seconds=0)
        except client.ApiException:
            pass


def _finished(core: client.CoreV1Api, name: str) -> Any:
    pod = core.read_namespaced_pod(name, RESEARCH)
    return pod if pod.status.phase in ("Succeeded", "Failed") else None


def test_a_pod_whose_configmap_is_unreadable_fails_with_the_reason(api: client.ApiClient, runner: LocalPodRunner,
                                                                    pods: Callable[[dict[str, Any]], str]) -> None:
    name = pods(local_pod(f"cm-missing-{int(time.time())}", "print('never')",
                          [{"name": "config", "configMap": {"name": "no-such-config"}}]))
    pod = wait("the pod to fail", lambda: _finished(client.CoreV1Api(api), name), timeout=60)
    assert pod.status.phase == "Failed"
    assert pod.status.message == (f"ConfigMap {RESEARCH}/no-such-config (volume config) unreadable: HTTP 404: "
                                  'configmaps "no-such-config" not found')
    assert f"{RESEARCH}/{name}: {pod.status.message}" in runner.errors
    assert not [r for r in runner.ran if r.pod == name]  # the program never ran


def test_a_program_that_fails_fails_its_pod_with_its_exit_code_and_last_line(
        api: client.ApiClient, runner: LocalPodRunner, pods: Callable[[dict[str, Any]], str]) -> None:
    name = pods(local_pod(f"exit-3-{int(time.time())}", "import sys; print('bad input: x'); sys.exit(3)"))
    pod = wait("the pod to fail", lambda: _finished(client.CoreV1Api(api), name), timeout=60)
    terminated = pod.status.container_statuses[0].state.terminated
    assert (pod.status.phase, terminated.exit_code, pod.status.message) == ("Failed", 3, "bad input: x")
    assert pod.metadata.annotations[CLAIM] == runner.identity


def test_a_deleted_pods_process_gets_sigterm(api: client.ApiClient, runner: LocalPodRunner,
                                            pods: Callable[[dict[str, Any]], str]) -> None:
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: (print('got SIGTERM', flush=True), sys.exit(75)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(120)\n")
    name = pods(local_pod(f"sigterm-{int(time.time())}", code))
    core = client.CoreV1Api(api)
    wait("the pod to run", lambda: core.read_namespaced_pod(name, RESEARCH).status.phase == "Running", timeout=60)
    core.delete_namespaced_pod(name, RESEARCH)
    ran = wait("the process to end", lambda: [r for r in runner.ran if r.pod == name], timeout=60)[0]
    assert ran.exit_code == 75 and ran.output == "ready\ngot SIGTERM\n"


def test_two_runners_never_run_the_same_pod(api: client.ApiClient, runner: LocalPodRunner, cluster_env: dict[str, str],
                                            pods: Callable[[dict[str, Any]], str]) -> None:
    second = Runner(api, runner.server, runner.ca_file, poll_seconds=0.1).start()
    try:
        names = [pods(local_pod(f"once-{i}-{int(time.time())}", "print('ran')")) for i in range(6)]
        core = client.CoreV1Api(api)
        for name in names:
            wait(f"{name} to finish", lambda n=name: _finished(core, n), timeout=60)
    finally:
        second.stop()
    runs = [r.pod for r in (*runner.ran, *second.ran) if r.pod in names]
    assert sorted(runs) == sorted(names), json.dumps(runs)
