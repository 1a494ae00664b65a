"""The rendered tenant boundary: every policy fails closed, denies, explains; a configuration that would leave it
unbounded is refused by `render` with one line naming the field; the offline rules judge each pod field alone.

(The policies' CEL is evaluated by a real kube-apiserver in tests/e2e/test_admission_policy_e2e.py.)
"""

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from offhours.cronworkflows.admission import admission_manifests, refuse_unbounded
from offhours.scripts.names import (
    ADMISSION_POLICIES,
    ANNOTATION_DELETION_COST,
    EXIT_HOOK_SERVICE_ACCOUNT,
    GATE_MARK_ANNOTATIONS,
    GATE_SERVICE_ACCOUNT,
    LABEL_STATE,
    POLICY_GATE_POD_MARK,
    PRIORITY_CLASS,
    WORKFLOW_QUOTA,
)
from offhours.scripts.policy.boundary import boundary_problems
from offhours.scripts.policy.config import ConfigError, ResearchBoundary
from offhours.workflows.render import parse_gate_config_text

CONFIG = ("namespace: inference\nworkflowNamespace: lab\nmetrics: {source: direct}\n"
          "services: {chat: {capacity: {requestsPerSecond: 1}}}\n")


def rendered(extra: str = "") -> dict[str, dict[str, Any]]:
    return admission_manifests(parse_gate_config_text(CONFIG + extra))


def test_every_policy_fails_closed_denies_and_explains_each_refusal() -> None:
    docs = rendered()
    policies = {d["metadata"]["name"]: d for d in docs.values() if d["kind"] == "ValidatingAdmissionPolicy"}
    bindings = {d["metadata"]["name"]: d for d in docs.values() if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert sorted(policies) == sorted(bindings) == sorted(ADMISSION_POLICIES)
    for name, policy in policies.items():
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert all(v["messageExpression"] and v["expression"] for v in policy["spec"]["validations"])
        binding = bindings[name]["spec"]
        assert binding["policyName"] == name and binding["validationActions"] == ["Deny"]
        namespaces = binding["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert set(namespaces) <= {"inference", "lab"}
        assert ("lab" in namespaces) != (name == POLICY_GATE_POD_MARK)  # the gate's pod mark binds serving only


def test_the_identities_and_namespaces_come_from_the_configuration() -> None:
    text = yaml.safe_dump(rendered())
    assert f"system:serviceaccount:inference:{GATE_SERVICE_ACCOUNT}" in text
    assert f"system:serviceaccount:lab:{EXIT_HOOK_SERVICE_ACCOUNT}" in text
    assert "system:serviceaccounts:lab" in text and "request.namespace == 'inference'" in text
    assert ":research" not in text and "'serving'" not in text and ":serving:" not in text
    quota = rendered("research: {maxWorkflows: 7}\n")[f"resourcequota-lab-{WORKFLOW_QUOTA}.yaml"]
    assert quota["metadata"]["namespace"] == "lab" and quota["spec"]["hard"] == {"count/workflows.argoproj.io": "7"}


def test_the_allowed_tolerations_and_runtime_classes_reach_the_pod_policy() -> None:
    docs = rendered("research: {tolerationKeys: [pool.example.com/gpu], runtimeClassNames: [nvidia]}\n")
    checks = docs["validatingadmissionpolicy-offhours-research-pods-best-effort.yaml"]["spec"]["validations"]
    tolerations = next(c["expression"] for c in checks if "tolerations" in c["expression"])
    runtime = next(c["expression"] for c in checks if "runtimeClassName" in c["expression"])
    assert "'pool.example.com/gpu'" in tolerations and "'nvidia.com/gpu'" not in tolerations
    assert runtime.endswith("in ['nvidia']")


@pytest.mark.parametrize(("extra", "field"), [
    ("research: {tolerationKeys: ['bad key']}\n", "research.tolerationKeys: 'bad key' is not a taint key"),
    ("research: {tolerationKeys: [-gpu]}\n", "research.tolerationKeys: '-gpu'"),
    ("research: {runtimeClassNames: [Kata_VM]}\n", "research.runtimeClassNames: 'Kata_VM' is not a RuntimeClass"),
])
def test_a_configuration_that_would_bound_nothing_is_refused_naming_the_field(extra: str, field: str) -> None:
    with pytest.raises(ConfigError, match="^gate config: " + field.replace(".", r"\.")):
        rendered(extra)


def test_a_namespace_no_binding_could_match_is_refused() -> None:
    config = parse_gate_config_text(CONFIG.replace("workflowNamespace: lab", "workflowNamespace: Lab_1"))
    with pytest.raises(ConfigError, match=r"^gate config: workflowNamespace: 'Lab_1' is not a namespace name"):
        refuse_unbounded(config)


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "default"])
def test_a_research_namespace_shared_with_the_clusters_own_objects_is_refused(namespace: str) -> None:
    config = parse_gate_config_text(CONFIG.replace("workflowNamespace: lab", f"workflowNamespace: {namespace}"))
    with pytest.raises(ConfigError, match=rf"^gate config: workflowNamespace: '{namespace}' is shared with the"):
        refuse_unbounded(config)


def test_an_empty_toleration_key_which_would_tolerate_every_taint_is_refused_by_the_schema() -> None:
    with pytest.raises(ConfigError, match=r"^gate config: research\.tolerationKeys\.0"):
        rendered("research: {tolerationKeys: ['']}\n")


def test_render_refuses_an_unbounded_configuration_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from offhours.scripts.cli.main import main

    config = tmp_path / "gate.yaml"
    config.write_text(CONFIG + "research: {tolerationKeys: ['*']}\n")
    assert main(["render", "--out", str(tmp_path / "out"), "--gate-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gate config: research.tolerationKeys: '*' is not a taint key") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


# -- the same rules offline ------------------------------------------------------------------------------------

FIELDS = {  # field: (an allowed value, a refused value, the path the refusal names)
    "priorityClassName": (PRIORITY_CLASS, "high-priority", "spec.priorityClassName"),
    "nodeName": (None, "gpu-07", "spec.nodeName"),
    "schedulerName": ("default-scheduler", "volcano", "spec.schedulerName"),
    "runtimeClassName": (None, "kata", "spec.runtimeClassName"),
    "tolerations": ([{"key": "nvidia.com/gpu", "operator": "Exists"}], [{"operator": "Exists"}], "spec.tolerations[0]"),
}


@given(st.dictionaries(st.sampled_from(sorted(FIELDS)), st.booleans()))
def test_each_pod_field_is_judged_alone_and_an_allowed_pod_passes(refused: dict[str, bool]) -> None:
    """Invariant: the problems name exactly the fields set to a refused value; a pod with none refused has none."""
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}], "priorityClassName": PRIORITY_CLASS}
    for name, bad in refused.items():
        allowed, refused_value, _ = FIELDS[name]
        value = refused_value if bad else allowed
        if value is not None:
            spec[name] = value
    problems = boundary_problems({"kind": "Pod", "spec": spec}, ResearchBoundary())
    assert sorted(path for path, _ in problems) == sorted(FIELDS[n][2] for n, bad in refused.items() if bad)


def test_a_workflow_may_be_created_parked_but_carries_none_of_the_gates_marks() -> None:
    wf = {"kind": "Workflow", "metadata": {"labels": {LABEL_STATE: "parked"}}, "spec": {}}
    assert boundary_problems(wf, ResearchBoundary()) == []
    wf["metadata"] = {"labels": {LABEL_STATE: "admitted"}, "annotations": {GATE_MARK_ANNOTATIONS[0]: "x"}}
    paths = [p for p, _ in boundary_problems(wf, ResearchBoundary())]
    assert paths == [f"metadata.labels.{LABEL_STATE}", f"metadata.annotations.{GATE_MARK_ANNOTATIONS[0]}"]


def test_a_template_outside_best_effort_is_named_with_its_path() -> None:
    wf = {"kind": "WorkflowTemplate", "spec": {"podPriorityClassName": "serving", "templates": [
        {"name": "a", "priorityClassName": PRIORITY_CLASS},
        {"name": "b", "schedulerName": "volcano", "tolerations": [{"key": "dedicated", "operator": "Exists"}]}]}}
    paths = [p for p, _ in boundary_problems(wf, ResearchBoundary())]
    assert paths == ["spec.podPriorityClassName", "spec.templates[1].schedulerName", "spec.templates[1].tolerations[0]"]


def test_the_exit_hook_may_run_at_the_default_priority() -> None:
    pod = {"kind": "Pod", "spec": {"serviceAccountName": EXIT_HOOK_SERVICE_ACCOUNT, "containers": []}}
    # Its priority passes; a Pod manifest running as it is refused for its creator (test_admission_cel_hook_pod.py).
    assert [p for p, _ in boundary_problems(pod, ResearchBoundary())] == ["spec.serviceAccountName"]


def test_the_gates_pod_patch_in_serving_is_bounded_to_the_deletion_cost_mark() -> None:
    """Intent of the CEL (evaluated by kube-apiserver in tests/e2e/test_admission_policy_e2e.py): it matches the
    gate's own updates of pods in the serving namespace only, and every field a patch reaches but the mark is
    compared with the old pod; each refusal names the pod and the one annotation the gate may write."""
    docs = rendered()
    policy = docs[f"validatingadmissionpolicy-{POLICY_GATE_POD_MARK}.yaml"]["spec"]
    binding = docs[f"validatingadmissionpolicybinding-{POLICY_GATE_POD_MARK}.yaml"]["spec"]
    assert binding["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["inference"]
    assert policy["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
    assert [c["expression"] for c in policy["matchConditions"]] == [
        f"request.userInfo.username == 'system:serviceaccount:inference:{GATE_SERVICE_ACCOUNT}'"]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    checks = " && ".join(c["expression"] for c in policy["validations"])
    for used in ("labels", "otherAnnotations", "finalizers", "owners"):
        assert f"variables.{used}" in checks
    assert "object.spec == oldObject.spec" in checks
    # The annotation key is the only one exempt from the comparison, in both directions (set, changed, removed).
    assert variables["otherAnnotations"].count(f"k == '{ANNOTATION_DELETION_COST}'") == 2
    assert "ownerReferences" in variables["owners"] and "finalizers" in variables["finalizers"]
    assert all(ANNOTATION_DELETION_COST in c["messageExpression"] and "request.name" in c["messageExpression"]
               for c in policy["validations"])
