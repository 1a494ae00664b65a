"""The library's job templates declare `pods` (default 1), and a job's shape is read as its pods get their
arguments: the template's defaults, then the workflow's own.

Invariant, in words: for every library WorkflowTemplate and any `pods` and `gpus` a workflow sets (or leaves
unset), the gate finds no undeclared argument and reads the shape (pods, gpus) the pods will run with.
"""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cluster.arguments import undeclared_arguments
from offhours.scripts.policy.placement import Shape, job_shape, shape_arguments
from offhours.workflows import llm_pipeline, single_job

TEMPLATES = {"offhours-job": single_job.workflow_template().to_dict(),
             "offhours-llm-pipeline": llm_pipeline.workflow_template().to_dict()}


def defaults(template: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p.get("value", "") for p in template["spec"]["arguments"]["parameters"]}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_library_template_declares_pods_defaulting_to_one(name: str) -> None:
    assert defaults(TEMPLATES[name])["pods"] == "1"


@given(st.sampled_from(sorted(TEMPLATES)), st.none() | st.integers(1, 8), st.none() | st.integers(1, 8))
def test_a_library_workflow_setting_pods_is_declared_and_its_shape_is_what_its_pods_get(name, pods, gpus):  # type: ignore[no-untyped-def]
    template = TEMPLATES[name]
    own = [{"name": "service", "value": "chat"}]
    own += [] if pods is None else [{"name": "pods", "value": str(pods)}]
    declares_gpus = "gpus" in defaults(template)  # the pipeline's stages have their own (sft-gpus, ...)
    own += [] if gpus is None or not declares_gpus else [{"name": "gpus", "value": str(gpus)}]
    workflow = {"spec": {"workflowTemplateRef": {"name": name}, "arguments": {"parameters": own}},
                # what Argo's controller stores once it has resolved the template (suspended workflows too)
                "status": {"storedWorkflowTemplateSpec": template["spec"]}}
    assert undeclared_arguments(workflow, template) == []
    shape = job_shape(shape_arguments(workflow))
    assert isinstance(shape, Shape)
    template_gpus = int(defaults(template).get("gpus", "1"))
    assert (shape.pods, shape.gpus_per_pod) == (pods or 1, (gpus if declares_gpus else None) or template_gpus)


def test_a_workflow_not_yet_resolved_by_argo_reads_its_own_arguments_only() -> None:
    workflow = {"spec": {"arguments": {"parameters": [{"name": "pods", "value": "2"}, {"name": "gpus", "value": "8"}]}}}
    assert shape_arguments(workflow) == {"pods": "2", "gpus": "8"}
    assert shape_arguments({"spec": {}, "status": {"storedWorkflowTemplateSpec": "not a spec"}}) == {}
