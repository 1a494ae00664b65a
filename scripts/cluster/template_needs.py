"""What offhours needs of a WorkflowTemplate before it builds a job from it: one refusal naming all that is missing.

`offhours submit`, `offhours schedule` and the console's request form and resubmit read a template a tenant
wrote (anyone who may create WorkflowTemplates in the namespace). Before anything else reads it, this check
says whether it has the shape offhours builds on, so a template lacking a part is one clear refusal naming
the template and every missing part, never a KeyError, a traceback or an HTTP 500 further on:

- `metadata.name`, and `spec` a mapping;
- `spec.arguments.parameters`: a list of parameters, each with a name, a default that is text (or none),
  among them `service`, `replicas` and `run-id` (the gate reads them as the workflow's labels);
- the exit hook (`spec.hooks.exit`, or `spec.onExit`): what gives the GPUs back when the job ends;
- the `offhours.io/managed: "true"` label in `spec.workflowMetadata.labels`, which marks its runs as offhours'.
"""

from collections.abc import Mapping
from typing import Any

from offhours.scripts.names import LABEL_MANAGED

NEEDED_PARAMETERS = ("service", "replicas", "run-id")
PROBLEMS_NAMED = 20  # a refusal names this many missing parts, then how many more (a tenant's template can have many)
SCALARS = (str, int, float, bool)  # Argo's parameter values are text; YAML may read a number or a boolean


def template_name(template: Any) -> str:
    """Return the template's name as a refusal shows it ('a WorkflowTemplate without a name' when it has none)."""
    meta = template.get("metadata") if isinstance(template, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"WorkflowTemplate {name}" if isinstance(name, str) and name else "a WorkflowTemplate without a name"


def template_problems(template: Any) -> list[str]:
    """Return every part offhours needs that `template` lacks; [] when it can build a job from it."""
    if not isinstance(template, Mapping):
        return ["it is not a mapping"]
    problems: list[str] = []
    meta = template.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        problems.append("metadata.name")
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return [*problems, "spec (a mapping)"]
    problems += _parameter_problems(spec.get("arguments"))
    hooks = spec.get("hooks")
    exit_hook = isinstance(hooks, Mapping) and isinstance(hooks.get("exit"), Mapping)
    if not exit_hook and not (isinstance(spec.get("onExit"), str) and spec.get("onExit")):
        problems.append("the exit hook (spec.hooks.exit or spec.onExit) that gives the GPUs back when the job ends")
    metadata = spec.get("workflowMetadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping) or labels.get(LABEL_MANAGED) != "true":
        problems.append(f'the label {LABEL_MANAGED}: "true" in spec.workflowMetadata.labels')
    return problems


def template_refusal(template: Any) -> str | None:
    """Return the one line refusing `template` (its name and every missing part), or None when offhours can use it."""
    problems = template_problems(template)
    if not problems:
        return None
    more = f"; and {len(problems) - PROBLEMS_NAMED} more" if len(problems) > PROBLEMS_NAMED else ""
    return (f"{template_name(template)[:300]} cannot run as an offhours job: it lacks "
            f"{'; '.join(p[:200] for p in problems[:PROBLEMS_NAMED])}{more}. Nothing was created")


def _parameter_problems(arguments: Any) -> list[str]:
    params = arguments.get("parameters") if isinstance(arguments, Mapping) else None
    if not isinstance(params, list):
        return [f"spec.arguments.parameters (a list declaring {', '.join(NEEDED_PARAMETERS)})"]
    problems: list[str] = []
    names: set[str] = set()
    for index, param in enumerate(params):
        name = param.get("name") if isinstance(param, Mapping) else None
        if not isinstance(name, str) or not name:
            problems.append(f"a name for spec.arguments.parameters[{index}]")
            continue
        names.add(name)
        value = param.get("value")
        if value is not None and (not isinstance(value, SCALARS)):
            problems.append(f"a text default for parameter {name} (it is a {type(value).__name__})")
    missing = [n for n in NEEDED_PARAMETERS if n not in names]
    if missing:
        problems.append(f"the parameter(s) {', '.join(missing)} in spec.arguments.parameters")
    return problems
