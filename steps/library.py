"""The `offhours-steps` WorkflowTemplate: every step template plus the `return-gpus` exit template."""

from functools import cache
from types import ModuleType

from hera.workflows import WorkflowTemplate

from offhours.steps import eval as eval_step
from offhours.steps import job, preprocess, pretrain, return_gpus, rl, sft
from offhours.steps.contract import (
    LABEL_MANAGED,
    RESEARCH_STEP_INPUTS,
    RETURN_GPUS_INPUTS,
    STEPS_TEMPLATE,
    StepInput,
)

STEP_MODULES: dict[str, ModuleType] = {
    "preprocess": preprocess,
    "pretrain": pretrain,
    "sft": sft,
    "rl": rl,
    "eval": eval_step,
    "job": job,
}
"""Each research step kind and the module that builds its template."""


def steps_workflow_template() -> WorkflowTemplate:
    """Build the `offhours-steps` WorkflowTemplate that every offhours workflow refers to."""
    with WorkflowTemplate(
        name=STEPS_TEMPLATE,
        labels={LABEL_MANAGED: "true"},
        annotations={
            "workflows.argoproj.io/description": (
                "offhours step library: preprocess, pretrain, sft, rl, eval, a generic job, "
                "and the return-gpus exit template. Call them by templateRef."
            )
        },
    ) as template:
        for module in STEP_MODULES.values():
            module.template()
        return_gpus.template()
    return template


@cache
def declared_inputs() -> dict[str, tuple[StepInput, ...]]:
    """Return each template of `offhours-steps` with the inputs it declares, read from the built template."""
    built = steps_workflow_template().to_dict()
    declared: dict[str, tuple[StepInput, ...]] = {}
    for tmpl in built["spec"]["templates"]:
        params = tmpl.get("inputs", {}).get("parameters", [])
        declared[tmpl["name"]] = tuple(_spec_of(p) for p in params)
    return declared


def _spec_of(param: dict[str, str]) -> StepInput:
    known = {s.name: s for s in (*RESEARCH_STEP_INPUTS, *RETURN_GPUS_INPUTS)}
    json_type = known[param["name"]].json if param["name"] in known else None
    return StepInput(param["name"], param.get("description", ""), param.get("default"), json=json_type)
