"""End to end: `offhours check` on the local control plane, with a complete install and with each part removed.

Real: API server (its SubjectAccessReview answers the RBAC checks), Argo's CRDs, the rendered
install applied with kubectl. Stand-ins: kwok nodes, and emulated vLLM /metrics on the serving
pods' loopback IPs. Each removal is undone before the next test; the last test checks the whole
install again.
"""

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from offhours.scripts.cli.check import check
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from offhours.workflows.render import write
from tests.support.fleet import free_port

from .conftest import RESEARCH, SERVING, serving_deployment, stop_other_gates, wait

GROUP, VERSION = "argoproj.io", "v1alpha1"


def check_config(port: int) -> dict[str, Any]:
    return {"namespace": SERVING, "workflowNamespace": RESEARCH, "tickSeconds": 60,
            "metrics": {"source": "direct", "direct": {"port": port, "timeoutSeconds": 2}},
            "services": {"ask": {"deployment": "ask", "gpusPerReplica": 1, "capacity": {"requestsPerSecond": 10}}}}


class Install:
    """The complete install of one gate configuration; `apply` puts back whatever a test removed."""

    def __init__(self, kubectl: Callable[..., str], api: client.ApiClient, root: Path, port: int) -> None:
        self.kubectl, self.api, self.port = kubectl, api, port
        self.raw = check_config(port)
        self.config_file = root / "gate.yaml"
        self.config_file.write_text(yaml.safe_dump(self.raw))
        self.manifests = root / "manifests"
        write(self.manifests, yaml.safe_dump(self.raw))
        self.fleet = Fleet([]).start()
        self.served: set[str] = set()

    def apply(self) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(self.manifests))
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "offhours-gate-config", "namespace": SERVING},
            "data": {"gate.yaml": self.config_file.read_text()}}))
        # Other tests suspend the shared CronWorkflow with a patch, which an apply of the render leaves alone.
        self.kubectl("-n", SERVING, "patch", "cronworkflow", "offhours-gate", "--type=merge", "-p",
                     '{"spec":{"suspend":false}}')
        self.kubectl("apply", "-f", "-", stdin=json.dumps(serving_deployment("ask", 2, gpus=0)))
        apps, core = client.AppsV1Api(self.api), client.CoreV1Api(self.api)
        wait("ask to be ready", lambda: (apps.read_namespaced_deployment("ask", SERVING).status.ready_replicas or 0) == 2)
        pods = core.list_namespaced_pod(SERVING, label_selector="app=ask").items
        for ip in {p.status.pod_ip for p in pods if p.status.pod_ip} - self.served:
            self.fleet.add(ip, self.port, EmulatedServer(engines=1))
            self.served.add(ip)

    def check(self) -> tuple[int, list[str]]:
        lines: list[str] = []
        return check(self.api, str(self.config_file), out=lines.append), lines


@pytest.fixture(scope="module")
def install(kubectl: Callable[..., str], api: client.ApiClient,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    setup = Install(kubectl, api, tmp_path_factory.mktemp("check"), free_port())
    setup.apply()
    yield setup
    setup.fleet.stop()
    kubectl("-n", SERVING, "delete", "deployment", "ask", "--ignore-not-found", "--wait=true")
    # apply() set the shared gate schedule going: later tests expect it suspended and no run of it in flight.
    stop_other_gates(api, kubectl)


@pytest.fixture
def restored(install: Install) -> Iterator[Install]:
    yield install
    install.apply()


def _line(lines: list[str], prefix: str) -> str:
    found = [line for line in lines if line.startswith(prefix)]
    assert len(found) == 1, f"no single line starting {prefix!r} in:\n" + "\n".join(lines)
    return found[0]


def test_a_complete_install_passes_every_check(install: Install) -> None:
    code, lines = install.check()
    assert [line for line in lines if line.startswith("✗")] == []
    assert code == 0 and lines[-1] == "all checks passed"
    assert _line(lines, "✓ CRD workflows.argoproj.io") == "✓ CRD workflows.argoproj.io: established, v1alpha1, " \
                                                         "Argo v4.0.5 schema"
    assert _line(lines, f"✓ RBAC {SERVING}/offhours-gate cannot") == (
        f"✓ RBAC {SERVING}/offhours-gate cannot rewrite pods: no `patch` of its scale targets")
    assert _line(lines, f"✓ RBAC {RESEARCH}/offhours-exit-hook has no right") == (
        f"✓ RBAC {RESEARCH}/offhours-exit-hook has no right in {SERVING}: none")
    assert _line(lines, "✓ Deployment") == f"✓ Deployment {SERVING}/ask: 2/2 replicas ready"
    assert _line(lines, "✓ metrics of ask") == f"✓ metrics of ask (direct :{install.port}/metrics): 2/2 ready pod(s) " \
                                               "return vLLM series"


def test_the_command_line_exits_0_on_a_complete_install(install: Install, cluster_env: dict[str, str]) -> None:
    run = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", "check", "--config", str(install.config_file),
                          "--kubeconfig", cluster_env["KUBECONFIG"]], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "all checks passed"


REMOVALS: dict[str, tuple[list[str], str]] = {
    "priorityclass": (["delete", "priorityclass", "offhours-best-effort"],
                      "✗ PriorityClass offhours-best-effort: missing — fix: offhours render"),
    "configmap": (["-n", SERVING, "delete", "configmap", "offhours-gate-config"],
                  f"✗ ConfigMap {SERVING}/offhours-gate-config: missing — fix: kubectl -n {SERVING} create configmap "
                  "offhours-gate-config --from-file=gate.yaml=gate-config.yaml"),
    "deployment": (["-n", SERVING, "delete", "deployment", "ask", "--wait=true"],
                   f"✗ Deployment {SERVING}/ask: missing (service ask) — fix: deploy ask in {SERVING}"),
    "template": (["-n", RESEARCH, "delete", "workflowtemplate", "offhours-job"],
                 f"✗ WorkflowTemplate {RESEARCH}/offhours-job: missing — fix: offhours render"),
    "cronworkflow": (["-n", SERVING, "delete", "cronworkflow", "offhours-gate"],
                     f"✗ CronWorkflow {SERVING}/offhours-gate: missing — fix: offhours render"),
    "suspended cronworkflow": (["-n", SERVING, "patch", "cronworkflow", "offhours-gate", "--type=merge", "-p",
                                '{"spec":{"suspend":true}}'],
                               f"✗ CronWorkflow {SERVING}/offhours-gate: suspended: the gate does not run — fix: "),
    "gate serviceaccount": (["-n", SERVING, "delete", "serviceaccount", "offhours-gate"],
                            f"✗ ServiceAccount {SERVING}/offhours-gate: missing — fix: offhours render"),
    "exit hook serviceaccount": (["-n", RESEARCH, "delete", "serviceaccount", "offhours-exit-hook"],
                                 f"✗ ServiceAccount {RESEARCH}/offhours-exit-hook: missing — fix: offhours render"),
}


@pytest.mark.parametrize("part", list(REMOVALS))
def test_each_part_removed_is_one_cross_with_its_fix(restored: Install, part: str) -> None:
    command, expected = REMOVALS[part]
    restored.kubectl(*command)
    code, lines = restored.check()
    assert code == 1 and lines[-1].endswith("check(s) failed")
    assert any(line.startswith(expected) for line in lines), f"{expected!r} not in:\n" + "\n".join(lines)


def test_gate_without_its_rolebindings_lacks_rights(restored: Install) -> None:
    bindings = client.RbacAuthorizationV1Api(restored.api).list_namespaced_role_binding(SERVING).items
    gate = [b.metadata.name for b in bindings if any(s.name == "offhours-gate" for s in b.subjects or [])]
    assert gate, "the install binds no Role to offhours-gate in serving"
    for name in gate:
        restored.kubectl("-n", SERVING, "delete", "rolebinding", name)
    code, lines = restored.check()
    assert code == 1
    # Its rights in serving are gone (14: scale x3, its target's get, deployments x3, pods, events, lease, state
    # ConfigMap x3, listing ConfigMaps);
    # those in research remain.
    assert _line(lines, f"✗ RBAC {SERVING}/offhours-gate:") == (
        f"✗ RBAC {SERVING}/offhours-gate: lacks 14 right(s): get deployments/scale ask in {SERVING}; "
        f"patch deployments/scale ask in {SERVING}; update deployments/scale ask in {SERVING}; "
        f"get deployments ask in {SERVING} — fix: offhours render --gate-config FILE --out build/manifests && "
        "kubectl apply --server-side -k build/manifests")


def test_exit_hook_with_a_right_in_serving_is_a_cross(restored: Install) -> None:
    restored.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "too-much", "namespace": SERVING},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "too-much", "namespace": SERVING},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "too-much"},
         "subjects": [{"kind": "ServiceAccount", "name": "offhours-exit-hook", "namespace": RESEARCH}]}]}))
    try:
        code, lines = restored.check()
    finally:
        restored.kubectl("-n", SERVING, "delete", "rolebinding,role", "too-much")
    assert code == 1
    assert _line(lines, f"✗ RBAC {RESEARCH}/offhours-exit-hook has no right") == (
        f"✗ RBAC {RESEARCH}/offhours-exit-hook has no right in {SERVING}: may get pods — fix: remove the "
        f"RoleBindings in {SERVING} that name {RESEARCH}/offhours-exit-hook")


def test_metrics_that_do_not_answer_are_a_cross(restored: Install) -> None:
    lines: list[str] = []
    other_port = free_port()  # nothing serves there
    config = restored.raw | {"metrics": {"source": "direct", "direct": {"port": other_port, "timeoutSeconds": 1}}}
    restored.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "offhours-gate-config", "namespace": SERVING},
        "data": {"gate.yaml": yaml.safe_dump(config)}}))
    code = check(restored.api, None, out=lines.append)  # the installed ConfigMap's configuration
    assert code == 1
    assert _line(lines, "✗ metrics of ask").startswith(
        f"✗ metrics of ask (direct :{other_port}/metrics): 0/2 ready pod(s) return vLLM series; ")


def test_a_failed_last_gate_run_is_a_cross(restored: Install, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
            "metadata": {"name": "offhours-gate-1700000000", "namespace": SERVING,
                         "labels": {"workflows.argoproj.io/cron-workflow": "offhours-gate",
                                    "workflows.argoproj.io/completed": "true"}},
            "spec": {"workflowTemplateRef": {"name": "absent"}},
            "status": {"phase": "Failed", "finishedAt": "2099-01-01T00:00:00Z", "message": "tick failed"}}
    custom.create_namespaced_custom_object(GROUP, VERSION, SERVING, "workflows", body)
    try:
        code, lines = restored.check()
    finally:
        custom.delete_namespaced_custom_object(GROUP, VERSION, SERVING, "workflows", "offhours-gate-1700000000")
    assert code == 1
    assert _line(lines, f"✗ CronWorkflow {SERVING}/offhours-gate") == (
        f"✗ CronWorkflow {SERVING}/offhours-gate: scheduled; last run offhours-gate-1700000000 Failed at "
        f"2099-01-01T00:00:00Z: tick failed — fix: argo -n {SERVING} logs offhours-gate-1700000000")


def test_expected_cli_errors_on_the_cluster_are_one_line(cluster_env: dict[str, str], install: Install) -> None:
    env = {"KUBECONFIG": cluster_env["KUBECONFIG"], "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", "submit", "nope", "-n", RESEARCH,
                          "-p", "service=ask"], capture_output=True, text=True, timeout=120, env=env)
    # Refused before anything is created (exit 2, as every submit refusal), naming what is missing and where to look.
    assert run.returncode == 2
    assert run.stderr == (f"submit: no WorkflowTemplate 'nope' in namespace '{RESEARCH}' "
                          f"(`argo template list -n {RESEARCH}` lists them)\n")
