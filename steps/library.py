"""The `offhours-steps` WorkflowTemplate: every step template, the parameter check and the `return-gpus` exit template."""

from functools import cache
from types import ModuleType

from hera.workflows import WorkflowTemplate

from offhours.scripts.names import LABEL_MANAGED, OFFHOURS_IMAGE, STEPS_TEMPLATE
from offhours.steps import check_parameters, job, preprocess, pretrain, return_gpus, rl, sft
from offhours.steps import eval as eval_step
from offhours.steps.contract import CHECK_PARAMETERS_INPUTS, RESEARCH_STEP_INPUTS, StepInput

STEP_MODULES: dict[str, ModuleType] = {
    "preprocess": preprocess,
    "pretrain": pretrain,
    "sft": sft,
    "rl": rl,
    "eval": eval_step,
    "job": job,
}
"""Each research step kind and the module that builds its template."""


def steps_workflow_template(image: str = OFFHOURS_IMAGE) -> WorkflowTemplate:
    """Build the `offhours-steps` WorkflowTemplate that every offhours workflow refers to.

    `image` is the offhours image of the launcher, the parameter check and the exit hook.
    """
    with WorkflowTemplate(
        name=STEPS_TEMPLATE,
        labels={LABEL_MANAGED: "true"},
        annotations={
            "workflows.argoproj.io/description": (
                "offhours step library: preprocess, pretrain, sft, rl, eval, a generic job, "
                "check-parameters and the return-gpus exit template. Call them by templateRef."
            )
        },
    ) as template:
        for module in STEP_MODULES.values():
            module.template(image)
        check_parameters.template(image)
        return_gpus.template(image)
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
    known = {s.name: s for s in (*RESEARCH_STEP_INPUTS, *CHECK_PARAMETERS_INPUTS)}
    kind = known[param["name"]].kind if param["name"] in known else None
    return StepInput(param["name"], param.get("description", ""), param.get("default"), kind=kind)
