"""Compose new DAG Workflows and WorkflowTemplates from the offhours step templates.

A composed workflow calls the steps of `offhours-steps` by `templateRef`, declares the
parameters every offhours workflow shares (service, replicas, run id, URIs, pool placement),
carries the labels the gate reads, and calls `return-gpus` through `hooks.exit`. Each step's
arguments are checked against the inputs that step template declares when the step is added.
Every parameter has a kind (integer, quantity, JSON list...): its first task, `check-parameters`,
checks every value in the cluster before any step runs, and `offhours submit` checks them before
the workflow is created. Research pods run as `offhours-research`.

    p = Pipeline("distill-pipeline")
    teacher = p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    p.step("job", name="distill", image="ghcr.io/lab/distill:1", command=["distill"],
           input_from=teacher, gpus=4)
    template = p.workflow_template()
"""

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hera.workflows import DAG, Parameter, Task, Workflow, WorkflowTemplate
from hera.workflows import models as m

from offhours.scripts.names import (
    CHECK_PARAMETERS,
    LABEL_MANAGED,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    RESEARCH_SERVICE_ACCOUNT,
    RETURN_GPUS,
    STEPS_TEMPLATE,
)
from offhours.scripts.runtime.parameters import KINDS, value_problem
from offhours.steps.contract import RESEARCH_STEP_INPUTS, StepInput
from offhours.steps.library import declared_inputs


class CompositionError(ValueError):
    """A step was added with an unknown kind, an unknown argument or a missing required one."""


def _by_name(specs: Sequence[StepInput]) -> dict[str, StepInput]:
    return {s.name: s for s in specs}


_RESEARCH = _by_name(RESEARCH_STEP_INPUTS)

SHARED_PARAMETERS: tuple[StepInput, ...] = (
    StepInput("service", "Inference service (Deployment label offhours.io/service) the GPUs are borrowed from.",
              kind="service"),
    StepInput("replicas", "How many of the service's replicas the workflow borrows.", "1", kind="positive-integer"),
    StepInput("run-id", _RESEARCH["run-id"].description, kind="run-id"),
    StepInput("input-uri", "Input of the first step (s3://, gs://, file://); may be empty.", "", kind="optional-uri"),
    StepInput("output-uri", "Base URI of the results: each step writes to <output-uri>/<run-id>/<step>.", kind="uri"),
    StepInput("checkpoint-uri", "Base URI of the checkpoints (S3 or file): each step uses "
              "<checkpoint-uri>/<run-id>/<step>.", kind="checkpoint-uri"),
    _RESEARCH["env"],
    _RESEARCH["node-selector"],
    _RESEARCH["tolerations"],
    _RESEARCH["termination-grace-seconds"],
    _RESEARCH["active-deadline-seconds"],
    _RESEARCH["retry-limit"],
    # Read by the gate only (policy/placement.job_shape): the library's steps launch one pod each, so a
    # library workflow keeps 1; a workflow of several pods at once declares it to be admitted as one gang.
    StepInput("pods", "Pods the job runs at once, each with its step's gpus: the gate admits it only when all fit "
              "on the nodes serving frees (a gang). The library's steps run one pod each: leave it at 1 for them.",
              "1", kind="positive-integer"),
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
    problem = value_problem(spec.kind, value) if spec.kind and "{{" not in value else None
    if problem:
        raise CompositionError(f"input {name!r} of {kind!r}: {value!r} {problem}")
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

    def add_parameter(self, name: str, default: str | None = None, description: str = "",
                      kind: str | None = None) -> str:
        """Declare a workflow parameter of this pipeline and return its reference.

        `kind` (see `offhours.scripts.runtime.parameters.KINDS`) is what its values must be; left
        out, the parameter takes the kind of the first step input it is passed to, else "text".
        """
        if any(spec.name == name for spec in (*SHARED_PARAMETERS, *self.parameters)):
            raise CompositionError(f"workflow parameter {name!r} is declared twice")
        if kind is not None and kind not in KINDS:
            raise CompositionError(f"workflow parameter {name!r}: unknown kind {kind!r}; known: {', '.join(KINDS)}")
        self.parameters.append(StepInput(name, description, default, kind=kind))
        return workflow_parameter(name)

    def _adopt_kinds(self, declared: dict[str, StepInput], given: dict[str, str]) -> None:
        # A parameter passed as a whole to a typed step input is checked as that input.
        for i, param in enumerate(self.parameters):
            for input_name, value in given.items():
                spec = declared.get(input_name)
                if param.kind is None and spec is not None and spec.kind and value == workflow_parameter(param.name):
                    self.parameters[i] = dataclasses.replace(param, kind=spec.kind)
                    break

    def parameter_schema(self) -> dict[str, str]:
        """Return each workflow parameter of the pipeline and its kind, in declaration order."""
        return {spec.name: spec.kind or "text" for spec in (*SHARED_PARAMETERS, *self.parameters)}

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
        internal = (RETURN_GPUS, CHECK_PARAMETERS)
        if kind not in inputs or kind in internal:
            kinds = ", ".join(k for k in inputs if k not in internal)
            raise CompositionError(f"unknown step kind {kind!r}; known kinds: {kinds}")
        task = name or kind
        if task == CHECK_PARAMETERS:
            raise CompositionError(f"step name {task!r} is reserved for the parameter check every pipeline runs first")
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

        self._adopt_kinds(declared, given)
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
        return dict(
            entrypoint="main",
            arguments=self._arguments(),
            service_account_name=RESEARCH_SERVICE_ACCOUNT,
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
                # No arguments: the exit hook reads the workflow's name, namespace and status itself.
                "exit": m.LifecycleHook(template_ref=m.TemplateRef(name=STEPS_TEMPLATE, template=RETURN_GPUS))
            },
        )

    def _add_dag(self) -> None:
        if not self.steps:
            raise CompositionError(f"pipeline {self.name!r} has no steps")
        with DAG(name="main"):
            schema = self.parameter_schema()
            Task(
                name=CHECK_PARAMETERS,
                template_ref=m.TemplateRef(name=STEPS_TEMPLATE, template=CHECK_PARAMETERS),
                arguments=[m.Parameter(name="schema", value=json.dumps(schema, separators=(",", ":"))),
                           m.Parameter(name="values", value=values_expression(list(schema)))],
            )
            for step in self.steps:
                Task(
                    name=step.name,
                    template_ref=m.TemplateRef(name=STEPS_TEMPLATE, template=step.kind),
                    arguments=[m.Parameter(name=k, value=v) for k, v in step.arguments.items()],
                    # Steps with no other dependency wait for the parameter check; the rest follow them.
                    depends=step.depends or CHECK_PARAMETERS,
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


def values_expression(names: Sequence[str]) -> str:
    """Return the Argo expression of a JSON object of the named workflow parameters' values.

    `toJson` serialises the values, so quotes or braces in a value stay inside its string.
    """
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise CompositionError(f"workflow parameter {name!r}: names are letters, digits, '-' and '_'")
    pairs = ", ".join(f"'{n}': workflow.parameters['{n}']" for n in names)
    return "{{=toJson({" + pairs + "})}}"


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
    those of `offhours.cronworkflows.research_schedule.research_cron_workflow` (timezone, priority,
    concurrency, keep, starting_deadline_seconds). Raises ScheduleError naming what is wrong.
    """
    from offhours.cronworkflows.research_schedule import installed_template, research_cron_workflow

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
