"""The console as an optional in-cluster install: ServiceAccount, read-only Roles, Deployment, Service, NetworkPolicy.

It runs in the serving namespace and only reads: ConfigMaps and Deployments there (the gate's state,
its configuration and the services), workflows in the research namespace; nothing else (no pods, no
logs, no secrets) and no write right anywhere. Its one cluster-wide right is to create TokenReviews
and SubjectAccessReviews: it authenticates every reader's bearer token and asks what that identity
may list (`--auth kubernetes`). The NetworkPolicy lets in only pods labelled
`offhours.io/console-client=true` (Prometheus, an ingress proxy), from any namespace;
`kubectl port-forward` reaches the pod through the kubelet, which no NetworkPolicy filters.
Prometheus scrapes `/metrics` through the Service (annotated for the common `prometheus.io/scrape`
discovery) with a bearer token whose identity may `get` the non-resource URL `/metrics`.
"""

from typing import Any

from offhours.scripts.names import ARGO_GROUP, CONSOLE, CONSOLE_AUTH, LABEL_CONSOLE_CLIENT, OFFHOURS_IMAGE
from offhours.scripts.policy.config import GateConfig

PORT = 8080


def _role(namespace: str, rules: list[dict[str, Any]], name: str = CONSOLE) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}


def _binding(namespace: str, sa_namespace: str, name: str = CONSOLE) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": CONSOLE, "namespace": sa_namespace}]}


def console_manifests(config: GateConfig, image: str = OFFHOURS_IMAGE) -> dict[str, dict[str, Any]]:
    """Return the console's manifests by file name, for `config`'s serving and research namespaces."""
    serving, research = config.namespace, config.workflow_namespace
    labels = {"app.kubernetes.io/name": CONSOLE, "app.kubernetes.io/part-of": "offhours"}
    out: dict[str, dict[str, Any]] = {
        f"serviceaccount-{CONSOLE}.yaml": {"apiVersion": "v1", "kind": "ServiceAccount",
                                        "metadata": {"name": CONSOLE, "namespace": serving},
                                        "automountServiceAccountToken": True},
        f"role-{CONSOLE}.yaml": _role(serving, [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}]),
        f"rolebinding-{CONSOLE}.yaml": _binding(serving, serving),
    }
    research_rules = [{"apiGroups": [ARGO_GROUP], "resources": ["workflows"], "verbs": ["get", "list"]}]
    if research == serving:
        out[f"role-{CONSOLE}.yaml"]["rules"] += research_rules
    else:
        out[f"role-{CONSOLE}-research.yaml"] = _role(research, research_rules, f"{CONSOLE}-research")
        out[f"rolebinding-{CONSOLE}-research.yaml"] = _binding(research, serving, f"{CONSOLE}-research")
    out[f"clusterrole-{CONSOLE_AUTH}.yaml"] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": CONSOLE_AUTH},
        "rules": [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                  {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]}
    out[f"clusterrolebinding-{CONSOLE_AUTH}.yaml"] = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": CONSOLE_AUTH},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CONSOLE_AUTH},
        "subjects": [{"kind": "ServiceAccount", "name": CONSOLE, "namespace": serving}]}
    out[f"deployment-{CONSOLE}.yaml"] = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": CONSOLE, "namespace": serving, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"serviceAccountName": CONSOLE,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{
                         "name": "console", "image": image,
                         "command": ["offhours", "console", "--host", "0.0.0.0", "--port", str(PORT),
                                     "-n", research, "--serving-namespace", serving, "--auth", "kubernetes"],
                         "ports": [{"name": "http", "containerPort": PORT}],
                         "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                         "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                         "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                             "capabilities": {"drop": ["ALL"]}}}]}}}}
    out[f"service-{CONSOLE}.yaml"] = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": CONSOLE, "namespace": serving, "labels": labels,
                     "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(PORT),
                                     "prometheus.io/path": "/metrics"}},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]}}
    out[f"networkpolicy-{CONSOLE}.yaml"] = {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": CONSOLE, "namespace": serving, "labels": labels},
        "spec": {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"],
                 "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {LABEL_CONSOLE_CLIENT: "true"}}}],
                              "ports": [{"protocol": "TCP", "port": PORT}]}]}}
    return out
