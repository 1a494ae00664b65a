"""The `offhours-llm-pipeline` WorkflowTemplate: preprocess -> pretrain -> sft -> rl -> eval.

Each stage is a `templateRef` to `offhours-steps`, can be skipped with `run-<stage>=false`,
and reads the output of the nearest earlier stage that ran (or the pipeline's `input-uri`).
Eval fans out over the JSON list `eval-suites`, one task per suite, in parallel. Every stage's
output and checkpoint URI is derived from the run id and the stage name, so nothing travels
as an output parameter.
"""

from hera.workflows import WorkflowTemplate

from offhours.scripts.names import PIPELINE_TEMPLATE
from offhours.workflows.compose import Pipeline, Step

STAGES = ("preprocess", "pretrain", "sft", "rl", "eval")

# Per-stage defaults: preprocess is CPU work; eval runs one GPU per suite.
_GPUS = {"preprocess": "0", "pretrain": "8", "sft": "8", "rl": "8", "eval": "1"}
_CPU = {"preprocess": "8", "pretrain": "16", "sft": "16", "rl": "16", "eval": "8"}
_MEMORY = {"preprocess": "32Gi", "pretrain": "128Gi", "sft": "128Gi", "rl": "128Gi", "eval": "64Gi"}


def _expr_param(name: str) -> str:
    return f"workflow.parameters['{name}']"


def _stage_output_expr(stage: str) -> str:
    return f"{_expr_param('output-uri')} + '/' + {_expr_param('run-id')} + '/{stage}'"


def input_uri_expression(stage: str) -> str:
    """Return the Argo expression for a stage's input: the output of the nearest earlier stage that runs."""
    expr = _expr_param("input-uri")
    for earlier in STAGES[: STAGES.index(stage)]:
        expr = f"{_expr_param('run-' + earlier)} == 'true' ? {_stage_output_expr(earlier)} : ({expr})"
    return "{{=" + expr + "}}"


def pipeline() -> Pipeline:
    """Describe the LLM pipeline with the composition API."""
    p = Pipeline(
        PIPELINE_TEMPLATE,
        description=(
            "LLM research pipeline on borrowed inference GPUs: preprocess -> pretrain -> sft -> rl -> eval. "
            "Skip a stage with run-<stage>=false; eval fans out over eval-suites."
        ),
    )
    image = p.add_parameter("image", description="Research image that holds the code of every stage.")
    p.add_parameter("eval-suites", '["default"]', "JSON list of eval suites, evaluated in parallel.",
                    kind="string-list")
    previous: Step | None = None
    for stage in STAGES:
        run = p.add_parameter(f"run-{stage}", "true", f"Run the {stage} stage (true/false).", kind="boolean")
        args: dict[str, str] = {
            "image": image,
            "input_uri": input_uri_expression(stage),
            "command": p.add_parameter(
                f"{stage}-command", f'["{stage}"]', f"JSON list: the {stage} program and its fixed arguments."
            ),
            "args": p.add_parameter(f"{stage}-args", "[]", f"JSON list of extra {stage} arguments."),
            "gpus": p.add_parameter(f"{stage}-gpus", _GPUS[stage], f"GPUs of each {stage} pod."),
            "cpu": p.add_parameter(f"{stage}-cpu", _CPU[stage], f"CPU request of each {stage} pod."),
            "memory": p.add_parameter(f"{stage}-memory", _MEMORY[stage], f"Memory of each {stage} pod."),
        }
        if stage == "eval":
            args["suite"] = "{{item}}"
        previous = p.step(
            stage,
            depends=previous,
            when=f"{run} == true",
            with_param="{{workflow.parameters.eval-suites}}" if stage == "eval" else None,
            **args,  # type: ignore[arg-type]  # str values only; mypy cannot split **kwargs by name
        )
    return p


def workflow_template() -> WorkflowTemplate:
    """Build the `offhours-llm-pipeline` WorkflowTemplate."""
    return pipeline().workflow_template()
