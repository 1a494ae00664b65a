"""The gate CronWorkflow, its Hera-runner entrypoint, and the least-privilege RBAC."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from offhours.cronworkflows.gate import gate_cron_workflow
from offhours.cronworkflows.rbac import rbac_manifests
from offhours.scripts.config.loader import parse_config
from offhours.scripts.names import EVENT_GATE_HOLD, GATE_CONFIG_MAP, LEASE_NAME, aggregated_event_name
from offhours.scripts.policy.config import ConfigError
from offhours.workflows.render import example_gate_config, example_gate_config_text, manifests


def test_cron_workflow_runs_one_tick_at_a_time() -> None:
    cron = gate_cron_workflow(schedules=["*/2 * * * *"], timezone="Europe/Paris").to_dict()
    spec = cron["spec"]
    assert spec["schedules"] == ["*/2 * * * *"] and "schedule" not in spec
    assert spec["timezone"] == "Europe/Paris"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["startingDeadlineSeconds"] == 60
    wf = spec["workflowSpec"]
    assert wf["serviceAccountName"] == "offhours-gate"
    assert wf["volumes"] == [{"name": "config", "configMap": {"name": GATE_CONFIG_MAP}}]
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
                                  {"name": "seconds", "value": "240"}, {"name": "created", "value": ""},
                                  {"name": "metrics_port", "value": "0"}]))
    run = subprocess.run([sys.executable, "-m", "hera.workflows.runner", "-e", "offhours.cronworkflows.gate:gate_tick",
                          str(inputs)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "gate config: services.chat.headroom: -1 is less than the minimum of 0" in run.stderr


def rights(manifests: list[dict[str, Any]]) -> dict[tuple[str, str], set[tuple[str, str, str, str]]]:
    """Each ServiceAccount (namespace/name) and namespace -> its (group, resource, verb, resourceNames) rights."""
    roles = {(m["metadata"]["namespace"], m["metadata"]["name"]): m["rules"] for m in manifests if m["kind"] == "Role"}
    table: dict[tuple[str, str], set[tuple[str, str, str, str]]] = {}
    for binding in (m for m in manifests if m["kind"] == "RoleBinding"):
        ns = binding["metadata"]["namespace"]
        for subject in binding["subjects"]:
            row = table.setdefault((f"{subject['namespace']}/{subject['name']}", ns), set())
            for rule in roles[(ns, binding["roleRef"]["name"])]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            row.add((group, resource, verb, ",".join(rule.get("resourceNames", []))))
    return table


def _rows(group: str, resource: str, verbs: str, names: str = "") -> set[tuple[str, str, str, str]]:
    return {(group, resource, verb, names) for verb in verbs.split()}


def test_rbac_is_exactly_the_contract() -> None:
    table = rights(rbac_manifests(example_gate_config()))
    hold = ",".join(aggregated_event_name(d, EVENT_GATE_HOLD) for d in ("chat-llama", "code-qwen"))
    assert table == {
        ("serving/offhours-gate", "serving"): (
            _rows("apps", "deployments", "get list watch")
            | _rows("apps", "deployments/scale", "get patch update", "chat-llama,code-qwen")
            | _rows("", "pods", "list patch")  # patch: the pod-deletion-cost mark of the replicas a lower removes
            | _rows("", "events", "create") | _rows("", "events", "get update", hold)
            | _rows("coordination.k8s.io", "leases", "create") | _rows("coordination.k8s.io", "leases", "get update",
                                                                         LEASE_NAME)
            | _rows("", "configmaps", "create list")
            # the records, and the ledger of what the gate lowered by object (offhours-lent)
            | _rows("", "configmaps", "get update patch delete",
                    "offhours-lent,offhours-state-chat-llama,offhours-state-code-qwen")
            | _rows("autoscaling", "horizontalpodautoscalers", "get list patch update")
            | _rows("keda.sh", "scaledobjects", "get list patch")
            | _rows("argoproj.io", "workflowtaskresults", "create patch")),
        ("serving/offhours-gate", "research"): (
            _rows("argoproj.io", "workflows", "get list watch patch create delete")
            | _rows("argoproj.io", "workflowtemplates", "list") | _rows("", "events", "create")
            # A stopped job's release is measured from its pods' status; the pool's pods are counted, and a squatter
            # (a GPU pod nothing admitted) is deleted.
            | _rows("", "pods", "list delete")
            # The GPU quota it keeps equal to what it lent: created once, then only that one read and patched.
            | _rows("", "resourcequotas", "create") | _rows("", "resourcequotas", "get patch", "offhours-gpus")),
        ("research/offhours-exit-hook", "research"): (
            _rows("argoproj.io", "workflows", "get patch") | _rows("argoproj.io", "workflowtaskresults", "create patch")),
        ("research/offhours-research", "research"): _rows("argoproj.io", "workflowtaskresults", "create patch"),
    }


def test_no_research_account_has_a_right_on_serving_and_nobody_patches_a_deployment() -> None:
    manifests = rbac_manifests(example_gate_config())
    assert not {m["kind"] for m in manifests} & {"ClusterRole", "ClusterRoleBinding"}
    table = rights(manifests)
    assert [key for key in table if key[0].startswith("research/") and key[1] == "serving"] == []
    assert [key for key, row in table.items() if {r for r in row if r[1] == "deployments" and r[2] in
                                                    ("patch", "update", "create", "delete")}] == []
    accounts = {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in manifests if m["kind"] == "ServiceAccount"}
    assert accounts == {("serving", "offhours-gate"), ("research", "offhours-exit-hook"), ("research", "offhours-research")}


def test_rbac_refuses_one_namespace_for_serving_and_research() -> None:
    config = parse_config({"namespace": "ml", "metrics": {"source": "direct"},
                           "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}})
    with pytest.raises(ConfigError, match="^gate config: namespace and workflowNamespace are both 'ml'; research "
                                          "workflows must run in another namespace than serving"):
        rbac_manifests(config)


def test_gate_runs_in_the_serving_namespace_with_its_config_map_there() -> None:
    docs = manifests()
    cron = docs["cronworkflow-offhours-gate.yaml"]
    assert cron["metadata"]["namespace"] == "serving"
    assert cron["spec"]["workflowSpec"]["serviceAccountName"] == "offhours-gate"
    config_map = docs["configmap-offhours-gate-config.yaml"]
    assert config_map["metadata"]["namespace"] == "serving"
    assert config_map["data"]["gate.yaml"] == example_gate_config_text()
    for name in ("workflowtemplate-offhours-steps.yaml", "workflowtemplate-offhours-llm-pipeline.yaml",
                 "workflowtemplate-offhours-job.yaml"):
        assert docs[name]["metadata"]["namespace"] == "research"
    assert [d["metadata"]["name"] for d in docs.values() if d["kind"] == "Namespace"] == ["serving", "research"]
    assert list(docs)[:2] == ["namespace-serving.yaml", "namespace-research.yaml"]


def test_render_image_reaches_the_gate() -> None:
    script = gate_cron_workflow(image="registry.lab/offhours:7").to_dict()["spec"]["workflowSpec"]["templates"][1]
    assert script["script"]["image"] == "registry.lab/offhours:7"


def test_dockerfile_copies_every_package_folder() -> None:
    repo = Path(__file__).resolve().parents[2]
    text = (repo / "Dockerfile").read_text()
    for folder in ("steps", "workflows", "cronworkflows", "scripts", "schemas"):
        assert f"COPY {folder}/ {folder}/" in text
    assert "offhours-launch" in text and "CGO_ENABLED=0" in text


def test_a_run_ends_before_the_next_is_due_counted_from_its_creation_not_its_pod_start() -> None:
    from datetime import datetime, timezone

    from offhours.cronworkflows.gate import HANDOVER_SECONDS, RUN_SECONDS, seconds_left

    created = "2026-05-01T10:05:00Z"
    pod_started = datetime(2026, 5, 1, 10, 5, 40, tzinfo=timezone.utc)  # a 40 s image pull
    assert seconds_left(RUN_SECONDS, created, pod_started) == 300 - HANDOVER_SECONDS - 40
    late = datetime(2026, 5, 1, 10, 11, 0, tzinfo=timezone.utc)  # waited for a node past the next schedule
    assert seconds_left(RUN_SECONDS, created, late) < 0  # gate_tick then runs one tick, not none
    assert seconds_left(60, "{{workflow.creationTimestamp}}") == 60  # not substituted (run by hand): from now
    tick = next(t for t in gate_cron_workflow().to_dict()["spec"]["workflowSpec"]["templates"] if t["name"] == "gate")
    passed = {p["name"]: p["value"] for p in tick["steps"][0][0]["arguments"]["parameters"]}
    assert passed["created"] == "{{workflow.creationTimestamp}}"
