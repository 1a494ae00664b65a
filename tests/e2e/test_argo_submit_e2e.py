"""End to end: `argo submit --from workflowtemplate/offhours-job` with the real argo CLI v4.0.5.

A workflow submitted the Argo way starts at once (argo has no parked submission): its template's
`workflowMetadata.labelsFrom` gives it the service and replicas labels, the gate sees it run
without admission while serving has nothing to lend, parks a copy of it (same run id, suspended,
exactly as `offhours submit` creates one) and stops it; once load falls the gate admits the copy,
which runs, ends, returns its GPUs and is counted by `offhours usage`. `argo list`/`argo get` show
each step as Argo sees it.

Real: API server, scheduler, Argo controller and CLI, the gate (its ServiceAccount's token), the
parameter check, the reference job and the exit hook (local processes). Stand-ins: kwok nodes, vLLM.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import RESEARCH, SERVING, wait
from .runner import LocalPodRunner
from .test_gate_e2e import _tick, gate_setup  # noqa: F401 - gate_setup is a fixture used here
from .test_researcher_journey_e2e import NS, Cli, cli, get_wf, job_params, table  # noqa: F401 - cli is a fixture


def argo_cli(cluster_env: dict[str, str]) -> str:
    """The argo CLI the control plane's build put beside kubectl (else the one on the PATH)."""
    built = Path(cluster_env["OFFHOURS_CLUSTER_BIN"]) / "argo"
    path = str(built) if built.exists() else shutil.which("argo")
    if path is None:
        pytest.skip(f"no argo CLI: neither {built} nor `argo` on the PATH (make cluster-up builds it)")
    return path


def argo(cluster_env: dict[str, str], *args: str) -> str:
    out = subprocess.run([argo_cli(cluster_env), "--kubeconfig", cluster_env["KUBECONFIG"], *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"argo {' '.join(args)}: {out.stderr}"
    return out.stdout


def test_argo_submit_from_template_is_parked_then_admitted_by_the_gate(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner,  # noqa: F811
        cluster_env: dict[str, str], cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    apps = client.AppsV1Api(api)
    load = gate_setup["load"]
    load.rps = 150.0  # chat needs every replica: nothing to lend
    _tick(gate_setup)  # the emulated servers' first reading

    # A short run (200 steps): it ends on its own once admitted, so Argo measures its GPU time.
    params = job_params("argo-a", tmp_path)
    params[params.index(next(p for p in params if p.startswith("args="))) ] = \
        "args=" + json.dumps(["--steps", "200", "--every", "50", "--step-seconds", "0.05"])
    name = argo(cluster_env, "submit", "-n", RESEARCH, "--from", "workflowtemplate/offhours-job", "-o", "name",
                *params).strip().split("/")[-1]
    assert re.fullmatch(r"offhours-job-[a-z0-9]{5}", name), name
    labels = wait("the template's labelsFrom on the workflow", lambda: (
        lambda m: m if m.get("offhours.io/service") else None)(get_wf(api, name)["metadata"].get("labels") or {}))
    assert (labels["offhours.io/service"], labels["offhours.io/replicas"], labels["offhours.io/managed"]) == (
        "chat", "1", "true")
    assert "offhours.io/state" not in labels and not get_wf(api, name)["spec"].get("suspend")  # running, unadmitted
    listed = argo(cluster_env, "list", "-n", RESEARCH, "-o", "name").split()
    assert name in listed

    # The gate: no room, so a parked copy (as `offhours submit` parks) and the original stopped.
    out = _tick(gate_setup)
    assert out.decision.action == "hold" and out.parked == [f"{name}-p1"], gate_setup["log"].getvalue()
    assert [j.name for j in out.plan.stop] == [name]
    original, copy = get_wf(api, name), get_wf(api, f"{name}-p1")
    assert original["spec"]["shutdown"] == "Stop" and original["metadata"]["labels"]["offhours.io/state"] == "preempted"
    assert copy["spec"]["suspend"] is True
    assert {k: v for k, v in copy["metadata"]["labels"].items() if k.startswith("offhours.io/")} == {
        "offhours.io/service": "chat", "offhours.io/replicas": "1", "offhours.io/managed": "true",
        "offhours.io/state": "parked", "offhours.io/run-id": "argo-a", "offhours.io/copy-of": original["metadata"]["uid"],
        # The gate creates the copy; it keeps the person who ran argo submit as its user.
        "offhours.io/user": original["metadata"]["labels"]["workflows.argoproj.io/creator"]}
    assert copy["spec"]["workflowTemplateRef"] == {"name": "offhours-job"}
    assert copy["spec"]["arguments"] == original["spec"]["arguments"]
    got = json.loads(argo(cluster_env, "get", "-n", RESEARCH, f"{name}-p1", "-o", "json"))
    assert got["spec"]["suspend"] is True and got["metadata"]["labels"]["offhours.io/state"] == "parked"
    wait("the stopped original to end", lambda: get_wf(api, name).get("status", {}).get("phase") in ("Failed", "Error"))
    # One run in the researcher's view: the original (no run-id label) and its copy share the run-id parameter.
    # Stopped before the gate admitted it (nothing was lent), it waits for admission: no preemption.
    rows = table(cli("jobs", *NS)[0])
    assert [(r["NAME"], r["RUN"], r["STATE"], r["QUEUE"], r["PREEMPTIONS"]) for r in rows] == [
        (f"{name}-p1", "argo-a", "waiting", "1", "0")]
    why = cli("why", name, *NS)[0]
    assert "stopped before admission (it held no lent GPUs)" in why and "preempted" not in why

    load.rps = 5.0  # quiet: the gate admits the copy
    for _ in range(4):
        if _tick(gate_setup).plan.admit:
            break
    copy = get_wf(api, f"{name}-p1")
    assert copy["metadata"]["labels"]["offhours.io/state"] == "admitted" and not copy["spec"].get("suspend")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15
    done = wait("the copy to succeed", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                                ("Succeeded", "Failed", "Error") else None)(get_wf(api, f"{name}-p1")),
                timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"].get("message")
    returned = wait("the exit hook's returned mark", lambda: (lambda w: w if w["metadata"]["labels"].get(
        "offhours.io/state") == "returned" else None)(get_wf(api, f"{name}-p1")), timeout=90)
    gpu_seconds = returned["status"]["resourcesDuration"]["nvidia.com/gpu"]
    assert gpu_seconds > 0 and returned["metadata"]["annotations"]["offhours.io/gpu-seconds"] == str(gpu_seconds)
    _tick(gate_setup)
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    assert json.loads(argo(cluster_env, "get", "-n", RESEARCH, f"{name}-p1", "-o", "json"))["status"]["phase"] == \
        "Succeeded"

    # What the researcher reads: the run succeeded after one parking (no preemption: it was never lent GPUs
    # before its stop), its GPU-seconds as Argo measured them.
    original_gpu = get_wf(api, name)["status"].get("resourcesDuration", {}).get("nvidia.com/gpu", 0)
    used = (gpu_seconds + original_gpu) / 3600
    record = json.loads(cli("jobs", "--all", "-o", "json", *NS)[0])
    assert [(r["runId"], r["state"], r["preemptions"], r["gpuHours"], r["workflows"]) for r in record] == [
        ("argo-a", "succeeded", 0, round(used, 3), [name, f"{name}-p1"])]
    out, err = cli("usage", "--csv", *NS)
    assert out.splitlines()[0] == "service,runs,gpu_hours_used,gpu_hours_lost_to_preemption,gpu_hours_lent"
    assert out.splitlines()[1].startswith(f"chat,1,{used:.2f},0.00,") and err == ""


def test_argo_submit_with_an_undeclared_argument_is_never_admitted_and_says_did_you_mean(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner,  # noqa: F811
        cluster_env: dict[str, str], tmp_path: Path) -> None:
    # The fault: `-p gpu=1` (a typo of `gpus`) would run on lent GPUs with the template's default gpus.
    apps = client.AppsV1Api(api)
    load = gate_setup["load"]
    load.rps = 150.0  # nothing to lend yet: the gate stops it and parks a copy, as for any argo-submitted run
    _tick(gate_setup)
    name = argo(cluster_env, "submit", "-n", RESEARCH, "--from", "workflowtemplate/offhours-job", "-o", "name",
                *job_params("argo-typo", tmp_path), "-p", "gpu=1").strip().split("/")[-1]
    wait("the template's labelsFrom on the workflow", lambda: (get_wf(api, name)["metadata"].get("labels") or {}).get(
        "offhours.io/service"))
    assert {"name": "gpu", "value": "1"} in get_wf(api, name)["spec"]["arguments"]["parameters"]  # Argo kept it
    out = _tick(gate_setup)
    assert out.parked == [f"{name}-p1"] and not out.plan.adopt, gate_setup["log"].getvalue()
    wait("the stopped original to end", lambda: get_wf(api, name).get("status", {}).get("phase") in ("Failed", "Error"))

    load.rps = 5.0  # quiet: room to lend, and the copy is the only job
    for _ in range(4):
        out = _tick(gate_setup)
        assert not out.plan.admit and not out.plan.adopt, gate_setup["log"].getvalue()
    copy = get_wf(api, f"{name}-p1")
    assert copy["metadata"]["labels"]["offhours.io/state"] == "parked" and copy["spec"]["suspend"] is True
    reason = copy["metadata"]["annotations"]["offhours.io/waiting-reason"]
    assert reason.startswith("not admitted: its template offhours-job has no parameter gpu (did you mean gpus?)"), reason
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16  # nothing lent for it
    # The gate's own ServiceAccount listed the templates (its Role allows it): no unreadable-templates warning.
    assert "WorkflowTemplates of" not in gate_setup["log"].getvalue()
