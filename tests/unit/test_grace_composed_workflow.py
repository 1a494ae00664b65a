"""A composed pipeline Workflow (`Pipeline.workflow()`) read as pods of Kubernetes' default grace: refused below 30 s.

Such a workflow runs no WorkflowTemplate, so the reader added Kubernetes' default for pods its own spec
sets no grace on; but its own templates are a DAG whose tasks call `offhours-steps` by `templateRef`:
it creates no pod from its own spec, and its research pods take the capped grace parameter, exactly as
the same pipeline run from its WorkflowTemplate (which is admitted). Under a `maxGraceSeconds` below 30
(the schema allows down to 0), every composed pipeline was refused, every tick.
"""

from typing import Any

from offhours.scripts.cluster.grace import own_grace
from offhours.workflows.compose import Pipeline

from .test_gate_controller import World, config

GPU = {"resources": {"limits": {"nvidia.com/gpu": "8"}}}


def _composed() -> dict[str, Any]:
    p = Pipeline("distill-pipeline")
    teacher = p.step("sft", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    p.step("job", name="distill", image="ghcr.io/lab/distill:1", command=["distill"], input_from=teacher, gpus=4)
    return p.workflow().to_dict()


def test_a_composed_pipeline_workflow_sets_no_grace_of_its_own() -> None:
    """The fault: its DAG of templateRefs read as a pod with Kubernetes' default grace."""
    assert own_grace(_composed()) is None


def test_a_workflow_whose_own_templates_make_pods_still_gets_kubernetes_default() -> None:
    """No hole: a container template, or an inline one in a step or a DAG task, is a pod of its own spec."""
    default = (30.0, "Kubernetes' default, on a pod whose spec sets none")
    inline = {"templates": [{"name": "main", "steps": [[{"name": "s", "inline": {"container": GPU}}]]}]}
    in_dag = {"templates": [{"name": "main", "dag": {"tasks": [{"name": "t", "inline": {"script": GPU}}]}}]}
    for spec in ({"templates": [{"name": "main", "container": GPU}]}, inline, in_dag,
                 {"templates": [{"name": "main", "steps": "{{odd}}"}]}, {"templates": [{"name": "kindless"}]}):
        assert own_grace({"spec": spec}) == default, spec


def test_a_composed_pipeline_workflow_is_admitted_under_a_cap_below_kubernetes_default() -> None:
    """The fault, through the gate: parked under maxGraceSeconds 20, it was refused every tick."""
    w = World(config(maxGraceSeconds=20))
    w.park("pipe", replicas=2)
    spec = _composed()["spec"]
    spec["arguments"]["parameters"] = [{"name": "service", "value": "chat"}, {"name": "replicas", "value": "2"}]
    w.wf("pipe")["spec"] = {**spec, "suspend": True}
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("pipe") == "admitted", w.log.getvalue()
