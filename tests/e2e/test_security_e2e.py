"""End to end: the security model (README, Security model) and the parameter check on the real control plane.

Real: API server (RBAC, ServiceAccount admission, SubjectAccessReview), scheduler, Argo controller
v4.0.5 (template substitution, expression tags, podSpecPatch, retries), and the parameter check's
program (`offhours check-parameters`, run as a local process by the runner with the pod's own
ServiceAccount token). kwok fakes the nodes. The exit hook is not asserted here.
"""

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import RESEARCH, SERVING, wait
from .runner import LocalPodRunner
from .test_gate_e2e import token_client
from .test_pipeline_e2e import GROUP, VERSION, workflow

INJECTION = '120,"serviceAccountName":"offhours-gate"'
"""A podSpecPatch injection: pasted raw into podSpecPatch, it added a serviceAccountName key."""

# kwok completes a Running workflow pod after 3 s unless told to run longer; the runner runs the check.
HOLD = {"offhours.io/e2e-run-for": "600s"}
BASE = {"service": "chat", "run-id": "sec", "output-uri": "s3://lab/out", "checkpoint-uri": "s3://lab/ckpt",
        "node-selector": '{"offhours.io/pool": "inference"}'}


@pytest.fixture
def workflows(api: client.ApiClient) -> Iterator[Callable[[dict[str, Any]], str]]:
    """Create workflows in the research namespace; delete them afterwards."""
    custom = client.CustomObjectsApi(api)
    names: list[str] = []

    def create(body: dict[str, Any]) -> str:
        custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", body)
        names.append(body["metadata"]["name"])
        return str(body["metadata"]["name"])

    yield create
    for name in names:
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
        except client.ApiException:
            pass


def _get(api: client.ApiClient, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH,
                                                                                     "workflows", name)
    return obj


def _nodes(wf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["displayName"]: n for n in (wf.get("status") or {}).get("nodes", {}).values()}


def _pods(api: client.ApiClient, name: str) -> list[client.V1Pod]:
    return list(client.CoreV1Api(api).list_namespaced_pod(
        RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}").items)


def _direct(name: str, arguments: dict[str, str], spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workflow that calls the `job` step by templateRef, skipping every offhours pipeline (and its check)."""
    args = {"image": "ghcr.io/lab/train:1", "command": '["train"]', "output-uri": "s3://lab/out",
            "checkpoint-uri": "s3://lab/ckpt", "run-id": "sec", "retry-limit": "3", **arguments}
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
        "metadata": {"name": name, "namespace": RESEARCH},
        "spec": {"entrypoint": "main", "podMetadata": {"annotations": HOLD}, **(spec or {}),
                 "templates": [{"name": "main", "dag": {"tasks": [{
                     "name": "job", "templateRef": {"name": "offhours-steps", "template": "job"},
                     "arguments": {"parameters": [{"name": k, "value": v} for k, v in args.items()]}}]}}]},
    }


@pytest.mark.parametrize("param, value", [
    ("termination-grace-seconds", INJECTION),
    ("sft-gpus", "abc"),
    ("sft-args", '["--epochs", 2'),
])
def test_a_bad_parameter_fails_the_pipeline_at_its_check_naming_it(
        api: client.ApiClient, installed: Path, runner: LocalPodRunner,
        workflows: Callable[[dict[str, Any]], str], param: str, value: str) -> None:
    # `argo submit --from workflowtemplate/offhours-llm-pipeline -p <param>=<value>`, as a Workflow object.
    name = f"sec-check-{param}-{int(time.time())}"
    body = workflow(name, "offhours-llm-pipeline", {**BASE, "image": "ghcr.io/lab/train:1", param: value},
                    annotations=HOLD)
    workflows(body)
    # The DAG (its node's display name is the workflow's) fails; the workflow then runs its exit hook.
    nodes = wait("the DAG to fail at check-parameters", lambda: (lambda n: n if n.get(name, {}).get("phase") in
                                                                   ("Failed", "Error") else None)(_nodes(_get(api, name))),
                 timeout=120)
    assert nodes[name]["phase"] == "Failed", nodes[name]
    check = nodes["check-parameters"]
    assert check["phase"] == "Failed"
    # The node's message is the check's one line (the pod runner reports it as the kubelet reports a termination message).
    assert f"check-parameters: parameter {param}=" in check["message"], check["message"]
    # Failed once, not retried as a preemption; no stage (no GPU) started.
    assert [n for n in nodes if n.startswith("check-parameters(")] == []
    stages = {stage: nodes[stage]["phase"] for stage in ("preprocess", "pretrain", "sft", "rl", "eval") if stage in nodes}
    assert set(stages.values()) <= {"Omitted", "Skipped"}, stages
    pods = _pods(api, name)
    assert [p.metadata.labels.get("offhours.io/stage") for p in pods if p.metadata.labels.get("offhours.io/stage")] == []
    check_pod = next(p for p in pods if p.metadata.labels.get("offhours.io/role") == "check-parameters")
    assert check_pod.spec.service_account_name == "offhours-research"
    assert not any(c.resources and c.resources.requests and "nvidia.com/gpu" in c.resources.requests
                   for c in check_pod.spec.containers)
    ran = [r for r in runner.ran if r.pod == check_pod.metadata.name]
    assert ran and ran[0].argv[:2] == ["offhours", "check-parameters"] and ran[0].exit_code == 64


@pytest.mark.parametrize("case, arguments, spec", [
    # Not valid as a number: the patch cannot be built at all.
    ("grace", {"termination-grace-seconds": INJECTION}, None),
    # Serialised as one string: the quantity is refused, nothing is added beside it.
    ("cpu", {"cpu": '4"}]},"serviceAccountName":"offhours-gate","x":[{"y":"'}, None),
    # Valid JSON, but it stays the value of nodeSelector.
    ("selector", {"node-selector": '{"serviceAccountName": "offhours-gate"}'}, None),
    # A whole Workflow asking for the gate's account: none by that name exists in the research namespace.
    ("whole-workflow", {}, {"podSpecPatch": '{"serviceAccountName": "offhours-gate"}'}),
])
def test_no_research_pod_runs_as_the_gate_even_bypassing_the_check(
        api: client.ApiClient, installed: Path, workflows: Callable[[dict[str, Any]], str],
        case: str, arguments: dict[str, str], spec: dict[str, Any] | None) -> None:
    name = f"sec-direct-{case}-{int(time.time())}"
    workflows(_direct(name, arguments, spec))
    if case == "selector":
        pod = wait("the job's pod", lambda: next((p for p in _pods(api, name)
                                                 if p.metadata.labels.get("offhours.io/stage") == "job"), None))
        assert pod.spec.service_account_name == "offhours-research"
        assert pod.spec.node_selector == {"serviceAccountName": "offhours-gate"}
        assert pod.spec.node_name is None, "no node carries that label: the pod waits, as any mis-placed pod"
        return
    wf = wait("the workflow to end", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                               ("Failed", "Error") else None)(_get(api, name)), timeout=120)
    attempts = [n for n in _nodes(wf).values() if n.get("type") == "Pod"]
    messages = " | ".join(n.get("message", "") for n in attempts)
    print(f"{case}: {wf['status'].get('message')} :: {messages}")
    assert len(attempts) == 1, f"a refused pod spec is not a preemption, never retried: {messages}"
    expected = {"grace": "Error applying PodSpecPatch", "cpu": "Error applying PodSpecPatch",
                "whole-workflow": "offhours-gate"}[case]
    assert expected in messages or expected in wf["status"].get("message", ""), messages
    assert [p.spec.service_account_name for p in _pods(api, name)] == []


def _allowed(api: client.ApiClient, user: str, verb: str, name: str, subresource: str = "scale") -> bool:
    review = client.AuthorizationV1Api(api).create_subject_access_review(client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(user=user, resource_attributes=client.V1ResourceAttributes(
            namespace=SERVING, group="apps", resource="deployments", subresource=subresource, verb=verb, name=name))))
    return bool(review.status.allowed)


def test_only_the_gate_may_scale_serving_and_only_its_deployments(api: client.ApiClient, installed: Path) -> None:
    table = {}
    accounts = {sa.metadata.name for sa in client.CoreV1Api(api).list_namespaced_service_account(RESEARCH).items}
    assert accounts == {"default", "offhours-exit-hook", "offhours-research"}
    for account in ("research:offhours-research", "research:offhours-exit-hook", "research:default",
                    "research:offhours-gate", "serving:offhours-gate"):
        user = f"system:serviceaccount:{account}"
        table[account] = {
            "scale chat": _allowed(api, user, "patch", "chat") and _allowed(api, user, "update", "chat"),
            "scale other": _allowed(api, user, "patch", "other"),
            "patch chat": _allowed(api, user, "patch", "chat", subresource=""),
        }
    print(json.dumps(table, indent=1))
    assert table == {
        "research:offhours-research": {"scale chat": False, "scale other": False, "patch chat": False},
        "research:offhours-exit-hook": {"scale chat": False, "scale other": False, "patch chat": False},
        "research:default": {"scale chat": False, "scale other": False, "patch chat": False},
        "research:offhours-gate": {"scale chat": False, "scale other": False, "patch chat": False},
        "serving:offhours-gate": {"scale chat": True, "scale other": False, "patch chat": False},
    }


def test_a_research_token_cannot_scale_serving(api: client.ApiClient, installed: Path, cluster_env: dict[str, str],
                                               chat_service: Callable[[int], None]) -> None:
    chat_service(2)
    apps = client.AppsV1Api(api)
    for account in ("offhours-research", "offhours-exit-hook"):
        as_pod = token_client(api, cluster_env["KUBECONFIG"], RESEARCH, account)
        review = client.AuthorizationV1Api(as_pod).create_self_subject_access_review(client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
                namespace=SERVING, group="apps", resource="deployments", subresource="scale", verb="patch",
                name="chat"))))
        assert review.status.allowed is False, account
        with pytest.raises(client.ApiException) as refused:
            client.AppsV1Api(as_pod).patch_namespaced_deployment_scale("chat", SERVING, {"spec": {"replicas": 0}})
        assert refused.value.status == 403, account
    assert apps.read_namespaced_deployment_scale("chat", SERVING).spec.replicas == 2
    # The gate's own token scales it (and gets the same answer from the API server).
    gate = token_client(api, cluster_env["KUBECONFIG"], SERVING, "offhours-gate")
    client.AppsV1Api(gate).patch_namespaced_deployment_scale("chat", SERVING, {"spec": {"replicas": 1}})
    assert apps.read_namespaced_deployment_scale("chat", SERVING).spec.replicas == 1
