"""The backstop's install: a batch/v1 CronJob and a ServiceAccount that can only read records and raise serving.

kube-controller-manager's CronJob and Job controllers run it; nothing of Argo is involved. Its
Role, in the serving namespace: read the gate's state ConfigMaps and rewrite those of the
configured services, read the configured kinds (Deployments, StatefulSets, any kind with a
scale subresource) and write the scale subresource of the configured objects (never a patch
of the objects), cap or uncap their HPAs and ScaledObjects, take the gate's Lease,
record Events. In the research namespace only the GPU quota (set to 0 once it restores serving). No pod
rights, no Secrets.
"""

from typing import Any

from offhours.scripts.names import (
    BACKSTOP_CRON_JOB,
    BACKSTOP_ROLE,
    BACKSTOP_SERVICE_ACCOUNT,
    GPU_QUOTA,
    KEDA_GROUP,
    LABEL_MANAGED,
    LABEL_ROLE,
    LEASE_NAME,
    OFFHOURS_IMAGE,
    state_configmap_name,
)
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.target import target_rules

SCHEDULE = "* * * * *"  # every minute: cron's finest step; the lease itself is counted in gate ticks
_META = {"labels": {LABEL_MANAGED: "true"}}


def backstop_rules(config: GateConfig) -> list[dict[str, Any]]:
    """Return the backstop's rights in the serving namespace."""
    state = sorted(state_configmap_name(s.name) for s in config.services)
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": state, "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
        *[r for r in target_rules([s.scale_target for s in config.services], ["get", "list"], ["get", "patch"])
          if r["resources"] != ["deployments"]],
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [KEDA_GROUP], "resources": ["scaledobjects"], "verbs": ["get", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [LEASE_NAME],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]


def backstop_cron_job(namespace: str, image: str = OFFHOURS_IMAGE, research: str | None = None) -> dict[str, Any]:
    """Return the backstop's CronJob: one short pass a minute, never two at once."""
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": BACKSTOP_CRON_JOB, "namespace": namespace, **_META},
        "spec": {
            "schedule": SCHEDULE, "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 50,
            "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {
                "backoffLimit": 0, "activeDeadlineSeconds": 55, "ttlSecondsAfterFinished": 600,
                "template": {
                    "metadata": {"labels": {LABEL_ROLE: BACKSTOP_ROLE, LABEL_MANAGED: "true"}},
                    "spec": {
                        "serviceAccountName": BACKSTOP_SERVICE_ACCOUNT, "restartPolicy": "Never",
                        "terminationGracePeriodSeconds": 5,
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "main", "image": image, "command": ["offhours", "backstop"],
                            "env": [{"name": "OFFHOURS_NAMESPACE",
                                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                                    *([{"name": "OFFHOURS_RESEARCH_NAMESPACE", "value": research}] if research else [])],
                            "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                                          "limits": {"memory": "256Mi"}},
                            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}},
                        }],
                    },
                },
            }},
        },
    }


def backstop_manifests(config: GateConfig, image: str = OFFHOURS_IMAGE) -> dict[str, dict[str, Any]]:
    """Return the backstop's ServiceAccount, Role, RoleBinding and CronJob by file name (serving namespace)."""
    ns, name, research = config.namespace, BACKSTOP_SERVICE_ACCOUNT, config.workflow_namespace
    return {
        f"serviceaccount-{ns}-{name}.yaml": {"apiVersion": "v1", "kind": "ServiceAccount",
                                             "metadata": {"name": name, "namespace": ns, **_META}},
        f"role-{ns}-{name}.yaml": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                                   "metadata": {"name": name, "namespace": ns, **_META}, "rules": backstop_rules(config)},
        f"rolebinding-{ns}-{name}.yaml": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns, **_META},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]},
        f"cronjob-{BACKSTOP_CRON_JOB}.yaml": backstop_cron_job(ns, image, config.workflow_namespace),
        # In the research namespace only the GPU quota, set to 0 once serving is restored with no gate.
        f"role-{research}-{name}.yaml": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": research, **_META},
            "rules": [{"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["create"]},
                      {"apiGroups": [""], "resources": ["resourcequotas"], "resourceNames": [GPU_QUOTA],
                       "verbs": ["get", "patch"]}]},
        f"rolebinding-{research}-{name}.yaml": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": research, **_META},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]},
    }
