"""End to end: the LLM pipeline from its WorkflowTemplate, parameters only, on kwok GPU nodes, real Argo.

Real: API server, scheduler, controller-manager, Argo controller v4.0.5, the exit hook program
(`offhours return-gpus`, run as a local process by the runner). kwok fakes the nodes and completes
the research pods.
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from .conftest import RESEARCH, wait
from .runner import LocalPodRunner

GROUP, VERSION = "argoproj.io", "v1alpha1"


def workflow(name: str, template: str, params: dict[str, str], suspend: bool = False,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
        "metadata": {"name": name, "namespace": RESEARCH},
        "spec": {"workflowTemplateRef": {"name": template},
                 "arguments": {"parameters": [{"name": k, "value": v} for k, v in params.items()]},
                 **({"suspend": True} if suspend else {}),
                 **({"podMetadata": {"annotations": annotations}} if annotations else {})},
    }


def test_pipeline_runs_from_its_template_with_parameters_only(api: client.ApiClient, installed: Path,
                                                              runner: LocalPodRunner,
                                                              chat_service: Callable[[int], None]) -> None:
    chat_service(2)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    params = {
        "service": "chat", "replicas": "1", "run-id": "e2e-pipe", "image": "ghcr.io/lab/train:1",
        "output-uri": "s3://lab/out", "checkpoint-uri": "s3://lab/ckpt", "run-pretrain": "false",
        "sft-gpus": "4", "rl-gpus": "2", "eval-gpus": "1", "eval-suites": '["mmlu","gsm8k"]',
        "node-selector": '{"offhours.io/pool": "inference"}',
    }
    name = f"e2e-pipe-{int(time.time())}"
    custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows",
                                           workflow(name, "offhours-llm-pipeline", params))
    wf = wait("the pipeline to succeed", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                                   ("Succeeded", "Failed", "Error") else None)(
        custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)), timeout=180)
    nodes = wf["status"]["nodes"].values()
    failed = {n["displayName"]: n.get("message") for n in nodes if n["phase"] in ("Failed", "Error")}
    assert wf["status"]["phase"] == "Succeeded", (wf["status"].get("message"), failed)
    phases = {n["displayName"]: n["phase"] for n in nodes}
    assert phases["preprocess"] == "Succeeded" and phases["pretrain"] == "Skipped"
    assert phases["sft"] == "Succeeded" and phases["rl"] == "Succeeded"
    assert phases["eval(0:mmlu)"] == "Succeeded" and phases["eval(1:gsm8k)"] == "Succeeded"

    pods = core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}").items
    research = {p.metadata.labels.get("offhours.io/stage"): p for p in pods if p.metadata.labels.get("offhours.io/stage")}
    gpus = {stage: next(c for c in p.spec.containers if c.name == "main").resources.requests.get("nvidia.com/gpu")
            for stage, p in research.items()}
    assert gpus == {"preprocess": "0", "sft": "4", "rl": "2", "eval": "1"}
    for pod in research.values():
        assert pod.spec.priority_class_name == "offhours-best-effort" and pod.spec.priority == -100
        assert pod.spec.node_name.startswith("gpu-") and pod.spec.node_selector == {"offhours.io/pool": "inference"}
        assert pod.spec.termination_grace_period_seconds == 120

    # The exit hook ran for real: it marked the workflow returned and recorded its GPU-seconds.
    # The parameter check ran for real first, as the research ServiceAccount, and passed.
    check = [r for r in runner.ran if r.pod.startswith(name) and r.argv[1:2] == ["check-parameters"]]
    assert len(check) == 1 and check[0].exit_code == 0 and check[0].output.strip().endswith("parameter(s) ok")
    hook = wait("the exit hook to run", lambda: [r for r in runner.ran if r.pod.startswith(name)
                                                 and r.argv[1:2] == ["return-gpus"]], timeout=60)
    assert hook[0].argv[:2] == ["offhours", "return-gpus"] and hook[0].exit_code == 0, hook[0].output
    final = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
    assert final["metadata"]["labels"]["offhours.io/state"] == "returned"
    assert "offhours.io/gpu-seconds" in final["metadata"]["annotations"]
    assert int(final["metadata"]["annotations"]["offhours.io/gpu-seconds"]) > 0
