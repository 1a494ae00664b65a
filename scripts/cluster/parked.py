"""`offhours submit`: create a research workflow from an offhours template, parked for the gate.

Parked means created with `spec.suspend: true` and the labels the gate reads (service, replicas,
run id, state); the gate resumes it when the service can lend that many replicas. Parameters are
checked before anything is created: an unknown or missing one is refused, and every value is
checked against its kind in the template's own parameter schema (the schema its
`check-parameters` step checks in the cluster), and the service against the gate configuration
when one is given. The workflow sets only the template, the parameter values and `suspend`: no
image, ServiceAccount or pod-spec field can come from a submission.
"""

import re
from collections.abc import Collection
from typing import Any

from offhours.scripts.cluster.template_needs import template_refusal
from offhours.scripts.cluster.workflow import MAX_PRIORITY, MIN_PRIORITY
from offhours.scripts.names import (
    ANNOTATION_CANCELLED_AT,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROVENANCE,
    ARGO_GROUP,
    ARGO_VERSION,
    CHECK_PARAMETERS,
    LABEL_MANAGED,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
    STATE_PARKED,
)
from offhours.scripts.runtime.parameters import SchemaError, check_values, parse_schema, unknown_parameters
from offhours.scripts.runtime.provenance import ProvenanceError, build, encode

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


class SubmitError(ValueError):
    """The submission is invalid; names the parameter."""


def declared_arguments(template: dict[str, Any]) -> dict[str, str | None]:
    """Return a WorkflowTemplate's workflow parameters and their defaults (None: required)."""
    params = ((template.get("spec") or {}).get("arguments") or {}).get("parameters") or []
    return {p["name"]: p.get("value") for p in params}


def parameter_schema(template: dict[str, Any]) -> dict[str, str]:
    """Return a WorkflowTemplate's parameter schema (name -> kind), read from its `check-parameters` task.

    A template without that task (not composed by offhours) has an empty schema.
    """
    for tmpl in (template.get("spec") or {}).get("templates") or []:
        for task in (tmpl.get("dag") or {}).get("tasks") or []:
            if (task.get("templateRef") or {}).get("template") != CHECK_PARAMETERS:
                continue
            args = {p.get("name"): p.get("value") for p in (task.get("arguments") or {}).get("parameters") or []}
            try:
                return parse_schema(str(args.get("schema")))
            except SchemaError as err:
                raise SubmitError(f"{template['metadata']['name']}: {err}") from None
    return {}


def parked_workflow(template: dict[str, Any], params: dict[str, str], namespace: str, priority: int = 0,
                    services: Collection[str] | None = None) -> dict[str, Any]:
    """Build the parked Workflow that runs `template` with `params`.

    With `services` (those of the gate configuration), the `service` parameter must name one. A template
    lacking what offhours needs of it is one SubmitError naming it and every missing part (template_needs.py).
    """
    refusal = template_refusal(template)
    if refusal is not None:
        raise SubmitError(refusal)
    name = template["metadata"]["name"]
    declared = declared_arguments(template)
    # Every problem is found before one is reported: a person fixes them all in one go.
    problems = [f"{name} has {line}" for line in unknown_parameters(params, declared)]
    missing = sorted(k for k, v in declared.items() if v is None and k not in params)
    problems += [f"{name} needs -p {m}=..." for m in missing]
    values = {k: (params[k] if k in params else v) for k, v in declared.items()}
    # The two values the gate reads from labels first (whatever the template), then every value by its kind.
    replicas = str(values.get("replicas") or "1")
    if not (replicas.isascii() and replicas.isdigit()) or int(replicas) < 1:  # '²'.isdigit(), int('²') raises
        problems.append(f"replicas must be a whole number >= 1, got {replicas!r}")
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        problems.append(f"priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}, got {priority!r}")
    run_id = str(values.get("run-id") or "")
    if "run-id" not in missing and (not _NAME.fullmatch(run_id) or len(run_id) > 50):
        problems.append(f"run-id must be a DNS label of at most 50 characters, got {run_id!r}")
    flagged = {"replicas", "run-id"} & {p.split(" ", 1)[0] for p in problems}  # named once, not again by their kind
    checked = {k: v for k, v in values.items() if v is not None and k not in flagged}
    schema = parameter_schema(template)
    problems += check_values(schema, checked, services)
    if not problems:
        try:  # recorded as it is submitted: what every copy and every rerun of the run runs with
            provenance = encode(build(run_id, template, {k: str(v) for k, v in values.items()}, schema, _version()))
        except ProvenanceError as err:
            problems.append(str(err))
    if problems:
        raise SubmitError(problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems))
    return {
        "apiVersion": f"{ARGO_GROUP}/{ARGO_VERSION}",
        "kind": "Workflow",
        "metadata": {
            "generateName": f"{run_id}-",
            "namespace": namespace,
            "labels": {LABEL_SERVICE: str(values["service"]), LABEL_REPLICAS: replicas,
                       LABEL_RUN_ID: run_id, LABEL_STATE: STATE_PARKED, LABEL_MANAGED: "true"},
            "annotations": {ANNOTATION_PRIORITY: str(priority), ANNOTATION_PROVENANCE: provenance},
        },
        "spec": {
            "workflowTemplateRef": {"name": name},
            "arguments": {"parameters": [{"name": k, "value": v} for k, v in params.items()]},
            "suspend": True,
        },
    }


def _version() -> str:
    """Return offhours' version as installed (recorded in a run's provenance)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("offhours")
    except PackageNotFoundError:
        return "unknown"


def misplaced_namespace(where: str, namespace: str, admits_from: str | None, said: str, verb: str) -> str | None:
    """Why no workflow may be created in `namespace` for the gate: it admits only from `admits_from`; else None.

    `admits_from` is the gate configuration's workflowNamespace (None: no configuration read, nothing checked),
    `said` the configuration that says so, `where` the namespace as the person chose it, `verb` the offhours
    command whose `-n` fixes it. Parked anywhere else, a job waits for ever: `offhours submit`, `offhours schedule`
    and the console's request form refuse it with these words, before anything is created.
    """
    if admits_from is None or namespace == admits_from:
        return None
    return (f"{where} is not where the gate admits jobs from: {said} has workflowNamespace {admits_from}; "
            f"run offhours {verb} with -n {admits_from}. Nothing was created")


def stop_patch(now: str) -> dict[str, Any]:
    """Return the patch that stops a workflow gracefully at `now` (exit handlers run), parked or running.

    Argo v4.0.5 does not act on a suspended (parked) workflow's shutdown: the same patch unsuspends it.
    """
    return {"metadata": {"annotations": {ANNOTATION_CANCELLED_AT: now}}, "spec": {"shutdown": "Stop", "suspend": None}}


def parse_params(pairs: list[str]) -> dict[str, str]:
    """Parse `-p name=value` pairs; every malformed pair, and every name given two values, named in one SubmitError."""
    out: dict[str, str] = {}
    problems: list[str] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            problems.append(f"-p {pair!r}: expected name=value")
        elif key in out and out[key] != value:
            problems.append(f"-p {key} given twice ({out[key]!r}, then {value!r}): say which one")
        else:
            out[key] = value
    if problems:
        raise SubmitError(problems[0] if len(problems) == 1 else f"{len(problems)} problems: " + "; ".join(problems))
    return out
