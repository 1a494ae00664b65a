"""The LLM pipeline and job WorkflowTemplates: DAG shape, skipping, fan-out, exit hook, parameters only."""

import json
import re
import subprocess
from typing import Any

import pytest

from offhours.scripts.names import CHECK_PARAMETERS, LABEL_REPLICAS, LABEL_SERVICE, RETURN_GPUS, STEPS_TEMPLATE
from offhours.workflows import llm_pipeline, single_job
from offhours.workflows.llm_pipeline import STAGES, input_uri_expression
from tests.support.tools import require_tool

PIPELINE = llm_pipeline.workflow_template().to_dict()
JOB = single_job.workflow_template().to_dict()
TASKS = {t["name"]: t for t in PIPELINE["spec"]["templates"][0]["dag"]["tasks"]}


def _args(task: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in task["arguments"]["parameters"]}


def test_dag_checks_the_parameters_then_runs_the_stages_in_order_by_template_ref() -> None:
    assert list(TASKS) == [CHECK_PARAMETERS, *STAGES]
    assert TASKS[STAGES[0]]["depends"] == CHECK_PARAMETERS
    for previous, stage in zip(STAGES, STAGES[1:]):
        assert TASKS[stage]["depends"] == previous
    for stage, task in TASKS.items():
        assert task["templateRef"] == {"name": STEPS_TEMPLATE, "template": stage}


@pytest.mark.parametrize("template", [PIPELINE, JOB], ids=["pipeline", "job"])
def test_the_check_step_gets_every_parameter_serialised(template: dict[str, Any]) -> None:
    tasks = template["spec"]["templates"][0]["dag"]["tasks"]
    check = _args(tasks[0])
    declared = [p["name"] for p in template["spec"]["arguments"]["parameters"]]
    assert list(json.loads(check["schema"])) == declared
    # One expression tag, toJson of a map naming each parameter: a value cannot break out of its string.
    values = check["values"]
    assert values.startswith("{{=toJson({") and values.endswith("})}}") and values.count("}}") == 1
    assert [m for m in re.findall(r"'([a-z-]+)': workflow\.parameters\['([a-z-]+)'\]", values) if m[0] == m[1]] == [
        (n, n) for n in declared]
    # Every other task waits for the check, directly or through its predecessors.
    roots = [t for t in tasks[1:] if t["depends"] == CHECK_PARAMETERS]
    assert roots and all(t["depends"] for t in tasks[1:])


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_can_be_skipped(stage: str) -> None:
    assert TASKS[stage]["when"] == f"{{{{workflow.parameters.run-{stage}}}}} == true"


def test_eval_fans_out_over_suites() -> None:
    ev = TASKS["eval"]
    assert ev["withParam"] == "{{workflow.parameters.eval-suites}}"
    assert _args(ev)["suite"] == "{{item}}"
    assert _args(ev)["output-uri"].endswith("/eval/{{item}}")


@pytest.mark.parametrize("template", [PIPELINE, JOB], ids=["pipeline", "job"])
def test_exit_hook_gives_gpus_back(template: dict[str, Any]) -> None:
    hook = template["spec"]["hooks"]["exit"]
    # No arguments: the hook's image, account and target are fixed by offhours-steps.
    assert hook == {"templateRef": {"name": STEPS_TEMPLATE, "template": RETURN_GPUS}}
    assert "onExit" not in template["spec"]
    names = {p["name"] for p in template["spec"]["arguments"]["parameters"]}
    assert not names & {"offhours-image", "launcher-image"}
    assert template["spec"]["serviceAccountName"] == "offhours-research"


@pytest.mark.parametrize("template", [PIPELINE, JOB], ids=["pipeline", "job"])
def test_workflows_carry_the_labels_the_gate_reads(template: dict[str, Any]) -> None:
    labels_from = template["spec"]["workflowMetadata"]["labelsFrom"]
    assert labels_from[LABEL_SERVICE] == {"expression": "workflow.parameters.service"}
    assert labels_from[LABEL_REPLICAS] == {"expression": "workflow.parameters.replicas"}


def test_only_identity_and_placement_parameters_are_required() -> None:
    # `argo submit --from workflowtemplate/...` needs these -p values and nothing else.
    required = {p["name"] for p in PIPELINE["spec"]["arguments"]["parameters"] if "value" not in p}
    assert required == {"service", "run-id", "output-uri", "checkpoint-uri", "image"}
    required_job = {p["name"] for p in JOB["spec"]["arguments"]["parameters"] if "value" not in p}
    assert required_job == {"service", "run-id", "output-uri", "checkpoint-uri"}
    defaults = {p["name"]: p.get("value") for p in JOB["spec"]["arguments"]["parameters"]}
    assert defaults["image"].startswith("ghcr.io/offhours/reference-job:")  # the preemptible reference


def test_no_environment_specific_default() -> None:
    text = json.dumps(PIPELINE) + json.dumps(JOB)
    for needle in ("s3://", "gs://", "file://", "10.", "svc.cluster.local"):
        assert needle not in text.replace("(s3://, gs://, file://)", ""), needle


@pytest.mark.parametrize(
    "runs, expected",
    [
        ({s: "true" for s in STAGES}, "OUT/r1/rl"),
        ({**{s: "true" for s in STAGES}, "rl": "false"}, "OUT/r1/sft"),
        ({**{s: "false" for s in STAGES}, "eval": "true"}, "IN"),
        ({**{s: "false" for s in STAGES}, "preprocess": "true", "eval": "true"}, "OUT/r1/preprocess"),
    ],
)
def test_skipped_stages_pass_the_previous_output_on(runs: dict[str, str], expected: str) -> None:
    # Argo's expr and JavaScript agree on this subset (ternary, ==, +, indexing): evaluate with node.
    node = require_tool("node")
    params = {"input-uri": "IN", "output-uri": "OUT", "run-id": "r1", **{f"run-{s}": v for s, v in runs.items()}}
    expr = input_uri_expression("eval")[3:-2]
    script = f"const workflow = {{parameters: {json.dumps(params)}}}; process.stdout.write({expr});"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True).stdout
    assert out == expected
    assert _args(TASKS["eval"])["input-uri"] == input_uri_expression("eval")
