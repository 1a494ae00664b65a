"""Arguments a workflow sets that its WorkflowTemplate does not declare (pure): a typo that would run silently.

`argo submit --from workflowtemplate/T -p sft-gpu=4` creates a Workflow whose `spec.arguments.parameters`
holds `sft-gpu` beside the template's own; Argo v4.0.5 runs it with the template's default `sft-gpus`
and never reads `sft-gpu`. The Workflow object keeps exactly what was submitted, so the mistake is
visible before anything runs: `undeclared_arguments` names each such argument with the declared names
closest to it. It is the check for the gate to make before it admits or adopts a workflow (a refusal
naming them, nothing lent); `offhours submit` makes the same one before it creates anything
(`scripts.cluster.parked`). Everything read here is tenant-written: any shape is read defensively.
"""

from collections.abc import Mapping
from typing import Any

from offhours.scripts.runtime.parameters import unknown_parameters


def _names(parameters: Any) -> list[str]:
    """Return the `name` of each parameter of an Argo `arguments.parameters` list, skipping what is not one."""
    if not isinstance(parameters, list):
        return []
    return [p["name"] for p in parameters if isinstance(p, Mapping) and isinstance(p.get("name"), str) and p["name"]]


def submitted_arguments(workflow: Mapping[str, Any]) -> list[str]:
    """Return the parameter names a Workflow sets in `spec.arguments.parameters`."""
    spec = workflow.get("spec")
    arguments = spec.get("arguments") if isinstance(spec, Mapping) else None
    return _names(arguments.get("parameters") if isinstance(arguments, Mapping) else None)


def template_name(workflow: Mapping[str, Any]) -> str | None:
    """Return the WorkflowTemplate a Workflow runs (`spec.workflowTemplateRef.name`); None if it runs none."""
    spec = workflow.get("spec")
    ref = spec.get("workflowTemplateRef") if isinstance(spec, Mapping) else None
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) and name else None


def undeclared_arguments(workflow: Mapping[str, Any], template: Mapping[str, Any]) -> list[str]:
    """Return one line per argument `workflow` sets that `template` does not declare, with its near misses.

    [] when every argument is declared, and for a workflow that runs no template (its arguments are its own).
    """
    if template_name(workflow) is None:
        return []
    spec = template.get("spec")
    arguments = spec.get("arguments") if isinstance(spec, Mapping) else None
    declared = _names(arguments.get("parameters") if isinstance(arguments, Mapping) else None)
    return unknown_parameters(submitted_arguments(workflow), declared)


def refusal(workflow: Mapping[str, Any], template: Mapping[str, Any]) -> str | None:
    """Return the one line a refused admission says (an Event, the waiting reason), or None to admit."""
    lines = undeclared_arguments(workflow, template)
    if not lines:
        return None
    return (f"not admitted: its template {template_name(workflow)} has " + "; ".join(lines) +
            "; it would run with the defaults: resubmit with the right names")
