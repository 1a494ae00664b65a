"""Least-privilege RBAC of the gate and the exit hook: one ServiceAccount, namespaced Roles only.

In the serving namespace: scale and annotate only the Deployments the configuration names
(`resourceNames`), read pods (for direct scraping), record events, hold the offhours Lease. In
the workflow namespace: get/list/patch/create workflows, record events, and what Argo's
executor needs to report a step's result. Nothing cluster-wide.
"""

from typing import Any

from offhours.scripts.cluster.base import HOLD_REASON, LEASE_NAME, aggregated_event_name
from offhours.scripts.policy.config import GateConfig
from offhours.steps.contract import GATE_SERVICE_ACCOUNT, LABEL_MANAGED

_META = {"labels": {LABEL_MANAGED: "true"}}


def _role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, **_META}, "rules": rules}


def _binding(name: str, namespace: str, sa_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace, **_META},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": GATE_SERVICE_ACCOUNT, "namespace": sa_namespace}],
    }


def rbac_manifests(config: GateConfig) -> list[dict[str, Any]]:
    """Return the ServiceAccount, Roles and RoleBindings for a gate configuration."""
    deployments = sorted({s.deployment or s.name for s in config.services})
    serving, workflows = config.namespace, config.workflow_namespace
    serving_rules: list[dict[str, Any]] = [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": deployments, "verbs": ["get", "patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": deployments,
         "verbs": ["get", "patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        # The one counted hold Event per Deployment is read and updated in place.
        {"apiGroups": [""], "resources": ["events"], "resourceNames": [aggregated_event_name(d, HOLD_REASON)
                                                                     for d in deployments], "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
         "verbs": ["get", "update"]},
    ]
    workflow_rules: list[dict[str, Any]] = [
        {"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["get", "list", "patch", "create"]},
        {"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    manifests: list[dict[str, Any]] = [{
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": GATE_SERVICE_ACCOUNT, "namespace": workflows, **_META},
    }]
    if serving == workflows:
        name = GATE_SERVICE_ACCOUNT
        manifests += [_role(name, serving, serving_rules + workflow_rules[:2]), _binding(name, serving, workflows)]
    else:
        manifests += [
            _role(f"{GATE_SERVICE_ACCOUNT}-serving", serving, serving_rules),
            _binding(f"{GATE_SERVICE_ACCOUNT}-serving", serving, workflows),
            _role(f"{GATE_SERVICE_ACCOUNT}-workflows", workflows, workflow_rules),
            _binding(f"{GATE_SERVICE_ACCOUNT}-workflows", workflows, workflows),
        ]
    return manifests
