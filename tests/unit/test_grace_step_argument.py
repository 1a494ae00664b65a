"""A step's own grace argument: an offhours step called by `templateRef` with `termination-grace-seconds: "86400"`.

An offhours research step takes its pod's grace from its input `termination-grace-seconds`; the composed
pipelines pass it the workflow's argument (`{{workflow.parameters.termination-grace-seconds}}`), which the
gate caps at admission. A tenant's workflow (its own DAG, or a template merged over the offhours one by
name) can pass the step a number of its own instead: the gate capped the workflow's argument, which no pod
reads, and admitted a pod of a day's grace.
"""

from typing import Any

import pytest

from offhours.scripts.cluster.grace import own_grace
from offhours.scripts.names import GRACE_PARAMETER
from offhours.workflows.compose import Pipeline

from .test_gate_controller import World, config


def _composed(grace: Any) -> dict[str, Any]:
    """A composed pipeline Workflow whose research step gets `grace` as its own argument (None: as composed)."""
    p = Pipeline("sft-pipeline")
    p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    wf = p.workflow().to_dict()
    for template in wf["spec"]["templates"]:
        for task in (template.get("dag") or {}).get("tasks", []):
            for param in (task.get("arguments") or {}).get("parameters", []):
                if param["name"] == GRACE_PARAMETER and grace is not None:
                    param.clear()
                    param.update({"name": GRACE_PARAMETER, **grace})
    return wf


@pytest.mark.parametrize("grace", [{"value": "86400"}, {"value": "{{=asInt('86400')}}"},
                                   {"valueFrom": {"configMapKeyRef": {"name": "g", "key": "g"}}}],
                         ids=["a number", "an expression", "valueFrom"])
def test_a_step_given_its_own_grace_argument_reads_as_that_grace(grace: dict[str, Any]) -> None:
    """The fault: the step's own argument, which its pod's grace is, read as nothing."""
    found = own_grace(_composed(grace))
    assert found is not None and found[0] >= 86400, found


def test_a_step_passed_the_workflows_grace_reads_as_nothing_of_its_own() -> None:
    """No false alarm: the composed pipeline passes the workflow's argument on, which the gate caps."""
    assert own_grace(_composed(None)) is None
    assert own_grace(_composed({"value": "20"})) == (20.0, "spec.templates[main].dag.tasks[sft]"
                                                            ".arguments.parameters[termination-grace-seconds]")


def test_a_workflow_passing_its_step_a_days_grace_is_never_admitted() -> None:
    """The fault, through the gate: parked under a 30 s cap, admitted with a step whose pod gets 86400 s."""
    w = World(config(maxGraceSeconds=30))
    w.park("sneaky", replicas=2)
    spec = _composed({"value": "86400"})["spec"]
    spec["arguments"]["parameters"] = [{"name": "service", "value": "chat"}, {"name": "replicas", "value": "2"}]
    w.wf("sneaky")["spec"] = {**spec, "suspend": True}
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("sneaky") == "parked" and w.replicas() == 8, w.log.getvalue()
