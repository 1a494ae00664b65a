"""End to end: the gate on the local control plane, with emulated vLLM metrics.

Real: API server, scheduler (priority preemption included), controller-manager, Argo controller,
the gate (run here with the gate ServiceAccount's token, so its RBAC applies), the direct scraper
over HTTP, the exit hook program (run as a local process by the runner). Stand-ins: kwok nodes and
the vLLM servers (emulated /metrics on each serving pod's IP from kwok's loopback CIDR).
"""

import io
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.policy.plan import Job
from offhours.scripts.policy.record import ServiceRecord
from tests.support.fleet import free_port

from .conftest import RESEARCH, SERVING, gate_config_raw, stop_other_gates, wait
from .runner import LocalPodRunner
from .test_pipeline_e2e import GROUP, VERSION, workflow

TOTAL_GPUS = 64  # 16 kwok nodes x 4


def token_client(api: client.ApiClient, kubeconfig: str, namespace: str, service_account: str) -> client.ApiClient:
    """An API client that authenticates as a ServiceAccount (a real token from the TokenRequest API)."""
    token = client.CoreV1Api(api).create_namespaced_service_account_token(
        service_account, namespace, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))).status.token
    cluster = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    conf = client.Configuration()
    conf.host, conf.ssl_ca_cert = cluster["server"], cluster["certificate-authority"]
    conf.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(conf)


class ServingLoad:
    """Emulated vLLM on every ready `chat` pod; load in requests/s spread over the ready pods."""

    def __init__(self, api: client.ApiClient, port: int) -> None:
        self.core, self.port, self.rps = client.CoreV1Api(api), port, 0.0
        self.servers: dict[str, EmulatedServer] = {}
        self.fleet = Fleet([]).start()
        self.last = time.monotonic()

    def ready_ips(self) -> list[str]:
        pods = self.core.list_namespaced_pod(SERVING, label_selector="app=chat").items
        return [p.status.pod_ip for p in pods if p.status.pod_ip and p.metadata.deletion_timestamp is None
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]

    def advance(self) -> None:
        now = time.monotonic()
        dt, self.last = now - self.last, now
        ips = self.ready_ips()
        for ip in ips:
            if ip not in self.servers:
                self.servers[ip] = EmulatedServer(engines=2)
                self.fleet.add(ip, self.port, self.servers[ip])
        for ip in ips:
            self.servers[ip].feed(self.rps * dt / len(ips), self.rps * dt * 100 / len(ips), self.rps * dt * 10 / len(ips),
                                  dt)

    def stop(self) -> None:
        self.fleet.stop()


class GpuLedger(threading.Thread):
    """Sample, every 200 ms, the GPUs promised at once: to serving and to research.

    Serving holds the GPUs of its pods that are bound and not being deleted; research holds those
    of every research pod not finished, bound or still pending. The scheduler alone keeps bound
    pods within the nodes, but a research pod that offhours admitted beyond what it lent waits
    pending and is counted here: that is the double count this ledger sees. A sum above the
    cluster's GPUs counts only when it lasts 1 s (5 samples): the ReplicaSet controller deletes a
    lent replica's pod a moment after the gate's scale-down, and that moment is not a promise.
    """

    WINDOW = 5

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(daemon=True)
        self.core, self.peak, self.samples = client.CoreV1Api(api), 0, 0
        self.worst: tuple[int, int] = (0, 0)  # (serving, research) GPUs at the sample that set the peak
        self._recent: list[int] = []
        self._halt = threading.Event()

    @staticmethod
    def _gpus(pod: client.V1Pod) -> int:
        return sum(int((c.resources.requests or {}).get("nvidia.com/gpu", 0)) for c in pod.spec.containers)

    def run(self) -> None:
        while not self._halt.wait(0.2):
            serving = research = 0
            for p in self.core.list_pod_for_all_namespaces().items:
                if p.status.phase in ("Succeeded", "Failed"):
                    continue
                if p.metadata.namespace == RESEARCH:
                    research += self._gpus(p)
                elif p.spec.node_name and p.metadata.deletion_timestamp is None:
                    serving += self._gpus(p)
            self._recent = [*self._recent[-(self.WINDOW - 1):], serving + research]
            lasting = min(self._recent) if len(self._recent) == self.WINDOW else 0
            if lasting > self.peak:
                self.peak, self.worst = lasting, (serving, research)
            self.samples += 1

    def stop(self) -> None:
        self._halt.set()
        self.join()


@pytest.fixture
def gate_setup(api: client.ApiClient, installed: Path, runner: LocalPodRunner, cluster_env: dict[str, str],
               chat_service: Callable[[int], None], kubectl: Callable[..., str]) -> Iterator[dict[str, Any]]:
    # Workflows an earlier test (or the demo) left would be admitted beside this test's own.
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")
    stop_other_gates(api, kubectl)
    chat_service(16)  # every GPU of the cluster serves
    port = free_port()
    load = ServingLoad(api, port)
    gate_api = token_client(api, cluster_env["KUBECONFIG"], SERVING, "offhours-gate")
    log = io.StringIO()
    gate = Gate(parse_config(gate_config_raw(port)), KubeCluster(gate_api), DirectSource(port=port), out=log,
                holder="gate/e2e")
    ledger = GpuLedger(api)
    ledger.start()
    yield {"gate": gate, "load": load, "log": log, "ledger": ledger, "gate_api": gate_api}
    ledger.stop()
    load.stop()
    client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")


def _tick(setup: dict[str, Any]) -> Any:
    time.sleep(1.2)
    setup["load"].advance()
    return setup["gate"].tick()[0]


def _job(name: str) -> dict[str, Any]:
    params = {"service": "chat", "replicas": "1", "run-id": name, "image": "ghcr.io/lab/job:1",
              "command": '["python", "train.py"]', "gpus": "4", "output-uri": "s3://o", "checkpoint-uri": "s3://c",
              "node-selector": '{"offhours.io/pool": "inference"}'}
    wf = workflow(name, "offhours-job", params, suspend=True, annotations={"offhours.io/e2e-run-for": "600s"})
    wf["metadata"]["labels"] = {"offhours.io/service": "chat", "offhours.io/replicas": "1",
                                "offhours.io/state": "parked", "offhours.io/managed": "true"}
    return wf


def test_gate_lends_reclaims_and_restores_the_baseline(api: client.ApiClient, gate_setup: dict[str, Any],
                                                        runner: LocalPodRunner) -> None:
    custom, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    load: ServingLoad = gate_setup["load"]
    custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", _job("research-a"))

    load.rps = 5.0  # needs 1 replica of 16
    outcomes = [_tick(gate_setup) for _ in range(4)]
    # The whole sequence: the first scrape has no counter rates yet (no pod read), the second starts
    # the 1 s window, the third has seen it through and lends the one replica the queue needs, and
    # the fourth keeps it (nothing more is queued).
    lent = [(o.decision.action, o.plan.lent_after) for o in outcomes if o.decision and o.plan]
    assert lent == [("hold", 0), ("hold", 0), ("lend", 1), ("lend", 1)], gate_setup["log"].getvalue()
    assert [o.decision.reason.split(":")[0] for o in outcomes if o.decision][:2] == [
        "partial data", "load is low but not yet for 1 s"], gate_setup["log"].getvalue()
    dep = apps.read_namespaced_deployment("chat", SERVING)
    state = core.read_namespaced_config_map("offhours-state-chat", SERVING).data["state.json"]
    assert dep.spec.replicas == 15 and ServiceRecord.from_json(state).baseline == 16
    assert "offhours.io/baseline-replicas" not in (dep.metadata.annotations or {})  # the gate never patches it
    wf = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", "research-a")
    assert not wf["spec"].get("suspend") and wf["metadata"]["labels"]["offhours.io/state"] == "admitted"
    pod = wait("the research pod to run on the freed GPUs", lambda: [
        p for p in core.list_namespaced_pod(RESEARCH, label_selector="workflows.argoproj.io/workflow=research-a").items
        if p.status.phase == "Running"], timeout=60)[0]
    assert pod.spec.priority_class_name == "offhours-best-effort"

    load.rps = 150.0  # needs every replica back
    out = _tick(gate_setup)
    assert out.decision.action == "reclaim" and out.plan.lent_after == 0, gate_setup["log"].getvalue()
    wf = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", "research-a")
    assert wf["spec"]["shutdown"] == "Stop" and wf["metadata"]["labels"]["offhours.io/state"] == "preempted"
    copy = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", "research-a-p1")
    assert copy["spec"]["suspend"] is True and copy["metadata"]["annotations"]["offhours.io/preemptions"] == "1"
    wait("serving back to 16 ready replicas", lambda: (apps.read_namespaced_deployment("chat", SERVING).status
                                                       .ready_replicas or 0) == 16, timeout=90)
    hook = wait("the stopped job's exit hook", lambda: [r for r in runner.ran if r.pod.startswith("research-a-")
                                                        and r.argv[:2] == ["offhours", "return-gpus"]], timeout=90)
    assert hook[0].exit_code == 0, hook[0].output
    events = core.list_namespaced_event(SERVING, field_selector="involvedObject.name=chat").items
    assert any(e.reason == "GPUsReclaimed" and "replicas at 16" in e.message for e in events)
    assert any(e.reason == "GPUsLent" for e in events)
    hold = core.read_namespaced_event("chat.gatehold", SERVING)  # holds: one Event, counted (RBAC allows it)
    assert hold.reason == "GateHold" and hold.count >= 2

    # The copy is admitted only once its original is confirmed stopped (Argo ends a stopped workflow Failed).
    wait("research-a to end", lambda: custom.get_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows", "research-a").get("status", {}).get("phase") in ("Failed", "Error"))
    load.rps = 5.0  # quiet again: the parked copy resumes from its checkpoints (same run id)
    for _ in range(4):
        _tick(gate_setup)
    resumed = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", "research-a-p1")
    assert resumed["metadata"]["labels"]["offhours.io/state"] == "admitted" and not resumed["spec"].get("suspend")
    run_id = {p["name"]: p["value"] for p in resumed["spec"]["arguments"]["parameters"]}["run-id"]
    assert run_id == "research-a"

    load.rps = 150.0
    _tick(gate_setup)
    wait("the baseline restored", lambda: apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16)
    ledger: GpuLedger = gate_setup["ledger"]
    assert ledger.samples > 20
    assert ledger.peak <= TOTAL_GPUS, (f"{ledger.peak} GPUs promised for 1 s (serving, research: {ledger.worst}): "
                                       "research admitted beyond what serving lent")


def test_scheduler_preempts_research_pods_when_serving_needs_the_gpus(api: client.ApiClient,
                                                                       gate_setup: dict[str, Any]) -> None:
    custom, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    gate_setup["load"].rps = 5.0
    custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", _job("research-b"))
    for _ in range(4):
        _tick(gate_setup)
    wait("the research GPU pod to run", lambda: [p for p in core.list_namespaced_pod(
        RESEARCH, label_selector="workflows.argoproj.io/workflow=research-b").items if p.status.phase == "Running"
        and any("nvidia.com/gpu" in (c.resources.requests or {}) for c in p.spec.containers)])
    # Serving grows on its own (an HPA, an operator): no free GPU is left but the research pod's.
    apps.patch_namespaced_deployment_scale("chat", SERVING, {"spec": {"replicas": 16}})
    wait("serving at 16 ready replicas", lambda: (apps.read_namespaced_deployment("chat", SERVING).status
                                                  .ready_replicas or 0) == 16, timeout=90)
    events = core.list_namespaced_event(RESEARCH).items
    assert any(e.reason == "Preempted" and "research-b" in (e.involved_object.name or "") for e in events), \
        [(e.reason, e.involved_object.name) for e in events][-10:]


def test_gate_rbac_is_least_privilege(api: client.ApiClient, gate_setup: dict[str, Any],
                                      kubectl: Callable[..., str]) -> None:
    from .conftest import serving_deployment

    gate_api = gate_setup["gate_api"]
    apps, custom = client.AppsV1Api(gate_api), client.CustomObjectsApi(gate_api)
    apps.patch_namespaced_deployment_scale("chat", SERVING, {"spec": {"replicas": 16}})  # allowed: named
    import json

    kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment("embed", 1)))
    with pytest.raises(client.ApiException) as denied:
        apps.patch_namespaced_deployment_scale("embed", SERVING, {"spec": {"replicas": 0}})
    assert denied.value.status == 403
    with pytest.raises(client.ApiException) as elsewhere:
        custom.list_namespaced_custom_object(GROUP, VERSION, "other", "workflows")
    assert elsewhere.value.status == 403
    with pytest.raises(client.ApiException) as cluster_wide:
        client.CoreV1Api(gate_api).list_node()
    assert cluster_wide.value.status == 403
    kubectl("-n", SERVING, "delete", "deployment", "embed", "--wait=false")


def test_stop_runs_the_exit_hook_and_a_workflow_that_cannot_be_stopped_is_reported(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner) -> None:
    custom = client.CustomObjectsApi(api)
    wf = _job("research-c")
    wf["spec"].pop("suspend")
    wf["metadata"]["labels"]["offhours.io/state"] = "admitted"
    custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf)
    wait("research-c running", lambda: custom.get_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows", "research-c").get("status", {}).get("phase") == "Running")
    cluster = KubeCluster(gate_setup["gate_api"])
    cluster.stop(RESEARCH, Job("research-c", "chat", 1, "admitted"))
    done = wait("research-c to end", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                              ("Failed", "Error", "Succeeded") else None)(
        custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", "research-c")), timeout=120)
    assert "Stopped" in (done["status"].get("message") or "") or done["status"]["phase"] == "Failed"
    hook = wait("its exit hook", lambda: [r for r in runner.ran if r.pod.startswith("research-c-")
                                          and r.argv[:2] == ["offhours", "return-gpus"]], timeout=90)
    assert hook[0].exit_code == 0 and "ended Failed" in hook[0].output
    with pytest.raises(ClusterError, match="stop workflow research/gone: HTTP 404"):
        cluster.stop(RESEARCH, Job("gone", "chat", 1, "admitted"))


def test_lease_serialises_writers_on_the_real_api_server(api: client.ApiClient, gate_setup: dict[str, Any]) -> None:
    gate_side, hook_side = KubeCluster(gate_setup["gate_api"]), KubeCluster(gate_setup["gate_api"])
    assert gate_side.acquire_lease(SERVING, "gate/one", 30)
    assert not hook_side.acquire_lease(SERVING, "exit-hook/two", 30)  # held: the second writer waits
    gate_side.release_lease(SERVING, "gate/one")
    assert hook_side.acquire_lease(SERVING, "exit-hook/two", 30)
    hook_side.release_lease(SERVING, "exit-hook/two")


def test_cron_workflow_runs_the_gate_through_hera_runner(api: client.ApiClient, installed: Path,
                                                        runner: LocalPodRunner,
                                                        chat_service: Callable[[int], None]) -> None:
    """A run of the installed CronWorkflow: its tick pod runs `python -m hera.workflows.runner` for real."""
    chat_service(2)
    custom = client.CustomObjectsApi(api)
    cron = custom.get_namespaced_custom_object(GROUP, VERSION, SERVING, "cronworkflows", "offhours-gate")
    spec = cron["spec"]["workflowSpec"]
    spec["arguments"]["parameters"] = [{"name": "config", "value": "/etc/offhours/gate.yaml"},
                                       {"name": "dry-run", "value": "true"}, {"name": "run-seconds", "value": "1"}]
    name = f"gate-run-{int(time.time())}"
    # The gate's CronWorkflow and its runs live in the serving namespace, beside its ServiceAccount.
    custom.create_namespaced_custom_object(GROUP, VERSION, SERVING, "workflows", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
        "metadata": {"name": name, "namespace": SERVING}, "spec": spec})
    done = wait("the gate run to end", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                                ("Succeeded", "Failed", "Error") else None)(
        custom.get_namespaced_custom_object(GROUP, VERSION, SERVING, "workflows", name)), timeout=120)
    ran = [r for r in runner.ran if r.pod.startswith(name)]
    assert ran and ran[0].argv[1:5] == ["-m", "hera.workflows.runner", "-e", "offhours.cronworkflows.gate:gate_tick"]
    assert done["status"]["phase"] == "Succeeded", ran[0].output
    # The dry run read the service as the gate's ServiceAccount and planned without changing anything.
    assert "service=chat " in ran[0].output and "baseline 2" in ran[0].output, ran[0].output
    dep = client.AppsV1Api(api).read_namespaced_deployment("chat", SERVING)
    assert dep.metadata.annotations is None or "offhours.io/baseline-replicas" not in dep.metadata.annotations
    with pytest.raises(client.ApiException) as none:  # a dry run records nothing
        client.CoreV1Api(api).read_namespaced_config_map("offhours-state-chat", SERVING)
    assert none.value.status == 404
