"""Validate Argo manifests against the vendored Argo v4.0.5 CRD schemas, unknown fields forbidden."""

import copy
import gzip
import json
from functools import cache
from typing import Any

import jsonschema

from offhours.scripts.inputs.text import package_bytes
from offhours.scripts.names import ARGO_API_VERSION
from offhours.scripts.validate.problems import Problem, json_path

SCHEMA_FILES = {
    "Workflow": "workflows.json.gz",
    "WorkflowTemplate": "workflowtemplates.json.gz",
    "CronWorkflow": "cronworkflows.json.gz",
    "ClusterWorkflowTemplate": "clusterworkflowtemplates.json.gz",
}
"""The Argo kinds that have a vendored CRD schema, and its file under schemas/argo/."""



def _forbid_unknown_fields(node: Any) -> None:
    # What the API server does with field validation Strict: an object schema that lists its
    # properties accepts no others, unless the CRD says to preserve unknown fields.
    if isinstance(node, dict):
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _forbid_unknown_fields(value)
    elif isinstance(node, list):
        for value in node:
            _forbid_unknown_fields(value)


@cache
def strict_schema(kind: str) -> dict[str, Any]:
    """Return the openAPIV3Schema of `kind`'s CRD with unknown fields forbidden."""
    data = package_bytes("offhours.schemas", "argo", SCHEMA_FILES[kind])
    schema = copy.deepcopy(json.loads(gzip.decompress(data))["openAPIV3Schema"])
    _forbid_unknown_fields(schema)
    # metadata is `type: object` in a CRD; the API server checks it, not the CRD.
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


@cache
def validator(kind: str) -> jsonschema.protocols.Validator:
    """Return a compiled validator for `kind`."""
    cls = jsonschema.validators.validator_for({}, default=jsonschema.Draft7Validator)
    return cls(strict_schema(kind))


def _drop_nulls(node: Any) -> Any:
    # The API server prunes null fields before it validates a custom resource.
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


def _schema(error: jsonschema.ValidationError) -> dict[str, Any]:
    return error.schema if isinstance(error.schema, dict) else {}


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(_schema(error).get("properties", {}))
        unknown = sorted(k for k in error.instance if k not in allowed)
        return "unknown field " + ", ".join(repr(k) for k in unknown)
    if error.validator == "anyOf" and _schema(error).get("x-kubernetes-int-or-string"):
        return f"{error.instance!r} is neither an integer nor a string"
    return error.message


def _deepest(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    # An anyOf failure's useful cause is the branch that got furthest into the instance.
    if error.context and not _schema(error).get("x-kubernetes-int-or-string"):
        return _deepest(max(error.context, key=lambda e: len(e.absolute_path)))
    return error


def schema_problems(doc: dict[str, Any], file: str, index: int) -> list[Problem]:
    """Check one Argo document against its kind's CRD schema; return one problem per violation."""
    kind = doc.get("kind")
    if kind not in SCHEMA_FILES:
        return []
    problems = []
    if doc.get("apiVersion") != ARGO_API_VERSION:
        problems.append(Problem(file, index, "apiVersion", f"must be {ARGO_API_VERSION} for {kind}"))
    if not (doc.get("metadata") or {}).get("name") and not (doc.get("metadata") or {}).get("generateName"):
        problems.append(Problem(file, index, "metadata", "needs a name or generateName"))
    for error in validator(kind).iter_errors(_drop_nulls(doc)):
        error = _deepest(error)
        problems.append(Problem(file, index, json_path(list(error.absolute_path)), _message(error)))
    return sorted(set(problems))
