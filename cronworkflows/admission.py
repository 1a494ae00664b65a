"""The tenant boundary the API server enforces: ValidatingAdmissionPolicies, their bindings, the workflow quota.

A boundary only the gate enforces is found late (a parked workflow resumed by its owner runs until the
gate stops it). These objects make kube-apiserver refuse such a write itself, before any controller sees
it, with a message that says what to change. CEL runs inside kube-apiserver (admissionregistration.k8s.io/v1):
no webhook to run or to fail open. Every policy has `failurePolicy: Fail` and a `[Deny]` binding.

- best-effort pods: what a research pod really runs with (spec.priority, set by the Priority plugin before
  validation; nodeName; schedulerName; runtimeClassName; tolerations), not the many Workflow fields that can
  set it (a podSpecPatch is a string CEL cannot parse).
- only the gate admits: spec.suspend lifted on a parked workflow by anyone but the gate's ServiceAccount.
- the gate's marks: names.GATE_MARK_* set, changed or removed by anyone but the gate (and the exit hook).
- the gate's pod mark: in the serving namespace the gate's ServiceAccount may patch pods (RBAC names no field),
  and changes only `controller.kubernetes.io/pod-deletion-cost` with it; any other change of a pod is refused.
- serving objects: research namespace ServiceAccounts write no Deployment, HPA, ConfigMap, quota or Lease
  there (RBAC already refuses; this is the second lock, and it says why).
- exit hook pods: only Argo's workflow controller (research.argoController) creates a pod running as the exit
  hook's ServiceAccount, controlled by a Workflow and named as the exit hook of that workflow only; no workload,
  Secret or TokenRequest (but a kubelet's) gets a token of it. The marks' tie to the pod name rests on this.

`system:masters` is exempt from every policy: that group bypasses authorization and can delete these policies,
so a policy does not bound it; exempting it keeps an operator's repair path (kubectl edit of a stuck workflow, a
debugging pod) open. Argo's controller must therefore not run as a member of system:masters (it does not in
Argo's install: its own ServiceAccount), or the pods it creates would pass unjudged.
"""

import re
from typing import Any

from offhours.scripts.names import (
    ADMISSION_POLICIES,
    ANNOTATION_DELETION_COST,
    ARGO_GROUP,
    EXIT_HOOK_MARK_ANNOTATIONS,
    EXIT_HOOK_SERVICE_ACCOUNT,
    GATE_MARK_ANNOTATIONS,
    GATE_MARK_LABELS,
    GATE_SERVICE_ACCOUNT,
    GPU_RESOURCE,
    KEDA_GROUP,
    LABEL_MANAGED,
    LABEL_STATE,
    POLICY_BEST_EFFORT_PODS,
    POLICY_EXIT_HOOK_PODS,
    POLICY_GATE_ADMITS,
    POLICY_GATE_MARKS,
    POLICY_GATE_POD_MARK,
    POLICY_SERVING_OBJECTS,
    PRIORITY_CLASS,
    RETURN_GPUS,
    STATE_PARKED,
    STATE_PREEMPTED,
    STATE_RETURNED,
    WORKFLOW_QUOTA,
)
from offhours.scripts.policy.boundary import (
    ALWAYS_TOLERATED,
    BEST_EFFORT_PRIORITY,
    DEFAULT_SCHEDULER,
    EXIT_HOOK_MAX_PRIORITY,
)
from offhours.scripts.policy.config import ConfigError, GateConfig

API_VERSION = "admissionregistration.k8s.io/v1"
_META = {"labels": {LABEL_MANAGED: "true"}}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")  # a namespace name (DNS-1123 label)
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")  # a taint key (a qualified name)
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")  # a RuntimeClass
NOT_MASTERS = {"name": "not-cluster-admin", "expression": "!('system:masters' in request.userInfo.groups)"}
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
"""The key under which kube-apiserver puts the pod a bound ServiceAccount token was issued for (userInfo.extra)."""


def hook_pod_of(pod: str, workflow: str) -> str:
    """Return the CEL of "pod name `pod` is Argo's name for the exit hook pod of workflow `workflow`".

    The one test of that name, shared by the marks' binding (gate_marks) and the pods that may bear it
    (exit_hook_pods): the two cannot drift apart.
    """
    return (f"{pod}.startsWith({workflow} + '-') && {pod}.substring(size({workflow}) + 1)"
            f".matches('^{RETURN_GPUS}-[0-9]+$')")


def _lit(values: tuple[str, ...] | list[str]) -> str:
    """Return a CEL list literal of strings (single-quoted; the values are checked names, no quote can occur)."""
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def service_account_user(namespace: str, name: str) -> str:
    """Return the username a ServiceAccount's requests carry."""
    return f"system:serviceaccount:{namespace}:{name}"


def refuse_unbounded(config: GateConfig) -> None:
    """Refuse a configuration whose policies would match nothing or everything: one line naming the field."""
    for field, value in (("namespace", config.namespace), ("workflowNamespace", config.workflow_namespace)):
        if not _NAME.match(value) or len(value) > 63:
            raise ConfigError(f"gate config: {field}: {value!r} is not a namespace name (lowercase letters, digits, "
                              "'-'): the admission policies bound to it would match nothing")
    if config.workflow_namespace.startswith("kube-") or config.workflow_namespace == "default":
        # The research policies judge every pod and workflow there: the cluster's own would be refused too.
        raise ConfigError(f"gate config: workflowNamespace: {config.workflow_namespace!r} is shared with the "
                          "cluster's own objects: the research policies would judge everything there; give research "
                          "a namespace of its own")
    controller_ns = config.research.argo_controller.partition("/")[0]
    if controller_ns == config.workflow_namespace:
        # A research workflow may run as any ServiceAccount of its namespace: it would be "Argo's controller".
        raise ConfigError(f"gate config: research.argoController: {config.research.argo_controller!r} is a "
                          "ServiceAccount of the research namespace, which research workflows can run as: name the "
                          "ServiceAccount of Argo's workflow controller (argo/argo in Argo's own install)")
    for key in config.research.toleration_keys:
        if not _QUALIFIED.match(key) or len(key) > 316:
            raise ConfigError(f"gate config: research.tolerationKeys: {key!r} is not a taint key: it would tolerate "
                              "nothing (a toleration without a key tolerates every taint, so none is allowed)")
    for name in config.research.runtime_classes:
        if not _SUBDOMAIN.match(name) or len(name) > 253:
            raise ConfigError(f"gate config: research.runtimeClassNames: {name!r} is not a RuntimeClass name: "
                              "no pod could name it")


def _policy(name: str, rules: list[dict[str, Any]], validations: list[dict[str, Any]],
            variables: list[dict[str, Any]] | None = None,
            match_conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules}}
    if match_conditions:
        spec["matchConditions"] = match_conditions
    if variables:
        spec["variables"] = variables
    spec["validations"] = validations
    return {"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name, **_META},
            "spec": spec}


def _binding(name: str, namespaces: list[str]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name, **_META},
            "spec": {"policyName": name, "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": {"matchExpressions": [
                         {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]}}}}


def _check(expression: str, message: str) -> dict[str, Any]:
    return {"expression": expression, "messageExpression": message}


def best_effort_pods(config: GateConfig) -> dict[str, Any]:
    """Research pods stay best-effort: judged on what the pod will run with, after the mutating plugins."""
    tolerated = _lit(tuple(config.research.toleration_keys) + ALWAYS_TOLERATED)
    classes = _lit(config.research.runtime_classes)
    allowed_keys = ", ".join(config.research.toleration_keys) or "none"
    allowed_classes = ", ".join(config.research.runtime_classes) or "none (the default runtime of the cluster)"
    pod = "'pod ' + object.metadata.name"
    hook = f"object.spec.serviceAccountName == '{EXIT_HOOK_SERVICE_ACCOUNT}'"
    # Every container, init ones included: a pod holds its largest init container's GPUs for its whole life.
    no_gpu = (f"(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))"
              f".all(c, !has(c.resources) || ((!has(c.resources.requests) || !('{GPU_RESOURCE}' in c.resources.requests))"
              f" && (!has(c.resources.limits) || !('{GPU_RESOURCE}' in c.resources.limits))))")
    return _policy(POLICY_BEST_EFFORT_PODS, [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                              "resources": ["pods"]}], match_conditions=[NOT_MASTERS], validations=[
        # The exit hook gives GPUs back and holds none: it may run at the default priority, so no research pod
        # can preempt it; with a GPU it is a research pod like any other.
        _check(f"has(object.spec.priority) && (object.spec.priority <= {BEST_EFFORT_PRIORITY} || "
               f"({hook} && object.spec.priority <= {EXIT_HOOK_MAX_PRIORITY} && {no_gpu}))",
               f"{pod} + ': spec.priority is ' + (has(object.spec.priority) ? string(object.spec.priority) : 'unset') + "
               f"'; research pods run at most at {PRIORITY_CLASS} ({BEST_EFFORT_PRIORITY}): set priorityClassName: "
               f"{PRIORITY_CLASS} (in a Workflow: spec.podPriorityClassName, or priorityClassName on the template)'"),
        _check("!has(object.spec.nodeName) || object.spec.nodeName == ''",
               f"{pod} + ': spec.nodeName is set (' + object.spec.nodeName + '), which skips the scheduler; research "
               "pods are placed by the scheduler: remove nodeName (a nodeSelector chooses the pool)'"),
        _check(f"!has(object.spec.schedulerName) || object.spec.schedulerName == '{DEFAULT_SCHEDULER}'",
               f"{pod} + ': spec.schedulerName is ' + object.spec.schedulerName + '; research pods use "
               f"{DEFAULT_SCHEDULER}: remove schedulerName'"),
        _check(f"!has(object.spec.runtimeClassName) || object.spec.runtimeClassName in {classes}",
               f"{pod} + ': spec.runtimeClassName ' + object.spec.runtimeClassName + ' is not allowed here; allowed: "
               f"{allowed_classes}'"),
        _check(f"!has(object.spec.tolerations) || object.spec.tolerations.all(t, has(t.key) && t.key in {tolerated})",
               f"{pod} + ': spec.tolerations may tolerate only the taint keys {allowed_keys} (every toleration names "
               "its key); remove the others'"),
    ])


def gate_admits(config: GateConfig) -> dict[str, Any]:
    """Only the gate lifts a parked workflow's spec.suspend (a stop, with spec.shutdown, may: nothing runs)."""
    gate = service_account_user(config.namespace, GATE_SERVICE_ACCOUNT)
    suspended = "(has(oldObject.spec.suspend) && oldObject.spec.suspend == true)"
    still = "(has(object.spec.suspend) && object.spec.suspend == true)"
    # Argo's ShutdownStrategy.ShouldExecute: only `Stop` and `Terminate` keep pods from running; any other value (the
    # empty string included) executes them, so a stop is only ever one of these two, and stays one.
    stopping = "(has(object.spec.shutdown) && object.spec.shutdown in ['Stop', 'Terminate'])"
    stopped = "(has(oldObject.spec.shutdown) && oldObject.spec.shutdown in ['Stop', 'Terminate'])"
    parked = (f"(has(oldObject.metadata.labels) && '{LABEL_STATE}' in oldObject.metadata.labels && "
              f"oldObject.metadata.labels['{LABEL_STATE}'] == '{STATE_PARKED}')")
    name = "object.metadata.name"
    return _policy(POLICY_GATE_ADMITS, [{"apiGroups": [ARGO_GROUP], "apiVersions": ["*"], "operations": ["UPDATE"],
                                         "resources": ["workflows"]}], [
        _check(f"!{suspended} || {still} || {stopping}",
               f"'workflow ' + {name} + ' is parked (spec.suspend: true): only the offhours gate resumes it, when "
               f"GPUs are free. Wait for the gate (offhours why ' + {name} + ' says why it waits), or stop it with "
               f"offhours cancel ' + {name}"),
        # A parked workflow stopped before it ran has its suspend lifted with the stop: clearing the stop then
        # would run it unadmitted, and so would rewriting it to a value Argo does not stop on ('', 'stop').
        _check(f"!({stopped} && !{stopping} && {parked})",
               f"'workflow ' + {name} + ' was stopped while parked: its spec.shutdown stays (clearing it would run "
               "the workflow without the gate); submit it again with offhours submit'"),
    ], match_conditions=[NOT_MASTERS, {"name": "not-the-gate", "expression": f"request.userInfo.username != '{gate}'"}])


def gate_marks(config: GateConfig) -> dict[str, Any]:
    """Keep the labels and annotations that admit, park, copy and account the gate's (and the exit hook's)."""
    gate = service_account_user(config.namespace, GATE_SERVICE_ACCOUNT)
    hook = service_account_user(config.workflow_namespace, EXIT_HOOK_SERVICE_ACCOUNT)
    def changed(keys: tuple[str, ...], new: str, old: str) -> str:
        """Return the keys set, changed or removed between the old object's map and the new one's."""
        return (f"{_lit(keys)}.filter(k, (k in variables.{new}) != (k in variables.{old}) || "
                f"((k in variables.{new}) && variables.{new}[k] != variables.{old}[k]))")

    state = f"'{LABEL_STATE}'"
    others = tuple(k for k in GATE_MARK_LABELS if k != LABEL_STATE)
    variables = [
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
        {"name": "oldLabels", "expression": "oldObject != null && has(oldObject.metadata.labels) ? "
                                            "oldObject.metadata.labels : {}"},
        {"name": "annotations", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
        {"name": "oldAnnotations", "expression": "oldObject != null && has(oldObject.metadata.annotations) ? "
                                                 "oldObject.metadata.annotations : {}"},
        {"name": "gateMarks", "expression": f"{changed(GATE_MARK_ANNOTATIONS, 'annotations', 'oldAnnotations')} + "
                                            f"{changed(others, 'labels', 'oldLabels')}"},
        {"name": "hookMarks", "expression": changed(EXIT_HOOK_MARK_ANNOTATIONS, 'annotations', 'oldAnnotations')},
        {"name": "state", "expression": f"{state} in variables.labels ? variables.labels[{state}] : ''"},
        {"name": "oldState", "expression": f"{state} in variables.oldLabels ? variables.oldLabels[{state}] : ''"},
        # The pod the exit hook's token was bound to (kubelet binds every projected token to its pod); '' for a
        # token bound to nothing or an impersonation without it.
        {"name": "hookPod", "expression": f"has(request.userInfo.extra) && '{POD_NAME_EXTRA}' in request.userInfo.extra "
                                          f"&& size(request.userInfo.extra['{POD_NAME_EXTRA}']) == 1 ? "
                                          f"request.userInfo.extra['{POD_NAME_EXTRA}'][0] : ''"},
        # Argo names the exit hook's pod <workflow>-{RETURN_GPUS}-<hash of the node name> (pod names v2): with the
        # rest all digits, no other workflow's hook pod has this name (exit_hook_pods keeps it so).
        {"name": "ownHookPod", "expression": hook_pod_of("variables.hookPod", "object.metadata.name")},
        {"name": "hookAccount", "expression": f"request.userInfo.username == '{hook}'"},
        {"name": "isExitHook", "expression": "variables.hookAccount && variables.ownHookPod"},
    ]
    whose = "'workflow ' + object.metadata.name + ': '"
    return _policy(POLICY_GATE_MARKS, [{"apiGroups": [ARGO_GROUP], "apiVersions": ["*"],
                                        "operations": ["CREATE", "UPDATE"], "resources": ["workflows"]}], [
        _check("size(variables.gateMarks) == 0",
               f"{whose} + variables.gateMarks.join(', ') + ': written by the offhours gate only (they admit, park "
               "and copy jobs); leave them out (offhours submit writes a new job without them)'"),
        # A borrowed exit hook ServiceAccount (a researcher's step running as it: Argo's controller creates that pod
        # under a name that is no hook pod's) writes no workflow at all: its Role may patch every Workflow, so
        # any field of another's (a stop, a suspend, its arguments) would be another researcher's work lost.
        _check("!variables.hookAccount || variables.ownHookPod",
               f"{whose} + 'the exit hook writes only the workflow its own pod belongs to; this request comes from "
               f"pod ' + (variables.hookPod == '' ? '(none: the token is bound to no pod)' : variables.hookPod) + "
               f"', not ' + object.metadata.name + '-{RETURN_GPUS}-<hash>'"),
        _check("variables.isExitHook || size(variables.hookMarks) == 0",
               f"{whose} + variables.hookMarks.join(', ') + ': written by the exit hook that gives the GPUs back "
               "(they account GPU time); leave them out'"),
        # A new workflow may say it waits (parked); only the gate moves it on, the exit hook marks its own end.
        _check(f"variables.state == variables.oldState || (oldObject == null && variables.state == '{STATE_PARKED}') "
               f"|| (variables.isExitHook && variables.state in ['{STATE_RETURNED}', '{STATE_PREEMPTED}'])",
               f"{whose} + 'label {LABEL_STATE} ' + (variables.oldState == '' ? 'unset' : variables.oldState) + "
               f"' -> ' + (variables.state == '' ? 'unset' : variables.state) + ': the offhours gate writes this "
               f"label (a new workflow may carry {STATE_PARKED}); leave it as it is'"),
    ], variables=variables,
        match_conditions=[NOT_MASTERS, {"name": "not-the-gate", "expression": f"request.userInfo.username != '{gate}'"}])


def serving_objects(config: GateConfig) -> dict[str, Any]:
    """Research namespace ServiceAccounts write nothing of serving's, nor the quotas the gate keeps."""
    serving, research = config.namespace, config.workflow_namespace
    rules = [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"],
              "resources": resources}
             for group, resources in (("apps", ["deployments", "deployments/scale"]),
                                      ("autoscaling", ["horizontalpodautoscalers"]), (KEDA_GROUP, ["scaledobjects"]),
                                      ("", ["configmaps", "resourcequotas"]), ("coordination.k8s.io", ["leases"]))]
    return _policy(POLICY_SERVING_OBJECTS, rules, [
        _check(f"!('system:serviceaccounts:{research}' in request.userInfo.groups)",
               f"request.resource.resource + ' ' + request.namespace + '/' + request.name + ' belongs to serving and "
               f"the offhours gate: ' + request.userInfo.username + ', a ServiceAccount of the research namespace "
               f"{research}, cannot change it'"),
    ], match_conditions=[
        NOT_MASTERS,
        # In the research namespace only the quotas are serving's (the gate keeps them); the rest is research's.
        {"name": "serving-or-quota", "expression":
         f"request.namespace == '{serving}' || request.resource.resource == 'resourcequotas'"}])


def gate_pod_mark(config: GateConfig) -> dict[str, Any]:
    """Bound the gate's `patch pods` in the serving namespace to the pod-deletion-cost annotation.

    Every other field a patch could reach is compared with the old pod: spec, labels, the other annotations,
    finalizers and owners (status is the pod's status subresource, which the gate has no right to; managedFields
    and resourceVersion are the API server's own). Create and delete of serving pods RBAC does not grant it.
    """
    gate = service_account_user(config.namespace, GATE_SERVICE_ACCOUNT)
    key = f"'{ANNOTATION_DELETION_COST}'"
    variables = [
        {"name": "annotations", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
        {"name": "oldAnnotations", "expression": "has(oldObject.metadata.annotations) ? "
                                                 "oldObject.metadata.annotations : {}"},
        {"name": "otherAnnotations", "expression":
         f"variables.annotations.all(k, k == {key} || (k in variables.oldAnnotations && "
         "variables.oldAnnotations[k] == variables.annotations[k])) && "
         f"variables.oldAnnotations.all(k, k == {key} || k in variables.annotations)"},
        {"name": "labels", "expression": "(has(object.metadata.labels) ? object.metadata.labels : {}) == "
                                         "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})"},
        *[{"name": name, "expression": f"has(object.metadata.{field}) == has(oldObject.metadata.{field}) && "
                                       f"(!has(object.metadata.{field}) || "
                                       f"object.metadata.{field} == oldObject.metadata.{field})"}
          for name, field in (("finalizers", "finalizers"), ("owners", "ownerReferences"))],
    ]
    pod = "'pod ' + request.namespace + '/' + request.name + ': '"
    why = (f"the offhours gate writes only the {ANNOTATION_DELETION_COST} annotation of a serving pod (it chooses "
           "which replicas a lower removes); ")
    return _policy(POLICY_GATE_POD_MARK, [{"apiGroups": [""], "apiVersions": ["v1"],
                                           "operations": ["UPDATE"], "resources": ["pods"]}], [
        _check("object.spec == oldObject.spec",
               f"{pod} + '{why}its spec is not'"),
        _check("variables.labels",
               f"{pod} + '{why}its labels are not'"),
        _check("variables.otherAnnotations",
               f"{pod} + '{why}its other annotations are not'"),
        _check("variables.finalizers && variables.owners",
               f"{pod} + '{why}its finalizers and owners are not'"),
    ], variables=variables,
        match_conditions=[{"name": "the-gate", "expression": f"request.userInfo.username == '{gate}'"}])


_WORKLOADS = {"apps": ["deployments", "replicasets", "statefulsets", "daemonsets"], "batch": ["jobs", "cronjobs"],
              "": ["replicationcontrollers"]}
"""The kinds whose controllers (kube-controller-manager's) create pods from a template a tenant writes."""
SERVICE_ACCOUNT_NAME_ANNOTATION = "kubernetes.io/service-account.name"
"""On a Secret of type kubernetes.io/service-account-token: the ServiceAccount whose long-lived token it gets."""


def _pod_account(spec: str) -> str:
    """Return the CEL of the ServiceAccount a pod spec runs as ('' for the namespace's default).

    serviceAccountName wins over the deprecated serviceAccount, as the API server's conversion does.
    """
    return (f"(has({spec}.serviceAccountName) && {spec}.serviceAccountName != '' ? {spec}.serviceAccountName : "
            f"(has({spec}.serviceAccount) ? {spec}.serviceAccount : ''))")


def exit_hook_pods(config: GateConfig) -> dict[str, Any]:
    """Only Argo's workflow controller runs pods as the exit hook's ServiceAccount, each named for its own workflow.

    gate_marks ties the exit hook's token to the workflow its pod is named for; a pod's name is its creator's
    choice, so who may create a pod running as that ServiceAccount, and under which name, is the whole of that
    tie. A pod: created by Argo's controller (the configured identity), controlled by a Workflow, and named as
    an exit hook pod (`W-return-gpus-<digits>`) only of the workflow W that controls it (a tenant's own workflow
    may name a template `x-return-gpus`, which Argo's controller would otherwise create as `W-x-return-gpus-N`,
    the hook pod name of workflow `W-x`). Every other way to hold such a token is refused at its own door: a
    workload whose pod template runs as it (its controller, kube-controller-manager, is not Argo's), a Secret
    minting a long-lived token of it, a TokenRequest for it by anyone but a node's kubelet.
    """
    hook, controller = EXIT_HOOK_SERVICE_ACCOUNT, config.research.argo_controller_user
    resource = "request.resource.resource"
    workloads = _lit(sorted(r for rs in _WORKLOADS.values() for r in rs if r != "cronjobs"))
    annotation = f"'{SERVICE_ACCOUNT_NAME_ANNOTATION}'"
    variables = [
        # The ServiceAccount what is written runs as (a pod, a workload's pods) or mints a token of (a Secret, a
        # TokenRequest, whose request.name is the ServiceAccount's).
        {"name": "account", "expression":
         f"{resource} == 'serviceaccounts' ? request.name : "
         f"{resource} == 'secrets' ? (has(object.type) && object.type == 'kubernetes.io/service-account-token' && "
         f"has(object.metadata.annotations) && {annotation} in object.metadata.annotations ? "
         f"object.metadata.annotations[{annotation}] : '') : "
         f"{resource} == 'pods' ? {_pod_account('object.spec')} : "
         f"{resource} == 'cronjobs' ? {_pod_account('object.spec.jobTemplate.spec.template.spec')} : "
         f"{_pod_account('object.spec.template.spec')}"},
        {"name": "asHook", "expression": f"variables.account == '{hook}'"},
        {"name": "pod", "expression": f"{resource} == 'pods' && variables.asHook"},
        {"name": "owners", "expression": "has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []"},
        # Argo's controller makes each pod's one controller reference its Workflow's.
        {"name": "workflowOwners", "expression": f"variables.owners.filter(o, o.apiVersion.startsWith('{ARGO_GROUP}/') "
                                                 "&& o.kind == 'Workflow' && has(o.controller) && o.controller)"},
    ]
    pod = "'pod ' + object.metadata.name + ' runs as " + hook + ", the ServiceAccount of the exit hook that gives a " \
          "workflow\\'s GPUs back: '"
    written = f"{resource} + ' ' + (has(object.metadata.name) ? object.metadata.name : request.name) + ': '"
    return _policy(POLICY_EXIT_HOOK_PODS, [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        *[{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": resources}
          for group, resources in _WORKLOADS.items()],
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["secrets"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["serviceaccounts/token"]},
    ], [
        _check(f"!variables.pod || request.userInfo.username == '{controller}'",
               f"{pod} + 'only Argo\\'s workflow controller ({controller}) creates pods running as it; run yours as "
               "your own ServiceAccount'"),
        _check("!variables.pod || size(variables.workflowOwners) == 1",
               f"{pod} + 'only a Workflow\\'s own pods run as it, and no Workflow controls this one'"),
        # The name that gate_marks reads as "the exit hook of workflow W" is borne only by a pod W controls.
        _check(f"!variables.pod || !object.metadata.name.matches('-{RETURN_GPUS}-[0-9]+$') || "
               f"variables.workflowOwners.exists(o, {hook_pod_of('object.metadata.name', 'o.name')})",
               f"{pod} + 'its name ends as the exit hook pod of another workflow (<workflow>-{RETURN_GPUS}-<digits>) "
               "than the one that owns it: name the template otherwise'"),
        _check(f"!variables.asHook || !({resource} in {workloads} || {resource} == 'cronjobs')",
               f"{written} + 'its pods would run as {hook}, the ServiceAccount of the exit hook that gives a "
               f"workflow\\'s GPUs back; only Argo\\'s workflow controller runs pods as it: name your own "
               "ServiceAccount'"),
        _check(f"!variables.asHook || {resource} != 'secrets'",
               f"{written} + 'a long-lived token of {hook} (the exit hook that gives a workflow\\'s GPUs back) is "
               "never made: its tokens are bound to its own pods'"),
        _check(f"!variables.asHook || {resource} != 'serviceaccounts' || 'system:nodes' in request.userInfo.groups",
               f"'a token of {hook} (the exit hook that gives a workflow\\'s GPUs back) is issued to the kubelet of "
               "its own pods only'"),
    ], variables=variables, match_conditions=[NOT_MASTERS])


def workflow_quota(config: GateConfig) -> dict[str, Any]:
    """Bound the count of Workflows in the research namespace: a flood is refused at creation."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": WORKFLOW_QUOTA, "namespace": config.workflow_namespace, **_META},
            "spec": {"hard": {"count/workflows.argoproj.io": str(config.research.max_workflows)}}}


def admission_manifests(config: GateConfig) -> dict[str, dict[str, Any]]:
    """Return the policies, their bindings and the workflow quota by file name (render's naming)."""
    refuse_unbounded(config)
    serving, research = config.namespace, config.workflow_namespace
    policies = [best_effort_pods(config), gate_admits(config), gate_marks(config), serving_objects(config),
                gate_pod_mark(config), exit_hook_pods(config)]
    assert [p["metadata"]["name"] for p in policies] == list(ADMISSION_POLICIES)
    bound = {POLICY_BEST_EFFORT_PODS: [research], POLICY_GATE_ADMITS: [research], POLICY_GATE_MARKS: [research],
             POLICY_SERVING_OBJECTS: sorted({serving, research}), POLICY_GATE_POD_MARK: [serving],
             POLICY_EXIT_HOOK_PODS: [research]}
    docs: dict[str, dict[str, Any]] = {}
    for policy in policies:
        name = policy["metadata"]["name"]
        docs[f"validatingadmissionpolicy-{name}.yaml"] = policy
        docs[f"validatingadmissionpolicybinding-{name}.yaml"] = _binding(name, bound[name])
    if config.research.max_workflows is not None:
        docs[f"resourcequota-{research}-{WORKFLOW_QUOTA}.yaml"] = workflow_quota(config)
    return docs
