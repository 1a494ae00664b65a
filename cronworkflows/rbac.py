"""Least-privilege RBAC of offhours: three ServiceAccounts, namespaced Roles only, nothing cluster-wide.

- `offhours-gate` lives in the SERVING namespace, beside its CronWorkflow, so no research workflow
  (created in the research namespace) can run as it. In serving it scales the configured
  Deployments through the scale subresource only (never `patch deployments`, which would let it
  rewrite a pod template), caps their HPAs and KEDA ScaledObjects, reads pods for direct
  scraping, marks the pods a lower removes (pod-deletion-cost), keeps its state in its own
  ConfigMaps, records events and holds the Lease. In the
  research namespace it admits, parks, stops and deletes workflows and records events.
- `offhours-exit-hook` (research namespace) marks its own workflow: workflows get/patch, and
  what Argo's executor needs. Nothing on serving.
- `offhours-research` (research namespace) runs research pods and the parameter check: only
  what Argo's executor needs (workflowtaskresults). Nothing on serving.
"""

from typing import Any

from offhours.scripts.names import (
    ARGO_GROUP,
    EVENT_GATE_HOLD,
    EXIT_HOOK_SERVICE_ACCOUNT,
    GATE_SERVICE_ACCOUNT,
    GPU_QUOTA,
    KEDA_GROUP,
    LABEL_MANAGED,
    LEASE_NAME,
    LEDGER_CONFIGMAP,
    RESEARCH_SERVICE_ACCOUNT,
    aggregated_event_name,
    state_configmap_name,
)
from offhours.scripts.policy.config import ConfigError, GateConfig
from offhours.scripts.policy.target import target_rules

_META = {"labels": {LABEL_MANAGED: "true"}}

_EXECUTOR_RULE: dict[str, Any] = {"apiGroups": [ARGO_GROUP], "resources": ["workflowtaskresults"],
                                  "verbs": ["create", "patch"]}


def _service_account(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace, **_META}}


def _role(name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, **_META}, "rules": rules}


def _binding(name: str, namespace: str, service_account: str, sa_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace, **_META},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
    }


def gate_serving_rules(config: GateConfig) -> list[dict[str, Any]]:
    """Return the gate's rights in the serving namespace: the configured kinds' scale subresource, never a patch.

    No patch of the objects themselves; `list deployments` finds a service's Deployment by its label.
    """
    targets = [s.scale_target for s in config.services]
    deployments = sorted({t.name for t in targets})
    # offhours-lent: the ledger of what the gate lowered, by object (`policy.ownership`), whatever the config names.
    state = sorted([*(state_configmap_name(s.name) for s in config.services), LEDGER_CONFIGMAP])
    return [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
        *[r for r in target_rules(targets, ["get", "list", "watch"], ["get", "patch", "update"])
          if r["resources"] != ["deployments"]],
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        # placement: the pod-deletion-cost mark on the replicas a lower removes (gate/placement.py); without it the
        # ReplicaSet chooses. RBAC cannot name an annotation: the gate writes only that one (kube.set_deletion_cost).
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
        # The one counted hold Event per Deployment is read and updated in place.
        {"apiGroups": [""], "resources": ["events"], "resourceNames": [aggregated_event_name(d, EVENT_GATE_HOLD)
                                                                     for d in deployments], "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        # list: a service removed from the configuration still has a record, and gets back what was lent
        # (then its record is deleted) before the Role is rendered again without it.
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": state,
         "verbs": ["get", "update", "patch", "delete"]},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"],
         "verbs": ["get", "list", "patch", "update"]},
        {"apiGroups": [KEDA_GROUP], "resources": ["scaledobjects"], "verbs": ["get", "list", "patch"]},
        # The gate's own pod runs Argo's executor in the serving namespace.
        _EXECUTOR_RULE,
    ]


GATE_RESEARCH_RULES: list[dict[str, Any]] = [
    {"apiGroups": [ARGO_GROUP], "resources": ["workflows"],
     "verbs": ["get", "list", "watch", "patch", "create", "delete"]},
    # Read only: a workflow's arguments are checked against its template's before it is admitted.
    {"apiGroups": [ARGO_GROUP], "resources": ["workflowtemplates"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # A stopped job's pods' status is what its release time is measured from; the pods on serving's nodes are
    # counted as the scheduler counts them, and one that nothing admitted (a squatter) is deleted.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
    # The GPU quota it keeps equal to what it has lent (created at its first tick; only that one is changed).
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["resourcequotas"], "resourceNames": [GPU_QUOTA], "verbs": ["get", "patch"]},
]
"""The gate's rights in the research namespace: admit, park, stop and delete workflows; list their templates
and their pods; record events."""

EXIT_HOOK_RULES: list[dict[str, Any]] = [
    {"apiGroups": [ARGO_GROUP], "resources": ["workflows"], "verbs": ["get", "patch"]},
    _EXECUTOR_RULE,
]
"""The exit hook's rights in the research namespace: mark its own workflow; Argo's executor."""

RESEARCH_RULES: list[dict[str, Any]] = [_EXECUTOR_RULE]
"""The rights of research pods: what Argo's executor needs, nothing else."""


POOL_NODES_ROLE = "offhours-gate-pool-nodes"


def pool_nodes_rbac(config: GateConfig) -> list[dict[str, Any]]:
    """Return the ClusterRole and its binding that let the gate list nodes: only with a `pool.nodeSelector`.

    Nodes are cluster-scoped; without a selector the gate reads none (the pool is the nodes its pods run on).
    """
    if not config.pool_node_selector:
        return []
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": POOL_NODES_ROLE, **_META},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": POOL_NODES_ROLE, **_META},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": POOL_NODES_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": GATE_SERVICE_ACCOUNT, "namespace": config.namespace}]},
    ]


def rbac_manifests(config: GateConfig) -> list[dict[str, Any]]:
    """Return the ServiceAccounts, Roles and RoleBindings for a gate configuration.

    Refuses one namespace for serving and research: the gate's ServiceAccount must live where no
    research workflow can name it.
    """
    serving, research = config.namespace, config.workflow_namespace
    if serving == research:
        raise ConfigError(f"gate config: namespace and workflowNamespace are both {serving!r}; research workflows "
                          "must run in another namespace than serving, or they could run as the gate's ServiceAccount")
    gate, hook, pods = GATE_SERVICE_ACCOUNT, EXIT_HOOK_SERVICE_ACCOUNT, RESEARCH_SERVICE_ACCOUNT
    return [
        _service_account(gate, serving),
        _role(gate, serving, gate_serving_rules(config)),
        _binding(gate, serving, gate, serving),
        _role(gate, research, GATE_RESEARCH_RULES),
        _binding(gate, research, gate, serving),
        _service_account(hook, research),
        _role(hook, research, EXIT_HOOK_RULES),
        _binding(hook, research, hook, research),
        _service_account(pods, research),
        _role(pods, research, RESEARCH_RULES),
        _binding(pods, research, pods, research),
    ]
