"""Argo runs inline templates (a step's or a DAG task's `inline`, nested at any depth) as pods like any other:
the offline boundary (validate) and the gate's admission refusal judge their pod fields as the pod policy will."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.boundary import admission_refusal, boundary_problems
from offhours.scripts.policy.config import ResearchBoundary

OUTRANKING = {"priorityClassName": "serving-high", "schedulerName": "volcano", "nodeName": "gpu-7", "priority": 1000}

PLACE = st.lists(st.sampled_from(["steps", "dag"]), min_size=1, max_size=4)


def _nest(path: list[str], leaf: dict[str, Any]) -> dict[str, Any]:
    """A template whose inline templates, along `path`, end in `leaf`."""
    template: dict[str, Any] = {"name": "t", "container": {"image": "busybox"}, **leaf}
    for kind in reversed(path):
        if kind == "steps":
            template = {"name": "s", "steps": [[{"name": "a", "template": "x"}, {"name": "b", "inline": template}]]}
        else:
            template = {"name": "d", "dag": {"tasks": [{"name": "a", "template": "x"}, {"name": "b", "inline": template}]}}
    return template


@given(PLACE, st.sampled_from(sorted(OUTRANKING)))
def test_an_inline_template_outside_best_effort_is_refused_at_any_depth(path: list[str], field: str) -> None:
    spec = {"entrypoint": "main", "templates": [{"name": "x", "container": {"image": "busybox"}},
                                                {**_nest(path, {field: OUTRANKING[field]}), "name": "main"}]}
    problems = boundary_problems({"kind": "Workflow", "spec": spec}, ResearchBoundary())
    assert [p for p, _ in problems if p.endswith(f".inline.{field}")], problems
    refusal = admission_refusal(spec)
    assert refusal is not None and f".inline.{field}" in refusal


@given(PLACE)
def test_a_best_effort_inline_template_passes(path: list[str]) -> None:
    spec = {"templates": [_nest(path, {"priorityClassName": "offhours-best-effort"})]}
    assert boundary_problems({"kind": "Workflow", "spec": spec}, ResearchBoundary()) == []
    assert admission_refusal(spec) is None
