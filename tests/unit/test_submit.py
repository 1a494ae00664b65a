"""`offhours submit`: the parked Workflow it builds, and the parameters it refuses before anything is created."""

import pytest

from offhours.scripts.cluster.parked import SubmitError, parameter_schema, parked_workflow, parse_params
from offhours.scripts.validate import validate_documents
from offhours.workflows.render import manifests

TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
JOB = manifests()["workflowtemplate-offhours-job.yaml"]
REQUIRED = {"service": "chat", "run-id": "llama-sft-7", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o",
            "checkpoint-uri": "s3://c"}


def test_parked_workflow_carries_what_the_gate_reads() -> None:
    wf = parked_workflow(TEMPLATE, {**REQUIRED, "replicas": "2"}, "research", priority=5)
    assert wf["spec"]["suspend"] is True and wf["spec"]["workflowTemplateRef"] == {"name": "offhours-llm-pipeline"}
    labels = wf["metadata"]["labels"]
    assert labels["offhours.io/service"] == "chat" and labels["offhours.io/replicas"] == "2"
    assert labels["offhours.io/state"] == "parked" and labels["offhours.io/run-id"] == "llama-sft-7"
    assert wf["metadata"]["annotations"]["offhours.io/priority"] == "5"
    found = validate_documents([("wf.yaml", 0, wf)])  # valid; its image by tag is warned about
    assert [(p.severity, p.path) for p in found] == [("warning", "spec.arguments.parameters[2].value")], found
    pinned = parked_workflow(TEMPLATE, {**REQUIRED, "image": "ghcr.io/lab/t@sha256:" + "a" * 64}, "research")
    assert validate_documents([("wf.yaml", 0, pinned)]) == []


def test_a_submission_sets_only_the_template_the_values_and_suspend() -> None:
    # No image, ServiceAccount, podSpecPatch or hook of the workflow can come from a submission.
    wf = parked_workflow(TEMPLATE, {**REQUIRED, "sft-gpus": "8"}, "research")
    assert set(wf["spec"]) == {"workflowTemplateRef", "arguments", "suspend"}


def test_the_schema_is_the_one_the_check_step_uses() -> None:
    schema = parameter_schema(TEMPLATE)
    assert schema["sft-gpus"] == "integer" and schema["sft-args"] == "string-list" and schema["service"] == "service"
    assert schema["sft-memory"] == "quantity" and schema["run-sft"] == "boolean" and schema["output-uri"] == "uri"
    declared = [p["name"] for p in TEMPLATE["spec"]["arguments"]["parameters"]]
    assert list(schema) == declared
    assert parameter_schema({"metadata": {"name": "plain"}, "spec": {"templates": [{"name": "main"}]}}) == {}


@pytest.mark.parametrize("params, message", [
    # Bad values of each kind, each refused in one line naming the parameter.
    ({**REQUIRED, "sft-gpus": "abc"}, r"^parameter sft-gpus='abc' must be a whole number >= 0$"),
    ({**REQUIRED, "sft-args": '["--epochs", 2'}, r"^parameter sft-args='\[\"--epochs\", 2' is not valid JSON"),
    ({**REQUIRED, "sft-args": '["--epochs", 2]'}, r"^parameter sft-args=.* must be a JSON list of strings \(item 1"),
    # A podSpecPatch injection through a parameter: refused before anything is created.
    ({**REQUIRED, "termination-grace-seconds": '120,"serviceAccountName":"offhours-gate"'},
     r"^parameter termination-grace-seconds=.* must be a whole number >= 0$"),
    ({**REQUIRED, "sft-memory": "lots"}, r"^parameter sft-memory='lots' must be a Kubernetes quantity"),
    ({**REQUIRED, "output-uri": "s3:/typo"}, r"^parameter output-uri='s3:/typo' must be an s3://, gs:// or file:// URI$"),
    ({**REQUIRED, "node-selector": '["pool"]'}, r"^parameter node-selector=.* must be a JSON object, not list$"),
    # Checkpoint URIs the store could not write exactly where they say, refused at submit as in the check step.
    ({**REQUIRED, "checkpoint-uri": "gs://lab/ckpt"}, r"^parameter checkpoint-uri='gs://lab/ckpt' must be file:// or s3://"),
    ({**REQUIRED, "checkpoint-uri": "file://data/ckpt"}, r"names a host \('data'\) on file://: write file:///data/ckpt"),
    ({**REQUIRED, "checkpoint-uri": "s3://lab/ckpt#a"}, r"contains '#' \(a fragment\)"),
    ({**REQUIRED, "env": '{"OFFHOURS_CHECKPOINT_URI": "s3://lab/elsewhere"}'},
     r"^parameter env=.* must not set OFFHOURS_CHECKPOINT_URI: the step sets it from checkpoint-uri$"),
    ({**REQUIRED, "run-sft": "yes"}, r"^parameter run-sft='yes' must be true or false$"),
    ({**REQUIRED, "image": "Not An Image"}, r"^parameter image='Not An Image' must be a container image reference$"),
    ({**REQUIRED, "sft-gpus": "x", "rl-gpus": "y"},
     r"^2 problems: parameter sft-gpus='x' must be a whole number >= 0; parameter rl-gpus='y' must be a whole number"),
    ({**REQUIRED, "sft-gpu": "8"}, "has no parameter sft-gpu"),
    ({**REQUIRED, "offhours-image": "evil/hook:1"}, "has no parameter offhours-image"),
    ({**REQUIRED, "launcher-image": "evil/launch:1"}, "has no parameter launcher-image"),
    ({k: v for k, v in REQUIRED.items() if k != "image"}, "needs -p image=..."),
    ({**REQUIRED, "replicas": "two"}, r"^replicas must be a whole number >= 1, got 'two'$"),
    ({**REQUIRED, "run-id": "Run_7"}, r"^run-id must be a DNS label of at most 50 characters, got 'Run_7'$"),
])
def test_bad_parameters_are_refused_before_anything_is_created(params: dict[str, str], message: str) -> None:
    with pytest.raises(SubmitError, match=message):
        parked_workflow(TEMPLATE, params, "research")


def test_service_must_exist_in_the_gate_config_when_one_is_given() -> None:
    with pytest.raises(SubmitError, match=r"^parameter service='nope' is not a service of the gate configuration "
                                          r"\(known: chat, code\)$"):
        parked_workflow(TEMPLATE, {**REQUIRED, "service": "nope"}, "research", services={"chat", "code"})
    assert parked_workflow(TEMPLATE, REQUIRED, "research", services={"chat"})["metadata"]["labels"][
        "offhours.io/service"] == "chat"
    # Without a gate configuration, any well-formed service name passes (the gate config is the operator's).
    assert parked_workflow(TEMPLATE, {**REQUIRED, "service": "nope"}, "research")


def test_job_defaults_pass_their_own_schema() -> None:
    wf = parked_workflow(JOB, {k: v for k, v in REQUIRED.items() if k != "image"}, "research")
    assert wf["spec"]["arguments"]["parameters"][0] == {"name": "service", "value": "chat"}


def test_param_pairs() -> None:
    assert parse_params(["a=b=c", "x="]) == {"a": "b=c", "x": ""}
    with pytest.raises(SubmitError, match="expected name=value"):
        parse_params(["novalue"])
