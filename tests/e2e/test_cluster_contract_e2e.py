"""The `Cluster` contract on the real API server, through `KubeCluster` (the same checks as offline)."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from tests.support.cluster_contract import CONTRACT, Harness

from .conftest import RESEARCH, SERVING, serving_deployment, wait
from .runner import LocalPodRunner
from .test_pipeline_e2e import GROUP, VERSION, workflow
from .test_scale_targets_e2e import serving_stateful_set


class KubeHarness:
    serving, research = SERVING, RESEARCH

    def __init__(self, api: client.ApiClient, kubectl: Callable[..., str]) -> None:
        self.api, self.kubectl, self.cluster = api, kubectl, KubeCluster(api)
        self.created: list[tuple[str, str]] = []

    def add_service(self, name: str, replicas: int) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment(name, replicas, gpus=0)))
        self.created.append(("deployment", name))
        apps = client.AppsV1Api(self.api)
        wait(f"{name} ready", lambda: (apps.read_namespaced_deployment(name, SERVING).status.ready_replicas or 0)
             == replicas, timeout=60)

    def add_parked(self, name: str, service: str, replicas: int) -> None:
        wf = workflow(name, "offhours-job", {"service": service, "replicas": str(replicas), "run-id": name,
                                             "output-uri": "s3://o", "checkpoint-uri": "s3://c", "gpus": "0"},
                      suspend=True, annotations={"offhours.io/e2e-run-for": "600s"})
        wf["metadata"]["labels"] = {"offhours.io/service": service, "offhours.io/replicas": str(replicas),
                                    "offhours.io/state": "parked", "offhours.io/managed": "true"}
        client.CustomObjectsApi(self.api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf)

    def read_workflow(self, name: str) -> dict[str, Any]:
        return dict(client.CustomObjectsApi(self.api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH,
                                                                                   "workflows", name))

    def replicas(self, deployment: str) -> int:
        return int(client.AppsV1Api(self.api).read_namespaced_deployment(deployment, SERVING).spec.replicas)

    def set_replicas(self, deployment: str, replicas: int) -> None:
        """Another writer (the admin's credentials, a merge patch with no test: as `kubectl scale` does)."""
        client.AppsV1Api(self.api).patch_namespaced_deployment_scale(deployment, SERVING,
                                                                     {"spec": {"replicas": replicas}})

    def add_hpa(self, deployment: str, low: int, high: int) -> None:
        hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": f"{deployment}-hpa", "namespace": SERVING},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
                        "minReplicas": low, "maxReplicas": high,
                        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                            "type": "Utilization", "averageUtilization": 80}}}]}}
        client.AutoscalingV2Api(self.api).create_namespaced_horizontal_pod_autoscaler(SERVING, hpa)
        self.created.append(("hpa", f"{deployment}-hpa"))

    def set_max_replicas(self, deployment: str, high: int) -> None:
        """The HPA's owner (the admin's credentials, a merge patch with no test)."""
        client.AutoscalingV2Api(self.api).patch_namespaced_horizontal_pod_autoscaler(
            f"{deployment}-hpa", SERVING, {"spec": {"maxReplicas": high}})

    def add_stateful_set(self, name: str, replicas: int) -> None:
        self.kubectl("apply", "-f", "-", stdin=json.dumps(serving_stateful_set(name, replicas, gpus=0)))
        self.created.append(("statefulset", name))
        apps = client.AppsV1Api(self.api)
        wait(f"{name} ready", lambda: (apps.read_namespaced_stateful_set(name, SERVING).status.ready_replicas or 0)
             == replicas, timeout=90)

    def scale_of(self, kind: str, name: str) -> int:
        assert kind == "StatefulSet"
        return int(client.AppsV1Api(self.api).read_namespaced_stateful_set_scale(name, SERVING).spec.replicas)

    def set_scale(self, kind: str, name: str, replicas: int) -> None:
        """Another writer on /scale (a merge patch with no test: as `kubectl scale` does)."""
        assert kind == "StatefulSet"
        client.AppsV1Api(self.api).patch_namespaced_stateful_set_scale(name, SERVING, {"spec": {"replicas": replicas}})

    def add_config_map(self, name: str) -> None:
        client.CoreV1Api(self.api).create_namespaced_config_map(SERVING, {"metadata": {"name": name}})
        self.created.append(("configmap", name))

    def controlled_replica_set(self, deployment: str) -> str:
        apps = client.AppsV1Api(self.api)
        [rs] = wait(f"{deployment}'s ReplicaSet", lambda: apps.list_namespaced_replica_set(
            SERVING, label_selector=f"app={deployment}").items, timeout=60)
        return str(rs.metadata.name)


@pytest.fixture
def kube_harness(api: client.ApiClient, installed: Any, kubectl: Callable[..., str]) -> Iterator[KubeHarness]:
    harness = KubeHarness(api, kubectl)
    yield harness
    for kind, name in harness.created:
        kubectl("-n", SERVING, "delete", kind, name, "--ignore-not-found", "--wait=false")
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows", label_selector="offhours.io/managed=true")


@pytest.mark.parametrize("check", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_kube_cluster_keeps_the_contract(check: Callable[[Harness], None], kube_harness: KubeHarness) -> None:
    check(kube_harness)


def test_an_admitted_jobs_pod_gets_the_services_grace_cap_not_its_own(api: client.ApiClient, kube_harness: KubeHarness,
                                                                      runner: LocalPodRunner) -> None:
    """Fault: a tenant declares 3,600 s of grace; the service caps it at 25. Survives: the pod Argo creates has 25.

    Real: the API server and Argo's controller (which re-reads the arguments when the resume lifts
    suspend, and evaluates the step's podSpecPatch at pod creation); the parameter check runs for
    real (the runner); the research pod is kwok's.
    """
    wf = workflow("grace-capped", "offhours-job", {"service": "contract-svc5", "replicas": "1", "run-id": "grace-capped",
                                                   "output-uri": "s3://o", "checkpoint-uri": "s3://c", "gpus": "0",
                                                   "image": "ghcr.io/lab/job:1", "command": '["python", "train.py"]',
                                                   "termination-grace-seconds": "3600"},
                  suspend=True, annotations={"offhours.io/e2e-run-for": "600s"})
    wf["metadata"]["labels"] = {"offhours.io/service": "contract-svc5", "offhours.io/replicas": "1",
                                "offhours.io/state": "parked", "offhours.io/managed": "true"}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf)
    # Argo has seen it parked (its stored spec holds the tenant's 3,600) before the gate admits it.
    wait("parked workflow operated", lambda: bool((kube_harness.read_workflow("grace-capped").get("status") or {}).get(
        "storedWorkflowTemplateSpec")), timeout=60)
    [job] = [j for j in kube_harness.cluster.jobs(RESEARCH, "contract-svc5") if j.name == "grace-capped"]
    kube_harness.cluster.admit(RESEARCH, job, "uid-of-the-deployment", max_grace_seconds=25)
    core = client.CoreV1Api(api)

    def pods() -> list[Any]:  # the research step's pod (the parameter check before it is a pod of its own)
        return [p for p in core.list_namespaced_pod(
            RESEARCH, label_selector="workflows.argoproj.io/workflow=grace-capped").items
            if (p.metadata.labels or {}).get("offhours.io/stage")]

    wait("the admitted job's research pod", lambda: bool(pods()), timeout=120)
    assert {p.spec.termination_grace_period_seconds for p in pods()} == {25}


def test_the_gate_reads_a_stopped_jobs_release_from_its_pods_status_as_its_own_service_account(
        api: client.ApiClient, kube_harness: KubeHarness, runner: LocalPodRunner, cluster_env: dict[str, str]) -> None:
    """What a stop does to the pods, read as the gate reads it: its ServiceAccount, one list, the pods' status.

    Real: the API server (the gate's Role in the research namespace), Argo's controller (the stop). kwok
    has no exec for Argo to signal a container, so after the stop the research pod still runs: not
    released. The scheduler's preemption (here: its deletion) ends it; a pod gone is released.
    """
    import time

    from offhours.scripts.policy.release import release_seconds

    from .test_gate_e2e import token_client

    name = "release-measured"
    wf = workflow(name, "offhours-job", {"service": "contract-svc6", "replicas": "1", "run-id": name,
                                         "output-uri": "s3://o", "checkpoint-uri": "s3://c", "gpus": "0",
                                         "image": "ghcr.io/lab/job:1", "command": '["python", "train.py"]'},
                  suspend=True, annotations={"offhours.io/e2e-run-for": "600s"})
    wf["metadata"]["labels"] = {"offhours.io/service": "contract-svc6", "offhours.io/replicas": "1",
                                "offhours.io/state": "parked", "offhours.io/managed": "true"}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf)
    wait("parked workflow operated", lambda: bool((kube_harness.read_workflow(name).get("status") or {}).get(
        "storedWorkflowTemplateSpec")), timeout=60)
    [job] = [j for j in kube_harness.cluster.jobs(RESEARCH, "contract-svc6") if j.name == name]
    kube_harness.cluster.admit(RESEARCH, job, "uid-of-the-deployment", max_grace_seconds=25)
    gate = KubeCluster(token_client(api, cluster_env["KUBECONFIG"], SERVING, "offhours-gate"))
    core = client.CoreV1Api(api)

    def step_running() -> list[str]:  # the research step's pod (the parameter check before it ends on its own)
        return [p.metadata.name for p in core.list_namespaced_pod(
            RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}").items
            if (p.metadata.labels or {}).get("offhours.io/stage") and p.status.phase == "Running"]

    [step] = wait("the admitted job's research pod running", step_running, timeout=120)
    assert {p.name: p.finished for p in gate.workflow_pods(RESEARCH, {name: job.uid})[name]}[step] is None  # read as the gate
    [admitted] = [j for j in kube_harness.cluster.jobs(RESEARCH, "contract-svc6") if j.name == name]
    stopped_at = time.time()
    gate.stop(RESEARCH, admitted)
    time.sleep(5)  # Argo has acted on the stop
    pods = gate.workflow_pods(RESEARCH, {name: job.uid})
    assert release_seconds(stopped_at, pods[name], time.time()) is None, pods  # kwok: no signal, still running
    for pod in core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}").items:
        core.delete_namespaced_pod(pod.metadata.name, RESEARCH)
    [released] = wait("the release, read as the gate", lambda: (lambda s: None if s is None else [s])(release_seconds(
        stopped_at, gate.workflow_pods(RESEARCH, {name: job.uid})[name], time.time())), timeout=60)
    assert 0 <= released < 60
    assert gate.workflow_pods(RESEARCH, {"not a label value!": "", "x" * 64: ""}) == {}  # never a selector of its own
