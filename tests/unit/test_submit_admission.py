"""`offhours submit` refuses a job the gate would never admit, with the gate's own check and words."""

from typing import Any

from offhours.scripts.cli.submit_admission import never_admitted
from offhours.scripts.cluster.parked import parked_workflow
from offhours.workflows.render import example_gate_config
from tests.support.templates import with_offhours_parts

SERVICE = example_gate_config().services[0]


def own_template(grace: int) -> dict[str, Any]:
    return with_offhours_parts({"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
            "metadata": {"name": "mine", "namespace": "research"},
            "spec": {"entrypoint": "main", "arguments": {"parameters": [
                {"name": "run-id", "value": "r1"}, {"name": "service", "value": SERVICE.name},
                {"name": "replicas", "value": "1"}]}, "templates": [{
                "name": "main", "podSpecPatch": f'{{"terminationGracePeriodSeconds": {grace}}}',
                "container": {"image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "4"}}}}]}})


def submitted(grace: int) -> tuple[dict[str, Any], dict[str, Any]]:
    template = own_template(grace)
    body = parked_workflow(template, {}, "research", 0, {s.name for s in example_gate_config().services})
    return body, {"mine": template}


def test_a_grace_above_the_services_cap_is_refused_in_the_gates_words() -> None:
    body, templates = submitted(int(SERVICE.max_grace_seconds) + 480)
    problem = never_admitted(body, example_gate_config(), templates)
    assert problem is not None and problem.startswith("the gate would never admit it: ")
    assert f"maxGraceSeconds {SERVICE.max_grace_seconds:g}" in problem


def test_a_grace_within_the_cap_passes() -> None:
    body, templates = submitted(int(SERVICE.max_grace_seconds))
    assert never_admitted(body, example_gate_config(), templates) is None
