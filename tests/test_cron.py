"""The gate CronWorkflow, its Hera-runner entrypoint, and the least-privilege RBAC."""

import json
import subprocess
import sys
from pathlib import Path

from offhours.cronworkflows.gate import CONFIG_MAP, gate_cron_workflow
from offhours.cronworkflows.rbac import rbac_manifests
from offhours.scripts.policy.config import parse_config
from offhours.workflows.render import example_gate_config


def test_cron_workflow_runs_one_tick_at_a_time() -> None:
    cron = gate_cron_workflow(schedules=["*/2 * * * *"], timezone="Europe/Paris").to_dict()
    spec = cron["spec"]
    assert spec["schedules"] == ["*/2 * * * *"] and "schedule" not in spec
    assert spec["timezone"] == "Europe/Paris"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] == 60
    wf = spec["workflowSpec"]
    assert wf["serviceAccountName"] == "offhours-gate"
    assert wf["volumes"] == [{"name": "config", "configMap": {"name": CONFIG_MAP}}]
    tick = next(t for t in wf["templates"] if t["name"] == "tick")
    assert tick["script"]["args"] == ["-m", "hera.workflows.runner", "-e", "offhours.cronworkflows.gate:gate_tick"]
    assert {p["name"] for p in wf["arguments"]["parameters"]} == {"config", "dry-run", "run-seconds"}


def test_default_schedule_is_every_five_minutes() -> None:
    assert gate_cron_workflow().to_dict()["spec"]["schedules"] == ["*/5 * * * *"]


def test_runner_entrypoint_runs_the_gate_with_argo_style_inputs(tmp_path: Path) -> None:
    # Argo writes {{inputs.parameters}} to a file and appends its path: do the same.
    bad_config = tmp_path / "gate.yaml"
    bad_config.write_text("services: {chat: {headroom: -1}}\n")
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps([{"name": "config", "value": str(bad_config)}, {"name": "dry_run", "value": "true"},
                                  {"name": "seconds", "value": "240"}]))
    run = subprocess.run([sys.executable, "-m", "hera.workflows.runner", "-e", "offhours.cronworkflows.gate:gate_tick",
                          str(inputs)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "gate config: services.chat.headroom: -1 is less than the minimum of 0" in run.stderr


def test_rbac_scales_only_the_named_deployments_and_nothing_cluster_wide() -> None:
    manifests = rbac_manifests(example_gate_config())
    kinds = [m["kind"] for m in manifests]
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    serving = next(m for m in manifests if m["kind"] == "Role" and m["metadata"]["namespace"] == "serving")
    scale = [r for r in serving["rules"] if "deployments/scale" in r["resources"]]
    assert scale == [{"apiGroups": ["apps"], "resources": ["deployments/scale"],
                      "resourceNames": ["chat-llama", "code-qwen"], "verbs": ["get", "patch", "update"]}]
    writes = [r for r in serving["rules"] if set(r["verbs"]) & {"patch", "update"}]
    assert all("resourceNames" in r for r in writes)
    workflows = next(m for m in manifests if m["kind"] == "Role" and m["metadata"]["namespace"] == "research")
    wf_rule = next(r for r in workflows["rules"] if r["resources"] == ["workflows"])
    assert wf_rule["verbs"] == ["get", "list", "patch", "create"]
    assert "delete" not in json.dumps(manifests)


def test_rbac_in_one_namespace_is_one_role() -> None:
    config = parse_config({"namespace": "ml", "metrics": {"source": "direct"},
                           "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}})
    manifests = rbac_manifests(config)
    assert [m["kind"] for m in manifests] == ["ServiceAccount", "Role", "RoleBinding"]
    assert {m["metadata"]["namespace"] for m in manifests} == {"ml"}


def test_dockerfile_copies_every_package_folder() -> None:
    repo = Path(__file__).resolve().parent.parent
    text = (repo / "Dockerfile").read_text()
    for folder in ("steps", "workflows", "cronworkflows", "scripts", "schemas"):
        assert f"COPY {folder}/ {folder}/" in text
    assert "offhours-launch" in text and "CGO_ENABLED=0" in text
