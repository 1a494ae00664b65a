"""The step templates: built by a test each, with the preemptible contract in the rendered manifest."""

import json
import re
from typing import Any

import pytest
from hera.workflows import WorkflowTemplate

from offhours.steps.contract import (
    PREEMPTED_EXIT_CODE,
    PRIORITY_CLASS,
    RESEARCH_STEP_INPUTS,
    RETURN_GPUS,
    RETURN_GPUS_INPUTS,
)
from offhours.steps.library import STEP_MODULES, steps_workflow_template

BUILT = {t["name"]: t for t in steps_workflow_template().to_dict()["spec"]["templates"]}


def _substitute_defaults(text: str, template: dict[str, Any]) -> str:
    defaults = {p["name"]: p.get("default") for p in template["inputs"]["parameters"]}
    return re.sub(r"\{\{inputs\.parameters\.([a-z-]+)\}\}", lambda m: defaults[m.group(1)], text)


def test_library_holds_every_kind_and_the_exit_template() -> None:
    assert list(BUILT) == ["preprocess", "pretrain", "sft", "rl", "eval", "job", RETURN_GPUS]


@pytest.mark.parametrize("kind", sorted(STEP_MODULES))
def test_research_step_is_preemptible_by_construction(kind: str) -> None:
    # Build this kind's template alone, then read it as Argo will (its rendered form).
    with WorkflowTemplate(name="probe") as probe:
        STEP_MODULES[kind].template()
    tmpl = probe.to_dict()["spec"]["templates"][0]
    assert tmpl["name"] == kind
    assert tmpl["priorityClassName"] == PRIORITY_CLASS
    assert tmpl["activeDeadlineSeconds"] == "{{inputs.parameters.active-deadline-seconds}}"
    declared = [p["name"] for p in tmpl["inputs"]["parameters"]]
    assert declared[: len(RESEARCH_STEP_INPUTS)] == [s.name for s in RESEARCH_STEP_INPUTS]
    retry = tmpl["retryStrategy"]
    assert retry["retryPolicy"] == "Always"
    assert f'lastRetry.exitCode == "{PREEMPTED_EXIT_CODE}"' in retry["expression"]
    assert 'lastRetry.status == "Error"' in retry["expression"]
    # The research program is never run through a shell: the launcher execs the JSON lists.
    assert tmpl["container"]["command"] == ["/offhours/bin/offhours-launch"]
    assert "sh" not in tmpl["container"]["args"] and "-c" not in tmpl["container"]["args"]
    assert "resources" not in tmpl["container"], "quantities come through podSpecPatch only"


@pytest.mark.parametrize("kind", sorted(STEP_MODULES))
def test_pod_spec_patch_is_valid_json_with_defaults(kind: str) -> None:
    tmpl = BUILT[kind]
    patch = json.loads(_substitute_defaults(tmpl["podSpecPatch"], tmpl))
    main = patch["containers"][0]
    assert main["name"] == "main"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert main["resources"]["requests"]["cpu"] == "4"
    assert patch["terminationGracePeriodSeconds"] == 120
    assert patch["nodeSelector"] == {} and patch["tolerations"] == []


def test_pod_spec_patch_carries_pool_placement() -> None:
    tmpl = BUILT["sft"]
    text = tmpl["podSpecPatch"]
    text = text.replace("{{inputs.parameters.node-selector}}", json.dumps({"pool": "inference-h100"}))
    text = text.replace("{{inputs.parameters.tolerations}}",
                        json.dumps([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    text = text.replace("{{inputs.parameters.gpus}}", "8")
    patch = json.loads(_substitute_defaults(text, tmpl))
    assert patch["nodeSelector"] == {"pool": "inference-h100"}
    assert patch["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert patch["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"


def test_eval_declares_its_suite() -> None:
    assert "suite" in [p["name"] for p in BUILT["eval"]["inputs"]["parameters"]]
    assert {"name": "OFFHOURS_SUITE", "value": "{{inputs.parameters.suite}}"} in BUILT["eval"]["container"]["env"]


def test_return_gpus_declares_its_inputs_and_borrows_nothing() -> None:
    tmpl = BUILT[RETURN_GPUS]
    assert [p["name"] for p in tmpl["inputs"]["parameters"]] == [s.name for s in RETURN_GPUS_INPUTS]
    assert "priorityClassName" not in tmpl
    assert "nvidia.com/gpu" not in json.dumps(tmpl["container"]["resources"])
    assert tmpl["container"]["command"] == ["offhours", "return-gpus"]


def test_required_inputs_have_no_default() -> None:
    params = {p["name"]: p for p in BUILT["job"]["inputs"]["parameters"]}
    for name in ("image", "command", "output-uri", "checkpoint-uri", "run-id"):
        assert "default" not in params[name], name
    assert params["args"]["default"] == "[]"
