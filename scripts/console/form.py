"""The request form of a WorkflowTemplate: its fields from the template, and the checks of `offhours submit`.

Fields come from the template's workflow parameters (name, description, default) and its parameter
schema (the kinds its `check-parameters` step checks); a form value reaches the workflow only for a
declared parameter. The check is the submit's own (cluster/parked.py: unknown and missing
parameters, replicas, run id, priority, every value by its kind), run before anything is created;
each problem the kinds find is placed next to its field, and whatever else `parked_workflow`
refuses is shown above the form, worded as `offhours submit` words it.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from offhours.scripts.cluster.parked import SubmitError, declared_arguments, parameter_schema, parked_workflow
from offhours.scripts.runtime.parameters import problems_by_name

FIELD_PREFIX = "param:"  # form names of parameters: never one of the form's own fields, whatever a template names
HOURS_FIELD, CHECKPOINT_FIELD, PRIORITY_FIELD = "estimate-hours", "estimate-checkpoint-minutes", "priority"
MAX_VALUE_BYTES = 65536  # one parameter value from a form; Argo keeps the whole workflow in one etcd object
KIND_HINTS = {
    "integer": "whole number ≥ 0", "positive-integer": "whole number ≥ 1", "quantity": "quantity, e.g. 8, 500m, 64Gi",
    "command": "JSON list of strings (the program first)", "string-list": "JSON list of strings",
    "string-map": "JSON object of strings", "object-list": "JSON list of objects", "uri": "s3://, gs:// or file:// URI",
    "checkpoint-uri": "s3:// or file:// URI of the checkpoints", "env": "JSON object: environment variables",
    "optional-uri": "URI, or empty", "boolean": "true or false", "image": "container image reference",
    "run-id": "DNS label, at most 50 characters", "service": "a service of the gate configuration", "text": "text",
}
LONG_KINDS = ("command", "string-list", "string-map", "object-list", "env")


@dataclass(frozen=True)
class Field:
    """One parameter's input on the form."""

    name: str
    kind: str
    description: str
    default: str | None  # None: required
    value: str
    problem: str | None = None

    @property
    def form_name(self) -> str:
        """The input's name in the form."""
        return FIELD_PREFIX + self.name

    @property
    def hint(self) -> str:
        """What the kind asks for, in words."""
        return KIND_HINTS.get(self.kind, self.kind)

    @property
    def long(self) -> bool:
        """Whether the value is JSON worth a text area."""
        return self.kind in LONG_KINDS


def descriptions(template: Mapping[str, Any]) -> dict[str, str]:
    """Return each workflow parameter's description."""
    params = ((template.get("spec") or {}).get("arguments") or {}).get("parameters") or []
    return {str(p.get("name")): str(p.get("description") or "") for p in params if isinstance(p, dict)}


def fields_of(template: dict[str, Any], values: Mapping[str, str] | None = None,
              problems: Mapping[str, str] | None = None) -> list[Field]:
    """Return the form's fields, in the template's order, holding `values` (else the defaults) and `problems`."""
    schema = parameter_schema(template)
    described = descriptions(template)
    values, problems = values or {}, problems or {}
    return [Field(name, schema.get(name, "text"), described.get(name, ""), default,
                  values.get(name, default if default is not None else ""), problems.get(name))
            for name, default in declared_arguments(template).items()]


def submitted_values(template: dict[str, Any], form: Mapping[str, str]) -> dict[str, str]:
    """Return every declared parameter's value as the form sent it (the default where the form sent none)."""
    out = {}
    for name, default in declared_arguments(template).items():
        if FIELD_PREFIX + name in form:
            out[name] = str(form[FIELD_PREFIX + name])
        elif default is not None:
            out[name] = default
    return out


def given(template: dict[str, Any], values: Mapping[str, str]) -> dict[str, str]:
    """Return the values a person set: those that differ from the default (what `offhours submit -p` would pass)."""
    declared = declared_arguments(template)
    return {k: v for k, v in values.items() if k in declared and (declared[k] is None or v != declared[k])}


def _lines(message: str) -> list[str]:
    """Return the problems of a submit's message (one, or `N problems: a; b; ...`)."""
    head, sep, rest = message.partition(" problems: ")
    return rest.split("; ") if sep and head.isdigit() else [message]


@dataclass(frozen=True)
class Checked:
    """A request after the submit's checks: the workflow to create, else the problems by field and above the form."""

    body: dict[str, Any] | None
    problems: dict[str, str]
    general: str | None


def check_request(template: dict[str, Any], values: Mapping[str, str], namespace: str, priority: int,
                  services: Collection[str] | None) -> Checked:
    """Run `offhours submit`'s checks on a form's values; nothing is created here."""
    too_long = {k: f"is longer than {MAX_VALUE_BYTES // 1024} KiB" for k, v in values.items()
                if len(v.encode()) > MAX_VALUE_BYTES}
    if too_long:
        return Checked(None, too_long, None)
    try:
        schema = parameter_schema(template)
    except SubmitError as err:
        return Checked(None, {}, str(err))
    problems = problems_by_name(schema, values, services)
    try:
        body = parked_workflow(template, given(template, values), namespace, priority, services)
    except SubmitError as err:
        message = str(err)
        declared = declared_arguments(template)
        # A problem parked_workflow names by a parameter goes next to it, unless the kinds already placed one.
        for name in declared:
            if message.startswith((f"{name} ", f"parameter {name}=")) and name not in problems:
                problems[name] = message
                return Checked(None, problems, None)
        # Above the form only what no field shows already (a parameter's problem once, at its field).
        if problems and all(any(line.startswith((f"{name} ", f"parameter {name}=")) for name in problems)
                            for line in _lines(message)):
            return Checked(None, problems, None)
        return Checked(None, problems, message)
    if problems:  # the same check: never reached, but a field problem always stops the request
        return Checked(None, problems, None)
    return Checked(body, {}, None)
