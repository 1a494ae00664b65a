"""A pod a resource template's manifest makes, setting no grace, read as the workflow-wide patch's grace.

Argo applies a workflow's podSpecPatch to the pods it creates itself, the resource template's executor
among them, never to an object a manifest creates: such a pod (a Pod, a Job's pod template) that sets no
terminationGracePeriodSeconds gets Kubernetes' default, 30 s, whatever the patch says.
"""

from typing import Any

import pytest

from offhours.scripts.cluster.grace import own_grace

from .test_gate_controller import World, config

POD = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    image: lab/train:1\n"
JOB = ("apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n"
       "        image: lab/train:1\n")


def _spec(manifest: str) -> dict[str, Any]:
    return {"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 10}',
            "templates": [{"name": "main", "resource": {"action": "create", "manifest": manifest}}]}


@pytest.mark.parametrize("manifest", [POD, JOB], ids=["a Pod", "a Job's pod template"])
def test_a_manifests_pod_without_a_grace_reads_as_kubernetes_default_not_as_the_patch(manifest: str) -> None:
    """The fault: the workflow-wide patch's 10 s taken for a manifest's pod, which Kubernetes gives 30 s."""
    assert own_grace({"spec": _spec(manifest)}) == (30.0, "spec.templates[main].resource.manifest")


def test_a_manifest_setting_its_pods_grace_is_read_as_it_and_one_without_a_pod_adds_nothing() -> None:
    """No false alarm: a manifest's own grace is what counts, and a ConfigMap's manifest sets no pod's grace."""
    within = POD.replace("spec:\n", "spec:\n  terminationGracePeriodSeconds: 5\n")
    assert own_grace({"spec": _spec(within)}) == (10.0, "spec.podSpecPatch")
    config_map = "apiVersion: v1\nkind: ConfigMap\ndata:\n  containers: none\n"
    assert own_grace({"spec": _spec(config_map)}) == (10.0, "spec.podSpecPatch")


def test_a_workflow_whose_resource_template_makes_a_pod_with_the_default_grace_is_not_admitted_under_20_s() -> None:
    """The fault: admitted under a 20 s cap, its manifest's pod keeps 30 s to stop."""
    w = World(config(maxGraceSeconds=20))
    w.park("maker", replicas=2)
    spec = w.wf("maker")["spec"]
    spec.pop("workflowTemplateRef")
    spec.update(_spec(POD))
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("maker") == "parked" and w.replicas() == 8, w.log.getvalue()
