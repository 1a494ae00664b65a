"""A server-side dry run of a manifest: what the API server (schemas, defaulting, admission) says of it, writing nothing.

`offhours validate` says "valid" only for a document the API server accepted this way; a document it could
not ask about (no cluster, a kind it does not dry-run, no right to create it there) is reported as checked
offline only, never as valid.
"""

from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster.access import ANY_ANSWER
from offhours.scripts.cluster.errors import failed_call
from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION

DRY_RUN_TIMEOUT = 10.0
# The kinds `validate` checks, by plural; a ClusterWorkflowTemplate has no namespace.
ARGO_PLURALS = {"Workflow": "workflows", "WorkflowTemplate": "workflowtemplates", "CronWorkflow": "cronworkflows",
                "ClusterWorkflowTemplate": "clusterworkflowtemplates"}
ACCEPTED, REFUSED, UNCHECKED = "accepted", "refused", "unchecked"


@dataclass(frozen=True)
class DryRun:
    """The API server's answer to one document: accepted, refused (it would not create it), or unchecked (why not)."""

    verdict: str
    reason: str = ""


def dry_run_create(api_client: Any, doc: dict[str, Any], namespace: str) -> DryRun:
    """Ask the API server to create `doc` in `namespace` with dryRun=All (nothing is stored)."""
    kind = str(doc.get("kind") or "")
    plural = ARGO_PLURALS.get(kind)
    if plural is None or doc.get("apiVersion") != f"{ARGO_GROUP}/{ARGO_VERSION}":
        return DryRun(UNCHECKED, f"{kind or 'a document without a kind'} is not dry-run (only Argo's kinds are)")
    namespace = str((doc.get("metadata") or {}).get("namespace") or namespace)
    if kind == "ClusterWorkflowTemplate":
        path = f"/apis/{ARGO_GROUP}/{ARGO_VERSION}/{plural}"
    else:
        path = f"/apis/{ARGO_GROUP}/{ARGO_VERSION}/namespaces/{namespace}/{plural}"
    try:
        api_client.call_api(path, "POST", query_params=[("dryRun", "All")], body=doc, response_types_map=ANY_ANSWER,
                            auth_settings=["BearerToken"], header_params={"Content-Type": "application/json",
                                                                          "Accept": "application/json"},
                            _return_http_data_only=True, _request_timeout=DRY_RUN_TIMEOUT)
    except ApiException as err:
        message = _message(err)
        if err.status in (400, 422) or (err.status == 403 and "denied" in message.lower()):
            return DryRun(REFUSED, message)  # invalid, or refused by an admission policy or webhook
        if err.status == 409:
            return DryRun(UNCHECKED, f"one so named exists in namespace {namespace}: the dry run cannot create it")
        if err.status in (401, 403):
            return DryRun(UNCHECKED, f"you may not create {plural} in namespace {namespace}: the API server did not "
                          "check it")
        return DryRun(UNCHECKED, f"the API server answered HTTP {err.status} {err.reason}")
    except Exception as err:  # noqa: BLE001 - unreachable mid-way: not checked, never "valid"
        return DryRun(UNCHECKED, failed_call("the dry run", err))
    return DryRun(ACCEPTED)


def _message(err: ApiException) -> str:
    import json

    try:
        body = json.loads(err.body or "{}")
    except (TypeError, ValueError):
        body = {}
    return str(body.get("message") or err.reason or f"HTTP {err.status}")[:2000] if isinstance(body, dict) else \
        str(err.reason)
