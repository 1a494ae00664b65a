"""Compose new DAG Workflows and WorkflowTemplates from the offhours step templates.

A composed workflow calls the steps of `offhours-steps` by `templateRef`, declares the
parameters every offhours workflow shares (service, replicas, run id, URIs, pool placement),
carries the labels the gate reads, and calls `return-gpus` through `hooks.exit`. Each step's
arguments are checked against the inputs that step template declares when the step is added.

    p = Pipeline("distill-pipeline")
    teacher = p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    p.step("job", name="distill", image="ghcr.io/lab/distill:1", command=["distill"],
           input_from=teacher, gpus=4)
    template = p.workflow_template()
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hera.workflows import DAG, Parameter, Task, Workflow, WorkflowTemplate
from hera.workflows import models as m

from offhours.steps.contract import (
    LABEL_MANAGED,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    RESEARCH_STEP_INPUTS,
    RETURN_GPUS,
    RETURN_GPUS_INPUTS,
    STEPS_TEMPLATE,
    StepInput,
)
from offhours.steps.library import declared_inputs


class CompositionError(ValueError):
    """A step was added with an unknown kind, an unknown argument or a missing required one."""


def _by_name(specs: Sequence[StepInput]) -> dict[str, StepInput]:
    return {s.name: s for s in specs}


_RESEARCH = _by_name(RESEARCH_STEP_INPUTS)

SHARED_PARAMETERS: tuple[StepInput, ...] = (
    StepInput("service", "Inference service (Deployment label offhours.io/service) the GPUs are borrowed from."),
    StepInput("replicas", "How many of the service's replicas the workflow borrows.", "1"),
    StepInput("run-id", _RESEARCH["run-id"].description),
    StepInput("input-uri", "Input of the first step (s3://, gs://, file://); may be empty.", ""),
    StepInput("output-uri", "Base URI of the results: each step writes to <output-uri>/<run-id>/<step>."),
    StepInput("checkpoint-uri", "Base URI of the checkpoints: each step uses <checkpoint-uri>/<run-id>/<step>."),
    _RESEARCH["env"],
    _RESEARCH["node-selector"],
    _RESEARCH["tolerations"],
    _RESEARCH["termination-grace-seconds"],
    _RESEARCH["active-deadline-seconds"],
    _RESEARCH["retry-limit"],
    _RESEARCH["launcher-image"],
    _by_name(RETURN_GPUS_INPUTS)["offhours-image"],
)
"""Workflow parameters every composed workflow declares, in order."""

# Step inputs that default to the workflow parameter of the same name.
_FORWARDED = (
    "run-id",
    "env",
    "node-selector",
    "tolerations",
    "termination-grace-seconds",
    "active-deadline-seconds",
    "retry-limit",
    "launcher-image",
)


def workflow_parameter(name: str) -> str:
    """Return the Argo reference to workflow parameter `name`."""
    return "{{workflow.parameters." + name + "}}"


def step_uri(base: str, step: str, item: str = "") -> str:
    """Return the deterministic URI `<base>/<run-id>/<step>[/<item>]` of a step's result or checkpoints."""
    uri = f"{workflow_parameter(base)}/{workflow_parameter('run-id')}/{step}"
    return f"{uri}/{item}" if item else uri


@dataclass
class Step:
    """A step added to a pipeline: its task name, kind and checked arguments."""

    name: str
    kind: str
    arguments: dict[str, str]
    depends: str | None = None
    when: str | None = None
    with_param: str | None = None

    @property
    def output_uri(self) -> str:
        """The URI this step writes its result to (what a following step reads)."""
        return self.arguments["output-uri"]


def _encode(kind: str, spec: StepInput | None, name: str, value: Any) -> str:
    if spec is None:
        raise CompositionError(f"step kind {kind!r} has no input {name!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        if spec.json is None:
            raise CompositionError(f"input {name!r} of {kind!r} takes a string, not {type(value).__name__}")
        value = json.dumps(value, separators=(",", ":"))
    value = str(value)
    if spec.json and "{{" not in value:
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError as err:
            raise CompositionError(f"input {name!r} of {kind!r} is not valid JSON: {err}") from None
        want = list if spec.json == "list" else dict
        if not isinstance(decoded, want):
            raise CompositionError(f"input {name!r} of {kind!r} must be a JSON {spec.json}")
    return value


@dataclass
class Pipeline:
    """A DAG of offhours steps, rendered as a WorkflowTemplate or a Workflow.

    `parameters` are the workflow parameters of the pipeline's own, beside the shared ones
    (see `add_parameter`).
    """

    name: str
    description: str = ""
    parameters: list[StepInput] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)

    def add_parameter(self, name: str, default: str | None = None, description: str = "") -> str:
        """Declare a workflow parameter of this pipeline and return its reference."""
        if any(spec.name == name for spec in (*SHARED_PARAMETERS, *self.parameters)):
            raise CompositionError(f"workflow parameter {name!r} is declared twice")
        self.parameters.append(StepInput(name, description, default))
        return workflow_parameter(name)

    def step(
        self,
        kind: str,
        name: str | None = None,
        *,
        depends: "Step | Sequence[Step] | str | None" = None,
        input_from: Step | None = None,
        when: str | None = None,
        with_param: str | None = None,
        **arguments: Any,
    ) -> Step:
        """Add a step of `kind` (a template of offhours-steps) and return it.

        Keyword arguments are the step's inputs, with `_` for `-` (`node_selector`); lists and
        dicts are JSON-encoded. `input_from` reads the output of an earlier step and depends on
        it. Unset inputs take the workflow parameter of the same name or the step's default.
        """
        inputs = declared_inputs()
        if kind not in inputs or kind == RETURN_GPUS:
            kinds = ", ".join(k for k in inputs if k != RETURN_GPUS)
            raise CompositionError(f"unknown step kind {kind!r}; known kinds: {kinds}")
        task = name or kind
        if any(s.name == task for s in self.steps):
            raise CompositionError(f"step name {task!r} is used twice in pipeline {self.name!r}")
        declared = _by_name(inputs[kind])
        given = {key.replace("_", "-"): _encode(kind, declared.get(key.replace("_", "-")), key, value)
                 for key, value in arguments.items()}

        item = "{{item}}" if with_param else ""
        resolved: dict[str, str] = {n: workflow_parameter(n) for n in _FORWARDED if n in declared}
        resolved["output-uri"] = step_uri("output-uri", task, item)
        resolved["checkpoint-uri"] = step_uri("checkpoint-uri", task, item)
        resolved["input-uri"] = input_from.output_uri if input_from else workflow_parameter("input-uri")
        resolved.update(given)

        missing = [s.name for s in declared.values() if s.required and s.name not in resolved]
        if missing:
            raise CompositionError(f"step {task!r} ({kind}) is missing required argument(s): {', '.join(missing)}")

        step = Step(task, kind, resolved, _depends(depends, input_from), when, with_param)
        self.steps.append(step)
        return step

    def _arguments(self) -> list[Parameter]:
        params = []
        for spec in (*SHARED_PARAMETERS, *self.parameters):
            description = spec.description or None
            params.append(Parameter(name=spec.name, description=description) if spec.required
                          else Parameter(name=spec.name, value=spec.default, description=description))
        return params

    def _spec(self) -> dict[str, Any]:
        exit_args = [
            m.Parameter(name="workflow-name", value="{{workflow.name}}"),
            m.Parameter(name="status", value="{{workflow.status}}"),
            m.Parameter(name="failures", value="{{workflow.failures}}"),
            m.Parameter(name="service", value=workflow_parameter("service")),
            m.Parameter(name="replicas", value=workflow_parameter("replicas")),
            m.Parameter(name="offhours-image", value=workflow_parameter("offhours-image")),
        ]
        return dict(
            entrypoint="main",
            arguments=self._arguments(),
            labels={LABEL_MANAGED: "true", **self.labels},
            annotations={"workflows.argoproj.io/description": self.description} if self.description else None,
            workflow_metadata=m.WorkflowMetadata(
                labels={LABEL_MANAGED: "true"},
                labels_from={
                    LABEL_SERVICE: m.LabelValueFrom(expression="workflow.parameters.service"),
                    LABEL_REPLICAS: m.LabelValueFrom(expression="workflow.parameters.replicas"),
                    LABEL_RUN_ID: m.LabelValueFrom(expression="workflow.parameters['run-id']"),
                },
            ),
            hooks={
                "exit": m.LifecycleHook(
                    template_ref=m.TemplateRef(name=STEPS_TEMPLATE, template=RETURN_GPUS),
                    arguments=m.Arguments(parameters=exit_args),
                )
            },
        )

    def _add_dag(self) -> None:
        if not self.steps:
            raise CompositionError(f"pipeline {self.name!r} has no steps")
        with DAG(name="main"):
            for step in self.steps:
                Task(
                    name=step.name,
                    template_ref=m.TemplateRef(name=STEPS_TEMPLATE, template=step.kind),
                    arguments=[m.Parameter(name=k, value=v) for k, v in step.arguments.items()],
                    depends=step.depends,
                    when=step.when,
                    with_param=step.with_param,
                )

    def workflow_template(self) -> WorkflowTemplate:
        """Render the pipeline as a WorkflowTemplate named after it."""
        with WorkflowTemplate(name=self.name, **self._spec()) as template:
            self._add_dag()
        return template

    def workflow(self, arguments: Mapping[str, str] | None = None) -> Workflow:
        """Render the pipeline as a Workflow (generateName `<name>-`) with the given parameter values."""
        spec = self._spec()
        if arguments:
            known = {p.name: p for p in spec["arguments"]}
            for key, value in arguments.items():
                if key not in known:
                    raise CompositionError(f"pipeline {self.name!r} has no parameter {key!r}")
                known[key].value = str(value)
        with Workflow(generate_name=f"{self.name}-", **spec) as workflow:
            self._add_dag()
        return workflow


def _depends(depends: "Step | Sequence[Step] | str | None", input_from: Step | None) -> str | None:
    if isinstance(depends, str):
        return depends
    names: list[str] = []
    if isinstance(depends, Step):
        names.append(depends.name)
    elif depends:
        names.extend(d.name for d in depends)
    if input_from and input_from.name not in names:
        names.append(input_from.name)
    return " && ".join(names) or None


def cron_workflow(
    source: "Pipeline | Mapping[str, Any] | str",
    name: str,
    schedules: str | Sequence[str],
    arguments: Mapping[str, Any],
    namespace: str = "default",
    **options: Any,
) -> dict[str, Any]:
    """Return a CronWorkflow that runs `source` on `schedules`, each run parked for the gate.

    `source` is a Pipeline (install its `workflow_template()` too: the runs reference it by
    name), a WorkflowTemplate manifest, or the name of one installed in `namespace` (read with
    the kubeconfig). `arguments` are checked against the template's parameters; `options` are
    those of `offhours.cronworkflows.research.research_cron_workflow` (timezone, priority,
    concurrency, keep, starting_deadline_seconds). Raises ScheduleError naming what is wrong.
    """
    from offhours.cronworkflows.research import installed_template, research_cron_workflow

    if isinstance(source, Pipeline):
        template = source.workflow_template().to_dict()
    elif isinstance(source, str):
        template = installed_template(source, namespace)
    else:
        template = dict(source)
    params = {key: _encode_argument(value) for key, value in arguments.items()}
    return research_cron_workflow(name, template, schedules, params, namespace, **options)


def _encode_argument(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
