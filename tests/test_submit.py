"""`offhours submit`: the parked Workflow it builds, and the parameters it refuses."""

import pytest

from offhours.scripts.submit import SubmitError, parked_workflow, parse_params
from offhours.scripts.validate import validate_documents
from offhours.workflows.render import manifests

TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
REQUIRED = {"service": "chat", "run-id": "llama-sft-7", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o",
            "checkpoint-uri": "s3://c"}


def test_parked_workflow_carries_what_the_gate_reads() -> None:
    wf = parked_workflow(TEMPLATE, {**REQUIRED, "replicas": "2"}, "research", priority=5)
    assert wf["spec"]["suspend"] is True and wf["spec"]["workflowTemplateRef"] == {"name": "offhours-llm-pipeline"}
    labels = wf["metadata"]["labels"]
    assert labels["offhours.io/service"] == "chat" and labels["offhours.io/replicas"] == "2"
    assert labels["offhours.io/state"] == "parked" and labels["offhours.io/run-id"] == "llama-sft-7"
    assert wf["metadata"]["annotations"]["offhours.io/priority"] == "5"
    assert validate_documents([("wf.yaml", 0, wf)]) == []


@pytest.mark.parametrize("params, message", [
    ({**REQUIRED, "sft-gpu": "8"}, "has no parameter sft-gpu"),
    ({k: v for k, v in REQUIRED.items() if k != "image"}, "needs -p image=..."),
    ({**REQUIRED, "replicas": "two"}, "replicas must be a whole number"),
    ({**REQUIRED, "run-id": "Run_7"}, "run-id must be a DNS label"),
])
def test_bad_parameters_are_refused_before_anything_is_created(params: dict[str, str], message: str) -> None:
    with pytest.raises(SubmitError, match=message):
        parked_workflow(TEMPLATE, params, "research")


def test_param_pairs() -> None:
    assert parse_params(["a=b=c", "x="]) == {"a": "b=c", "x": ""}
    with pytest.raises(SubmitError, match="expected name=value"):
        parse_params(["novalue"])
