"""`offhours schedule suspend|resume|delete` act on offhours schedules only, never on another CronWorkflow.

`list` shows the CronWorkflows labelled as offhours schedules; the verbs that change one must refuse
any other CronWorkflow of the namespace by name, and change nothing: in an install whose research
namespace is the serving one (the configuration's default), the gate's own CronWorkflow is there, and
suspending or deleting it stops every reclaim. Invariant: after a refused verb the namespace's
CronWorkflows are exactly what they were.
"""

import argparse
import copy
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from offhours.cronworkflows.research_schedule import research_cron_workflow
from offhours.scripts.cli.schedule import run
from offhours.scripts.names import GATE_CRON_WORKFLOW, LABEL_MANAGED
from offhours.workflows.render import manifests

NAMESPACE = "serving"
TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
REQUIRED = {"service": "chat", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o", "checkpoint-uri": "s3://c"}


class CronApi:
    """CronWorkflows of one namespace, as the CustomObjectsApi reads and writes them (uid and resourceVersion kept)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = {}
        for n, o in enumerate(objects):
            o = copy.deepcopy(o)
            o["metadata"].update(uid=f"uid-{n}", resourceVersion="1")
            self.objects[o["metadata"]["name"]] = o

    def _get(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        assert plural == "cronworkflows"
        if namespace != NAMESPACE or name not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[name]

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                     **_: Any) -> dict[str, Any]:
        return copy.deepcopy(self._get(namespace, plural, name))

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: dict[str, Any], **_: Any) -> dict[str, Any]:
        obj = self._get(namespace, plural, name)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != obj["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        obj["spec"].update(body.get("spec") or {})
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(obj)

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                        body: Any = None, propagation_policy: str | None = None,
                                        **_: Any) -> dict[str, Any]:
        obj = self._get(namespace, plural, name)
        uid = getattr(getattr(body, "preconditions", None), "uid", None)
        if uid is not None and uid != obj["metadata"]["uid"]:
            raise ApiException(status=409, reason="Conflict")
        # As the API server: a delete with a body reads its options from the body, its query parameters never;
        # a custom resource's default is to delete what it owns in the background.
        self.propagation = (getattr(body, "propagation_policy", None) if body is not None
                            else propagation_policy) or "Background"
        return self.objects.pop(name)


def _gate_cron() -> dict[str, Any]:
    cron = copy.deepcopy(manifests()["cronworkflow-offhours-gate.yaml"])
    cron["metadata"]["namespace"] = NAMESPACE
    assert cron["metadata"]["labels"] == {LABEL_MANAGED: "true"}
    return cron


def _args(verb: str, target: str) -> argparse.Namespace:
    return argparse.Namespace(name=verb, target=target, template=None, cron=None, namespace=NAMESPACE, config=None,
                              command="schedule")


@pytest.mark.parametrize("verb", ["suspend", "resume", "delete"])
def test_the_gates_cron_workflow_is_refused_and_left_as_it_was(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    api = CronApi([_gate_cron(), research_cron_workflow("nightly", TEMPLATE, "0 21 * * *", REQUIRED, NAMESPACE)])
    before = copy.deepcopy(api.objects)
    assert run(_args(verb, GATE_CRON_WORKFLOW), api) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{GATE_CRON_WORKFLOW!r} is not an offhours schedule" in err, err
    assert api.objects == before


@pytest.mark.parametrize("verb, suspended", [("suspend", True), ("resume", False)])
def test_an_offhours_schedule_is_still_suspended_and_resumed(verb: str, suspended: bool) -> None:
    api = CronApi([_gate_cron(), research_cron_workflow("nightly", TEMPLATE, "0 21 * * *", REQUIRED, NAMESPACE)])
    assert run(_args(verb, "nightly"), api) == 0
    assert api.objects["nightly"]["spec"]["suspend"] is suspended
    assert not api.objects[GATE_CRON_WORKFLOW]["spec"].get("suspend")


def test_an_offhours_schedule_is_still_deleted_and_a_missing_one_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    api = CronApi([_gate_cron(), research_cron_workflow("nightly", TEMPLATE, "0 21 * * *", REQUIRED, NAMESPACE)])
    assert run(_args("delete", "nightly"), api) == 0
    assert set(api.objects) == {GATE_CRON_WORKFLOW}
    assert api.propagation == "Orphan"  # its runs are kept: an admitted one finishes and returns its GPUs
    assert run(_args("delete", "nightly"), api) == 2
    assert "no schedule 'nightly' in namespace 'serving'" in capsys.readouterr().err
