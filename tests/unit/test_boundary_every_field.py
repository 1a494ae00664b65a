"""Every way Argo lets a workflow or a template set a pod's priority, runtime, placement or scheduler is judged.

Generated: a forbidden value (a priority class above best-effort, a numeric priority, nodeName, another scheduler,
a RuntimeClass not allowed, a toleration of another key) placed in any of the places Argo takes it from (the
workflow's own fields, templateDefaults, a template, or a podSpecPatch at any of those levels, written as JSON or
YAML with its keys in any case, since Go's JSON decoder folds case), in a Workflow, a WorkflowTemplate or a
CronWorkflow. Invariant: `validate` names a problem at that place; the same document with the allowed value has none.
"""

import json
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.inputs.yamldoc import read_patch
from offhours.scripts.policy.boundary import boundary_problems, patch_fields
from offhours.scripts.policy.config import ResearchBoundary

BOUNDARY = ResearchBoundary(toleration_keys=("nvidia.com/gpu",), runtime_classes=("nvidia",))
# (field as a template writes it, as the workflow writes it (None: not there), forbidden value, allowed value)
FIELDS = [
    ("priorityClassName", "podPriorityClassName", "serving-high", "offhours-best-effort"),
    ("priority", "podPriority", 1000, -100),
    ("nodeName", None, "gpu-00", None),
    ("schedulerName", "schedulerName", "volcano", "default-scheduler"),
    ("runtimeClassName", None, "kata", "nvidia"),
    ("tolerations", "tolerations", [{"operator": "Exists"}], [{"key": "nvidia.com/gpu", "operator": "Exists"}]),
]
PLACES = ["workflow", "workflow-patch", "defaults", "defaults-patch", "template", "template-patch"]


def patch_text(key: str, value: Any, as_yaml: bool) -> str:
    return yaml.safe_dump({key: value}) if as_yaml else json.dumps({key: value})


def document(kind: str, place: str, field: tuple[Any, ...], forbidden: bool, key_case: int, as_yaml: bool) -> Any:
    template_key, workflow_key, bad, good = field
    value = bad if forbidden else good
    key = [str.lower, str.upper, lambda k: k][key_case](template_key)
    spec: dict[str, Any] = {"entrypoint": "main", "podPriorityClassName": "offhours-best-effort",
                            "templates": [{"name": "main", "container": {"image": "busybox"}}]}
    if value is not None:
        if place == "workflow" and workflow_key is not None:
            spec[workflow_key] = value
        elif place == "workflow-patch":
            spec["podSpecPatch"] = patch_text(key, value, as_yaml)
        elif place == "defaults" and template_key != "nodeName" and template_key != "runtimeClassName":
            spec["templateDefaults"] = {template_key: value}
        elif place == "defaults-patch":
            spec["templateDefaults"] = {"podSpecPatch": patch_text(key, value, as_yaml)}
        elif place == "template" and template_key not in ("nodeName", "runtimeClassName"):
            spec["templates"][0][template_key] = value
        else:
            spec["templates"][0]["podSpecPatch"] = patch_text(key, value, as_yaml)
    if kind == "CronWorkflow":
        return {"kind": kind, "metadata": {"name": "x"}, "spec": {"workflowSpec": spec}}
    return {"kind": kind, "metadata": {"name": "x"}, "spec": spec}


@given(st.sampled_from(["Workflow", "WorkflowTemplate", "CronWorkflow"]), st.sampled_from(PLACES),
       st.sampled_from(FIELDS), st.integers(0, 2), st.booleans())
def test_a_forbidden_pod_field_is_refused_wherever_argo_takes_it_from(kind: str, place: str, field: tuple[Any, ...],
                                                                      key_case: int, as_yaml: bool) -> None:
    bad = boundary_problems(document(kind, place, field, True, key_case, as_yaml), BOUNDARY, read_patch)
    assert bad, (kind, place, field)
    assert any(field[0].lower() in path.lower() or (field[1] or "~").lower() in path.lower()
               or "podspecpatch" in path.lower() for path, _ in bad), bad
    assert all("offhours-best-effort" in m or "not allowed" in m or "scheduler" in m or "toleration" in m
               for _, m in bad), bad
    assert boundary_problems(document(kind, place, field, False, key_case, as_yaml), BOUNDARY, read_patch) == []


def test_a_parameterised_or_unreadable_patch_is_left_to_the_pods_own_check() -> None:
    assert patch_fields('{"nodeName": "{{inputs.parameters.node}}"}') == {}
    assert patch_fields("{not json: [") == {} and patch_fields("{not json: [", read_patch) == {}
    assert patch_fields("nodeName: a", read_patch) == {"nodeName": "a"} and patch_fields("nodeName: a") == {}
    assert patch_fields('{"nodeName": "a", "NODENAME": "b"}') == {"nodeName": "b"}  # the last, as Go keeps it


@given(st.sampled_from(PLACES), st.sampled_from([f for f in FIELDS if f[0] in ("priorityClassName", "priority",
                                                                              "nodeName", "schedulerName")]),
       st.integers(0, 2), st.booleans())
def test_the_gate_never_admits_a_workflow_whose_own_spec_outranks_best_effort(
        place: str, field: tuple[Any, ...], key_case: int, as_yaml: bool) -> None:
    from offhours.scripts.cluster.memory import MemoryCluster

    for forbidden in (True, False):
        cluster = MemoryCluster()
        wf = cluster.add_workflow("research", "job", "chat", 2)
        wf["spec"].update(document("Workflow", place, field, forbidden, key_case, as_yaml)["spec"])
        (job,) = cluster.jobs("research", "chat")
        if forbidden:
            assert job.problem is not None and "offhours-best-effort" in job.problem or "scheduler" in (job.problem or "")
        else:
            assert job.problem is None, job.problem
