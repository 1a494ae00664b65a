"""Arguments a workflow sets that its WorkflowTemplate does not declare (pure): a typo that would run silently.

`argo submit --from workflowtemplate/T -p sft-gpu=4` creates a Workflow whose `spec.arguments.parameters`
holds `sft-gpu` beside the template's own; Argo v4.0.5 runs it with the template's default `sft-gpus`
and never reads `sft-gpu`. The Workflow object keeps exactly what was submitted, so the mistake is
visible before anything runs: `undeclared_arguments` names each such argument with the declared names
closest to it. It is the check for the gate to make before it admits or adopts a workflow (a refusal
naming them, nothing lent); `offhours submit` makes the same one before it creates anything
(`scripts.cluster.parked`). Everything read here is tenant-written: any shape is read defensively.
"""

from collections.abc import Collection, Mapping
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


def namespaced_template_name(workflow: Mapping[str, Any]) -> str | None:
    """Return the WorkflowTemplate of the workflow's own namespace it runs; None for none or a ClusterWorkflowTemplate.

    A `clusterScope` reference names a ClusterWorkflowTemplate: a namespaced template of the same name
    declares other arguments, so it must not be read for it.
    """
    spec = workflow.get("spec")
    ref = spec.get("workflowTemplateRef") if isinstance(spec, Mapping) else None
    if isinstance(ref, Mapping) and ref.get("clusterScope"):
        return None
    return template_name(workflow)


def declared_arguments(template: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the parameter names a WorkflowTemplate declares in `spec.arguments.parameters`."""
    spec = template.get("spec")
    arguments = spec.get("arguments") if isinstance(spec, Mapping) else None
    return tuple(_names(arguments.get("parameters") if isinstance(arguments, Mapping) else None))


def undeclared_arguments(workflow: Mapping[str, Any], template: Mapping[str, Any]) -> list[str]:
    """Return one line per argument `workflow` sets that `template` does not declare, with its near misses.

    [] when every argument is declared, and for a workflow that runs no template (its arguments are its own).
    """
    if template_name(workflow) is None:
        return []
    return unknown_parameters(submitted_arguments(workflow), declared_arguments(template))


def undeclared_problem(template: str, submitted: Collection[str], declared: Collection[str]) -> str | None:
    """Return why a workflow running `template` with `submitted` argument names may not run, or None if it may."""
    lines = unknown_parameters(submitted, declared)
    if not lines:
        return None
    return (f"its template {template} has " + "; ".join(lines) +
            "; it would run with the defaults: resubmit with the right names")


def refusal(workflow: Mapping[str, Any], template: Mapping[str, Any]) -> str | None:
    """Return the one line a refused admission says (an Event, the waiting reason), or None to admit."""
    name = template_name(workflow)
    if name is None:
        return None
    problem = undeclared_problem(name, submitted_arguments(workflow), declared_arguments(template))
    return None if problem is None else f"not admitted: {problem}"
