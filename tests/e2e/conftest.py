"""Fixtures of the end-to-end tier: the local control plane (make cluster-up), offhours installed on it."""

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from offhours.scripts.controlplane.podrunner import hand_back, take_over
from offhours.workflows.render import write

from .runner import LocalPodRunner

STATE = Path(os.environ.get("OFFHOURS_CLUSTER_DIR", "/tmp/offhours-cluster"))
REPO = Path(__file__).resolve().parents[2]
SERVING, RESEARCH = "serving", "research"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test of this folder needs the cluster (the hook sees all items: mark only ours).
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster_env() -> dict[str, str]:
    env_file = STATE / "env"
    if not env_file.exists():
        pytest.fail(f"no local control plane: run `make cluster-up` first ({env_file} missing)")
    return dict(line.split("=", 1) for line in env_file.read_text().split())


@pytest.fixture(scope="session")
def api(cluster_env: dict[str, str]) -> client.ApiClient:
    api = config.new_client_from_config(cluster_env["KUBECONFIG"])
    assert client.VersionApi(api).get_code().git_version.startswith("v1.34"), "expected Kubernetes v1.34"
    return api


@pytest.fixture(scope="session")
def kubectl(cluster_env: dict[str, str]) -> Callable[..., str]:
    def run(*args: str, stdin: str | None = None) -> str:
        out = subprocess.run([f"{cluster_env['OFFHOURS_CLUSTER_BIN']}/offhours-kube", "kubectl",
                              "--kubeconfig", cluster_env["KUBECONFIG"], *args],
                             input=stdin, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout
    return run


def gate_config_raw(port: int) -> dict[str, Any]:
    return {
        "namespace": SERVING, "workflowNamespace": RESEARCH, "tickSeconds": 10,
        "metrics": {"source": "direct", "maxAgeSeconds": 600, "direct": {"port": port, "timeoutSeconds": 2}},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        # No hysteresis and no volatility term (the shipped defaults have both): the journeys' replica counts
        # are the capacity model's at headroom 0.25.
        "services": {"chat": {"deployment": "chat", "gpusPerReplica": 4, "capacity": {"requestsPerSecond": 10},
                              "headroom": 0.25, "stabilizationSeconds": 1, "maxLendStep": 4, "minReplicas": 1,
                              "lendHysteresis": 0, "volatilityHeadroomMax": 0.0}},
        # The workflow quota as shipped (500). No GPU quota: the journeys start research pods outside the gate's
        # loans (tests/e2e/test_admission_policy_e2e.py keeps it).
        "research": {"gpuQuota": False},
    }


@pytest.fixture(scope="module")
def installed(kubectl: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """offhours rendered for the e2e gate config and applied server-side with kubectl -k.

    Once per test file: a file may install offhours its own way (the check tests' `ask` service, the demo's
    gate), and each file runs on whichever control plane its shard has, after whichever files (shards.py),
    so no file may depend on the install another left.
    """
    out = tmp_path_factory.mktemp("manifests")
    # The gate config becomes the ConfigMap in the serving namespace, beside the gate's CronWorkflow.
    write(out, yaml.safe_dump(gate_config_raw(8000)))
    # A reinstall on a shared cluster: RBAC and CronWorkflows of an earlier offhours install (say, the
    # gate's account in the research namespace) go first, so the cluster holds exactly this install's.
    for ns in (SERVING, RESEARCH):
        if kubectl("get", "namespace", ns, "--ignore-not-found", "-o", "name").strip():
            kubectl("-n", ns, "delete", "serviceaccount,role,rolebinding,cronworkflow,cronjob", "-l", "offhours.io/managed=true",
                    "--ignore-not-found", "--wait=true")
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(out))
    # The workflow quota refuses every creation ("status unknown for quota") until kube-controller-manager has
    # counted it: at once on a control plane that counts workflows already (cluster-up waits for that).
    wait("kube-controller-manager to count the workflow quota", lambda: "count/workflows.argoproj.io" in (json.loads(
        kubectl("-n", RESEARCH, "get", "resourcequota", "offhours-workflows", "-o", "json")).get("status") or {})
        .get("used", {}), timeout=120)
    # A GPU quota an earlier file's gate (or the quota test) left would refuse this file's research pods.
    kubectl("-n", RESEARCH, "delete", "resourcequota", "offhours-gpus", "--ignore-not-found")
    # The tests drive the gate tick by tick; the CronWorkflow's own schedule would race them.
    kubectl("-n", SERVING, "patch", "cronworkflow", "offhours-gate", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    # So would the backstop's CronJob, between two ticks a test leaves far apart on purpose (its own test resumes it).
    kubectl("-n", SERVING, "patch", "cronjob", "offhours-backstop", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    return out


def serving_deployment(name: str, replicas: int, gpus: int = 4) -> dict[str, Any]:
    """An inference Deployment as offhours expects it: labelled with its service, GPUs per replica."""
    labels = {"app": name, "offhours.io/service": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": SERVING, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "100%"}},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "terminationGracePeriodSeconds": 5,
                     "nodeSelector": {"offhours.io/pool": "inference"},
                     "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.12.0",
                                     "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "4"},
                                                   "limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
    }


@pytest.fixture
def chat_service(kubectl: Callable[..., str], api: client.ApiClient) -> Iterator[Callable[[int], None]]:
    """Create the `chat` inference Deployment with n replicas (4 GPUs each); removed afterwards."""
    def create(replicas: int) -> None:
        # A chat the demo left (it keeps serving and its state record, with replicas lent) would be the
        # same incarnation: the test's gate would adopt its count as someone else's scale and lend from
        # a larger baseline. Each test starts from a new Deployment and no record.
        kubectl("-n", SERVING, "delete", "deployment", "chat", "--ignore-not-found", "--wait=true")
        kubectl("-n", SERVING, "delete", "configmap", "offhours-state-chat", "--ignore-not-found")
        kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment("chat", replicas)))
        apps = client.AppsV1Api(api)
        wait("chat to be ready", lambda: (apps.read_namespaced_deployment("chat", SERVING).status.ready_replicas or 0)
             == replicas, timeout=60)
    yield create
    kubectl("-n", SERVING, "delete", "deployment", "chat", "--ignore-not-found", "--wait=true")
    kubectl("-n", SERVING, "delete", "configmap", "offhours-state-chat", "--ignore-not-found")


def stop_other_gates(api: client.ApiClient, kubectl: Callable[..., str]) -> None:
    """Leave the serving namespace to the test's own gate: no gate CronWorkflow run ticking, the Lease free.

    A gate run of an earlier test (the demo's last run ticks on after the demo suspends its
    schedule) would act on the same Deployment between the test's ticks, and a gate killed
    mid-tick leaves its Lease held until the grant expires.
    """
    custom = client.CustomObjectsApi(api)
    for cron in custom.list_namespaced_custom_object("argoproj.io", "v1alpha1", SERVING, "cronworkflows")["items"]:
        kubectl("-n", SERVING, "patch", "cronworkflow", cron["metadata"]["name"], "--type=merge",
                "-p", '{"spec":{"suspend":true}}')
    # The backstop (reinstalled by the demo) restores by the records alone, between the test's ticks.
    for job in client.BatchV1Api(api).list_namespaced_cron_job(SERVING).items:
        kubectl("-n", SERVING, "patch", "cronjob", job.metadata.name, "--type=merge", "-p", '{"spec":{"suspend":true}}')
    # Every workflow in the serving namespace is a gate run (research workflows live in their own).
    kubectl("-n", SERVING, "delete", "workflows", "--all", "--ignore-not-found", "--wait=true")
    core, coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
    wait("the gate runs' pods to end", lambda: not [
        p for p in core.list_namespaced_pod(SERVING, label_selector="workflows.argoproj.io/workflow").items
        if p.status.phase not in ("Succeeded", "Failed")], 60)

    def lease_free() -> bool:
        try:
            lease = coordination.read_namespaced_lease("offhours-gate", SERVING).spec
        except client.ApiException as err:
            return err.status == 404
        if not lease.holder_identity or lease.renew_time is None:
            return True
        expires = lease.renew_time.timestamp() + (lease.lease_duration_seconds or 0)
        if expires >= time.time():
            return False
        # Expired by its holder's clock: handed back, as an admin would (a new gate judges expiry only by
        # observing the record unchanged for a whole lease duration, on its own clock).
        full = coordination.read_namespaced_lease("offhours-gate", SERVING)
        full.spec.holder_identity = ""
        coordination.replace_namespaced_lease("offhours-gate", SERVING, full)
        return True
    wait("the offhours Lease to be free", lease_free, timeout=150, every=2)


@pytest.fixture(scope="session")
def runner(api: client.ApiClient, cluster_env: dict[str, str]) -> Iterator[LocalPodRunner]:
    """This checkout's pod runner, in-process (its records are the tests'); the cluster's daemon pauses meanwhile."""
    kube = yaml.safe_load(Path(cluster_env["KUBECONFIG"]).read_text())
    cluster = kube["clusters"][0]["cluster"]
    daemon_pid = STATE / "pids" / "podrunner"
    take_over(STATE / "podrunner.pause", int(daemon_pid.read_text()) if daemon_pid.exists() else None)
    # As the daemon's: the launcher built by cluster-up, and the reference job as the offhours.local/ image's /app.
    path_map = {"/offhours/bin/": f"{STATE / 'bin'}/", "/app/": f"{REPO / 'examples' / 'reference-job'}/"}
    # The daemon's log folder: the daemon serves the logs of the pods this runner runs too.
    pods = LocalPodRunner(api, cluster["server"], cluster["certificate-authority"], path_map=path_map,
                          log_dir=STATE / "podlogs").start()
    try:
        yield pods
    finally:
        pods.stop()
        hand_back(STATE / "podrunner.pause")


def wait(what: str, check: Callable[[], Any], timeout: float = 120.0, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {value!r})")


@pytest.fixture
def pod_logs(runner: LocalPodRunner, kubectl: Callable[..., str]) -> Iterator[int]:
    """The runner serves the logs of the pods it runs, as a kubelet; every kwok node points the API server at it.

    kwok runs no kubelet: cluster-up points its nodes at the daemon runner's log server.
    This one serves the pods it runs from memory; afterwards the nodes point where they did.
    """
    port = runner.serve_logs(str(STATE / "pki" / "apiserver.crt"), str(STATE / "pki" / "apiserver.key"))
    nodes = kubectl("get", "nodes", "-l", "type=kwok", "-o", "name").split()
    before = kubectl("get", nodes[0], "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}").strip()

    def point(at: int) -> None:
        for node in nodes:
            kubectl("patch", node, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": at}}}}))
    point(port)
    try:
        yield port
    finally:
        point(int(before or 0))
