"""Who may hold a token of the exit hook's ServiceAccount, evaluated (cel-python) on every rendered policy that
matches each request, as kube-apiserver picks them (resource rules, operations, match conditions).

gate_marks ties the exit hook's token to the workflow its pod is named for (`<workflow>-return-gpus-<digits>`); a
pod's name is its creator's choice, so that tie is exactly as strong as the rule on who creates a pod running as
that ServiceAccount, under which name. Invariants, over request users x pod shapes:
- only Argo's workflow controller identity creates a pod running as the exit hook's ServiceAccount in the research
  namespace, and only one a Workflow controls;
- such a pod bears the name gate_marks reads as "workflow W's exit hook" only if W controls it;
- Argo's own exit hook pod (the controller, its Workflow, `W-return-gpus-<hash>`) is created;
- no other way to a token of it is open: no workload template runs as it, no Secret mints one, no TokenRequest but
  a node's.
"""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.names import (
    EXIT_HOOK_SERVICE_ACCOUNT,
    POLICY_EXIT_HOOK_PODS,
    POLICY_GATE_MARKS,
    RESEARCH_SERVICE_ACCOUNT,
    RETURN_GPUS,
)
from tests.unit.test_admission_policies import rendered

celpy = pytest.importorskip("celpy")

CONTROLLER = "system:serviceaccount:argo:argo"  # the default research.argoController, argo/argo
RESEARCHER = "system:serviceaccount:lab:alice"
HOOK_USER = f"system:serviceaccount:lab:{EXIT_HOOK_SERVICE_ACCOUNT}"
NODE = "system:node:gpu-00"
USERS = {
    CONTROLLER: ["system:serviceaccounts", "system:serviceaccounts:argo", "system:authenticated"],
    RESEARCHER: ["system:serviceaccounts", "system:serviceaccounts:lab", "system:authenticated"],
    HOOK_USER: ["system:serviceaccounts", "system:serviceaccounts:lab", "system:authenticated"],
    "alice@example.com": ["researchers", "system:authenticated"],
    # kube-controller-manager's job and replicaset controllers (--use-service-account-credentials, as kubeadm runs it)
    "system:serviceaccount:kube-system:job-controller": ["system:serviceaccounts", "system:authenticated"],
    "system:serviceaccount:kube-system:replicaset-controller": ["system:serviceaccounts", "system:authenticated"],
    NODE: ["system:nodes", "system:authenticated"],
}
MASTERS = ("offhours-admin", ["system:masters", "system:authenticated"])


def _substring(text: Any, start: Any, end: Any = None) -> Any:
    """Kubernetes' CEL strings extension `substring` (cel-python has none): by code point, end exclusive."""
    return celpy.celtypes.StringType(str(text)[int(start):None if end is None else int(end)])


ENV = celpy.Environment()


def _program(expression: str) -> Any:
    return ENV.program(ENV.compile(expression), functions={"substring": _substring})


def _compiled(policy: dict[str, Any]) -> dict[str, Any]:
    spec = policy["spec"]
    return {"rules": spec["matchConstraints"]["resourceRules"], "name": policy["metadata"]["name"],
            "conditions": [_program(c["expression"]) for c in spec.get("matchConditions", [])],
            "variables": [(v["name"], _program(v["expression"])) for v in spec.get("variables", [])],
            "validations": [(_program(v["expression"]), _program(v["messageExpression"]))
                            for v in spec["validations"]]}


POLICIES = [_compiled(d) for d in rendered().values() if d["kind"] == "ValidatingAdmissionPolicy"]
BINDING_NAMESPACES = {d["metadata"]["name"]: d["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
                      ["values"] for d in rendered().values() if d["kind"] == "ValidatingAdmissionPolicyBinding"}


def _matches(rule: dict[str, Any], group: str, resource: str, operation: str) -> bool:
    return group in rule["apiGroups"] and resource in rule["resources"] and operation in rule["operations"]


def refusals(resource: str, obj: dict[str, Any] | None, user: str, groups: list[str], operation: str = "CREATE",
             group: str = "", name: str = "", namespace: str = "lab", only: str | None = None) -> list[str]:
    """The messages of every rendered policy that refuses this request (none: the request is admitted)."""
    base, _, sub = resource.partition("/")
    request = {"userInfo": {"username": user, "groups": groups}, "name": name or (obj or {}).get("metadata", {})
               .get("name", ""), "namespace": namespace, "operation": operation,
               "resource": {"group": group, "resource": base}, "subResource": sub}
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj), "oldObject": None,
                                  "request": celpy.json_to_cel(request)}
    found = []
    for policy in POLICIES:
        if only is not None and policy["name"] != only:
            continue
        if namespace not in BINDING_NAMESPACES[policy["name"]]:
            continue
        if not any(_matches(r, group, resource, operation) for r in policy["rules"]):
            continue
        if not all(bool(c.evaluate(activation)) for c in policy["conditions"]):
            continue
        computed = celpy.celtypes.MapType({})
        activation["variables"] = computed
        for var, program in policy["variables"]:  # in order: each may read the ones before it
            computed[celpy.celtypes.StringType(var)] = program.evaluate(activation)
        for check, message in policy["validations"]:
            if not bool(check.evaluate(activation)):
                found.append(f"{policy['name']}: {message.evaluate(activation)}")
    return found


def _pod(name: str, account: str | None, owners: list[dict[str, Any]] | None = None, field: str = "serviceAccountName",
         priority: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "containers": [{"name": "main"}]}
    if account is not None:
        spec[field] = account
    meta: dict[str, Any] = {"name": name}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta, "spec": spec}


def _owner(kind: str, name: str, controller: bool = True) -> dict[str, Any]:
    api = "argoproj.io/v1alpha1" if kind == "Workflow" else "apps/v1" if kind == "ReplicaSet" else "batch/v1"
    return {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": controller}


def _marks_binding_passes(pod_name: str, workflow: str) -> bool:
    """Whether gate_marks' own CEL reads a token bound to pod `pod_name` as the exit hook of `workflow`."""
    policy = next(p for p in POLICIES if p["name"] == POLICY_GATE_MARKS)
    program = dict(policy["variables"])["ownHookPod"]
    activation = {"object": celpy.json_to_cel({"metadata": {"name": workflow}}),
                  "variables": celpy.json_to_cel({"hookPod": pod_name})}
    return bool(program.evaluate(activation))


def _runs_as(pod: dict[str, Any]) -> str:
    """The ServiceAccount the API server runs a pod as: serviceAccountName, else the deprecated serviceAccount."""
    spec = pod["spec"]
    return spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"


WORKFLOWS = ["victim", "vic", "vic-tim", "mine", "mine-x"]
NAMES = st.one_of(
    st.sampled_from(WORKFLOWS).flatmap(lambda w: st.sampled_from([
        f"{w}-{RETURN_GPUS}-1234", f"{w}-tim-{RETURN_GPUS}-77", f"{w}-x-{RETURN_GPUS}-5", f"{w}-main-99", w,
        f"{w}-{RETURN_GPUS}-12a", f"{RETURN_GPUS}-1"])),
    st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True))
OWNERS = st.lists(st.one_of(st.builds(_owner, st.just("Workflow"), st.sampled_from(WORKFLOWS), st.booleans()),
                            st.builds(_owner, st.sampled_from(["ReplicaSet", "Job"]), st.sampled_from(WORKFLOWS))),
                  max_size=2)
ACCOUNTS = st.sampled_from([EXIT_HOOK_SERVICE_ACCOUNT, RESEARCH_SERVICE_ACCOUNT, "default", None])
# Half the draws are the shape that matters (Argo's controller creating a pod that runs as the exit hook, owned by
# a workflow): where a name that reads as another workflow's hook pod would otherwise slip through.
HOOK_SHAPES = st.tuples(st.just(CONTROLLER), NAMES, st.just(EXIT_HOOK_SERVICE_ACCOUNT),
                        st.sampled_from(["serviceAccountName", "serviceAccount"]),
                        st.lists(st.builds(_owner, st.just("Workflow"), st.sampled_from(WORKFLOWS)), min_size=1,
                                 max_size=1))
ANY_SHAPES = st.tuples(st.sampled_from(sorted(USERS)), NAMES, ACCOUNTS,
                       st.sampled_from(["serviceAccountName", "serviceAccount"]), st.one_of(st.none(), OWNERS))


@settings(max_examples=300)
@given(st.one_of(HOOK_SHAPES, ANY_SHAPES))
def test_only_argos_controller_creates_a_pod_running_as_the_exit_hook_and_only_under_its_own_workflows_name(
        shape: tuple[str, str, str | None, str, list[dict[str, Any]] | None]) -> None:
    user, name, account, field, owners = shape
    pod = _pod(name, account, owners, field)
    refused = refusals("pods", pod, user, USERS[user], only=POLICY_EXIT_HOOK_PODS)
    if _runs_as(pod) != EXIT_HOOK_SERVICE_ACCOUNT:
        assert refused == [], refused  # the policy reaches no other pod
        return
    if refused:
        assert all("runs as offhours-exit-hook" in m for m in refused), refused
        return
    controllers = [o["name"] for o in owners or [] if o["kind"] == "Workflow" and o["controller"]]
    assert user == CONTROLLER and len(controllers) == 1, (user, owners)
    for workflow in WORKFLOWS:
        if _marks_binding_passes(name, workflow):
            assert workflow in controllers, (name, workflow, controllers)


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_argos_own_exit_hook_pod_is_created(workflow: str) -> None:
    pod = _pod(f"{workflow}-{RETURN_GPUS}-3141592653", EXIT_HOOK_SERVICE_ACCOUNT, [_owner("Workflow", workflow)])
    assert refusals("pods", pod, CONTROLLER, USERS[CONTROLLER]) == []


def test_a_researcher_cannot_create_a_pod_that_runs_as_the_exit_hook() -> None:
    pod = _pod(f"victim-{RETURN_GPUS}-1", EXIT_HOOK_SERVICE_ACCOUNT, [_owner("Workflow", "victim")])
    refused = refusals("pods", pod, RESEARCHER, USERS[RESEARCHER])
    assert refused == [f"{POLICY_EXIT_HOOK_PODS}: pod victim-{RETURN_GPUS}-1 runs as offhours-exit-hook, the "
                       "ServiceAccount of the exit hook that gives a workflow's GPUs back: only Argo's workflow "
                       f"controller ({CONTROLLER}) creates pods running as it; run yours as your own ServiceAccount"]


def test_a_tenants_template_named_to_pass_for_another_workflows_exit_hook_is_refused_even_from_argo() -> None:
    # Workflow `vic`'s template `tim-return-gpus`: Argo's controller names its pod vic-tim-return-gpus-<hash>,
    # which gate_marks would read as the exit hook of workflow `vic-tim`.
    name = f"vic-tim-{RETURN_GPUS}-77"
    assert _marks_binding_passes(name, "vic-tim")
    refused = refusals("pods", _pod(name, EXIT_HOOK_SERVICE_ACCOUNT, [_owner("Workflow", "vic")]), CONTROLLER,
                       USERS[CONTROLLER])
    assert len(refused) == 1 and "its name ends as the exit hook pod of another workflow" in refused[0], refused


def test_the_controllers_identity_comes_from_the_configuration() -> None:
    import yaml

    text = yaml.safe_dump(rendered("research: {argoController: workflows/argo-workflows-workflow-controller}\n"))
    assert "system:serviceaccount:workflows:argo-workflows-workflow-controller" in text
    assert CONTROLLER not in text


def test_a_cluster_admin_is_exempt_as_from_every_policy() -> None:
    pod = _pod(f"victim-{RETURN_GPUS}-1", EXIT_HOOK_SERVICE_ACCOUNT)
    assert refusals("pods", pod, *MASTERS) == []


WORKLOADS = [("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"), ("apps", "daemonsets"),
             ("batch", "jobs"), ("", "replicationcontrollers")]


@given(st.sampled_from(WORKLOADS + [("batch", "cronjobs")]), st.sampled_from(sorted(USERS)), ACCOUNTS,
       st.sampled_from(["CREATE", "UPDATE"]))
def test_no_workload_runs_its_pods_as_the_exit_hook(kind: tuple[str, str], user: str, account: str | None,
                                                    operation: str) -> None:
    group, resource = kind
    template = {"spec": {"containers": [{"name": "main"}], **({"serviceAccountName": account} if account else {})}}
    spec = {"jobTemplate": {"spec": {"template": template}}} if resource == "cronjobs" else {"template": template}
    refused = refusals(resource, {"metadata": {"name": "w"}, "spec": spec}, user, USERS[user], operation, group)
    assert bool(refused) == (account == EXIT_HOOK_SERVICE_ACCOUNT), refused
    assert all(f"{resource} w: its pods would run as offhours-exit-hook" in m for m in refused)


@pytest.mark.parametrize(("account", "kind", "refused"), [
    (EXIT_HOOK_SERVICE_ACCOUNT, "kubernetes.io/service-account-token", True),
    (RESEARCH_SERVICE_ACCOUNT, "kubernetes.io/service-account-token", False),
    (EXIT_HOOK_SERVICE_ACCOUNT, "Opaque", False),
])
def test_no_secret_mints_a_long_lived_token_of_the_exit_hook(account: str, kind: str, refused: bool) -> None:
    secret = {"metadata": {"name": "t", "annotations": {"kubernetes.io/service-account.name": account}}, "type": kind}
    found = refusals("secrets", secret, RESEARCHER, USERS[RESEARCHER])
    assert bool(found) == refused and all("its tokens are bound to its own pods" in m for m in found), found


@pytest.mark.parametrize("user", sorted(USERS))
def test_a_token_of_the_exit_hook_is_issued_to_a_nodes_kubelet_only(user: str) -> None:
    request = {"metadata": {}, "spec": {"audiences": [], "boundObjectRef": {"kind": "Pod", "name": "p"}}}
    found = refusals("serviceaccounts/token", request, user, USERS[user], group="", name=EXIT_HOOK_SERVICE_ACCOUNT)
    assert bool(found) == (user != NODE), found
    assert refusals("serviceaccounts/token", request, RESEARCHER, USERS[RESEARCHER], name=RESEARCH_SERVICE_ACCOUNT) == []


GPU = {"resources": {"requests": {"nvidia.com/gpu": "1"}}}


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_the_exit_hook_runs_at_the_default_priority_only_without_a_gpu_in_any_container(where: str) -> None:
    # A pod's GPU request is its largest init container's if that is larger: held for the pod's whole life.
    pod = _pod(f"w-{RETURN_GPUS}-1", EXIT_HOOK_SERVICE_ACCOUNT, [_owner("Workflow", "w")])
    assert refusals("pods", pod, CONTROLLER, USERS[CONTROLLER]) == []
    pod["spec"][where] = [*pod["spec"].get(where, []), {"name": "g", **GPU}]
    refused = refusals("pods", pod, CONTROLLER, USERS[CONTROLLER])
    assert len(refused) == 1 and "spec.priority is 0" in refused[0], refused


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_validate_says_the_same_of_an_exit_hook_pod_holding_a_gpu(where: str) -> None:
    from offhours.scripts.policy.boundary import boundary_problems
    from offhours.scripts.policy.config import ResearchBoundary

    # A Pod manifest is its submitter's, never Argo's controller's: running as the exit hook it is refused anyway.
    spec: dict[str, Any] = {"serviceAccountName": EXIT_HOOK_SERVICE_ACCOUNT, "containers": [{"name": "c"}]}
    assert [p for p, _ in boundary_problems({"kind": "Pod", "spec": spec}, ResearchBoundary())] == \
        ["spec.serviceAccountName"]
    spec[where] = [*spec.get(where, []), {"name": "g", **GPU}]
    assert [p for p, _ in boundary_problems({"kind": "Pod", "spec": spec}, ResearchBoundary())] == \
        ["spec.priorityClassName", "spec.serviceAccountName"]


@pytest.mark.parametrize(("value", "words"), [
    ("lab/offhours-research", "research.argoController: 'lab/offhours-research' is a ServiceAccount of the research "
                              "namespace"),
    ("argo", "research.argoController: 'argo' does not match"),
    ("Argo/argo", "research.argoController: 'Argo/argo' does not match"),
    ("argo/", "research.argoController: 'argo/' does not match"),
])
def test_a_controller_identity_that_is_no_controllers_is_refused_naming_the_field(value: str, words: str) -> None:
    from offhours.scripts.policy.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        rendered(f"research: {{argoController: '{value}'}}\n")
    assert words in str(refused.value) and "\n" not in str(refused.value), refused.value
