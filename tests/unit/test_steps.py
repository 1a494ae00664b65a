"""The step templates: built by a test each, with the preemptible contract and the security model in the manifest."""

import json
import re
from typing import Any

import pytest
from hera.workflows import WorkflowTemplate
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.names import CHECK_PARAMETERS, PRIORITY_CLASS, RETURN_GPUS
from offhours.scripts.runtime.exit_codes import PREEMPTED_EXIT_CODE
from offhours.steps.contract import RESEARCH_STEP_INPUTS
from offhours.steps.library import STEP_MODULES, steps_workflow_template
from offhours.steps.research_step import pod_spec_patch_expression

BUILT = {t["name"]: t for t in steps_workflow_template().to_dict()["spec"]["templates"]}
PATCH_KEYS = {"terminationGracePeriodSeconds", "nodeSelector", "tolerations", "containers"}


def evaluate_patch(template: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """Evaluate a podSpecPatch expression tag the way Argo does, for this subset of expr.

    The subset (map and list literals with single-quoted keys, `inputs.parameters['x']`, and
    the functions toJson, asInt, fromJSON) reads the same in Python once the names are mapped.
    """
    text = template["podSpecPatch"]
    assert text.startswith("{{=") and text.endswith("}}") and text.count("{{") == 1 and text.count("}}") == 1
    defaults = {p["name"]: p.get("default") for p in template["inputs"]["parameters"]}
    params = {**defaults, **values}
    python = (text[3:-2].replace("inputs.parameters[", "P[").replace("toJson(", "_to_json(")
              .replace("asInt(", "_as_int(").replace("fromJSON(", "json.loads("))

    def _as_int(value: str) -> int:
        return int(value.strip())  # expr's int() parses the whole string or fails

    def _to_json(value: Any) -> str:
        return json.dumps(value)

    env = {"P": params, "json": json, "_as_int": _as_int, "_to_json": _to_json}
    result = eval(python, {"__builtins__": {}}, env)  # noqa: S307 - our own expression, mapped names only
    patch = json.loads(result)
    assert isinstance(patch, dict)
    return patch


def test_library_holds_every_kind_the_check_and_the_exit_template() -> None:
    assert list(BUILT) == ["preprocess", "pretrain", "sft", "rl", "eval", "job", CHECK_PARAMETERS, RETURN_GPUS]


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
def test_research_pods_run_as_the_research_service_account_with_a_fixed_launcher(kind: str) -> None:
    tmpl = BUILT[kind]
    assert tmpl["serviceAccountName"] == "offhours-research"
    assert tmpl["initContainers"][0]["image"] == "ghcr.io/offhours/offhours:0.1.0"
    assert "launcher-image" not in [p["name"] for p in tmpl["inputs"]["parameters"]]


@pytest.mark.parametrize("kind", sorted(STEP_MODULES))
def test_pod_spec_patch_with_defaults(kind: str) -> None:
    patch = evaluate_patch(BUILT[kind], {})
    assert patch == {
        "terminationGracePeriodSeconds": 120, "nodeSelector": {}, "tolerations": [],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                                                      "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"}}}],
    }


def test_pod_spec_patch_carries_pool_placement() -> None:
    patch = evaluate_patch(BUILT["sft"], {
        "node-selector": json.dumps({"pool": "inference-h100"}),
        "tolerations": json.dumps([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        "gpus": "8"})
    assert patch["nodeSelector"] == {"pool": "inference-h100"}
    assert patch["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert patch["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"


def test_the_injection_of_issue_9_cannot_add_a_key() -> None:
    # Pasted raw into JSON, this value made `"serviceAccountName":"offhours-gate"` a key of the patch.
    with pytest.raises(ValueError):
        evaluate_patch(BUILT["sft"], {"termination-grace-seconds": '120,"serviceAccountName":"offhours-gate"'})
    patch = evaluate_patch(BUILT["sft"], {"cpu": '4"},"serviceAccountName":"offhours-gate","x":{"y":"'})
    assert set(patch) == PATCH_KEYS
    assert patch["containers"][0]["resources"]["requests"]["cpu"] == '4"},"serviceAccountName":"offhours-gate","x":{"y":"'


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["termination-grace-seconds", "node-selector", "tolerations", "gpus", "cpu",
                                        "memory"]), st.one_of(st.text(), st.from_regex(r'[0-9{}\[\]",:a-z ]*'))))
def test_no_parameter_value_adds_a_key_to_the_pod_spec_patch(values: dict[str, str]) -> None:
    # Invariant: whatever the values, the patch either cannot be built (Argo fails the node) or
    # has exactly the four keys, one container named main whose only key beside name is resources,
    # and every quantity is the parameter's text, unchanged.
    try:
        patch = evaluate_patch(BUILT["job"], values)
    except (ValueError, TypeError):
        return
    assert set(patch) == PATCH_KEYS
    assert len(patch["containers"]) == 1 and set(patch["containers"][0]) == {"name", "resources"}
    requests = patch["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == values.get("cpu", "4") and requests["nvidia.com/gpu"] == values.get("gpus", "1")


def test_pod_spec_patch_expression_has_no_tag_end_inside() -> None:
    # A `}}` inside would end Argo's tag early; a `"` would break its JSON-unescaping of the tag.
    inner = pod_spec_patch_expression()[3:-2]
    assert "}}" not in inner and "{{" not in inner and '"' not in inner


def test_eval_declares_its_suite() -> None:
    assert "suite" in [p["name"] for p in BUILT["eval"]["inputs"]["parameters"]]
    assert {"name": "OFFHOURS_SUITE", "value": "{{inputs.parameters.suite}}"} in BUILT["eval"]["container"]["env"]


def test_return_gpus_takes_nothing_from_the_workflow_but_its_identity() -> None:
    tmpl = BUILT[RETURN_GPUS]
    assert "inputs" not in tmpl, "no input: a caller cannot choose the image, the account or another workflow"
    assert tmpl["serviceAccountName"] == "offhours-exit-hook"
    assert tmpl["container"]["image"] == "ghcr.io/offhours/offhours:0.1.0"
    assert tmpl["container"]["command"] == ["offhours", "return-gpus"]
    assert tmpl["container"]["args"] == ["--namespace", "{{workflow.namespace}}", "--workflow", "{{workflow.name}}",
                                         "--status", "{{workflow.status}}"]
    assert "volumes" not in tmpl, "it needs no gate configuration"
    assert "priorityClassName" not in tmpl
    assert "nvidia.com/gpu" not in json.dumps(tmpl["container"]["resources"])
    tags = set(re.findall(r"\{\{[^}]*\}\}", json.dumps(tmpl)))
    assert tags == {"{{workflow.namespace}}", "{{workflow.name}}", "{{workflow.status}}"}


def test_check_parameters_is_cpu_only_never_retried_and_fixed() -> None:
    tmpl = BUILT[CHECK_PARAMETERS]
    assert [p["name"] for p in tmpl["inputs"]["parameters"]] == ["schema", "values"]
    assert tmpl["container"]["image"] == "ghcr.io/offhours/offhours:0.1.0"
    assert tmpl["container"]["command"] == ["offhours", "check-parameters"]
    assert tmpl["container"]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert tmpl["serviceAccountName"] == "offhours-research"
    assert "retryStrategy" not in tmpl and "podSpecPatch" not in tmpl
    assert "nvidia.com/gpu" not in json.dumps(tmpl)


def test_render_image_replaces_every_offhours_image() -> None:
    built = json.dumps(steps_workflow_template("registry.lab/offhours:7").to_dict())
    assert "ghcr.io/offhours/offhours" not in built
    assert built.count('"registry.lab/offhours:7"') == len(STEP_MODULES) + 2  # launchers, check, exit hook


def test_required_inputs_have_no_default() -> None:
    params = {p["name"]: p for p in BUILT["job"]["inputs"]["parameters"]}
    for name in ("image", "command", "output-uri", "checkpoint-uri", "run-id"):
        assert "default" not in params[name], name
    assert params["args"]["default"] == "[]"
