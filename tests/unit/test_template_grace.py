"""The grace of the GPU pods a workflow runs through the WorkflowTemplates it refers to (`cluster.template_grace`).

Invariants, whatever a tenant writes: the walk never raises; what it cannot read is unknown (with its reason),
never a number below the cap; a GPU pod that sets no grace counts Kubernetes' default; a research step's grace
is the argument its caller passes, else its input's default; passed on from the workflow's argument, it is the
value the gate caps at admission.
"""

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.template_grace import (
    MAX_CALLS,
    MAX_DEPTH,
    MAX_TEMPLATE_NODES,
    TemplateGrace,
    direct_refs,
    template_grace,
)
from offhours.scripts.names import GRACE_PARAMETER, JOB_TEMPLATE, PIPELINE_TEMPLATE, STEPS_TEMPLATE
from offhours.scripts.runtime.pod_patch import RESEARCH_POD_SPEC_PATCH
from tests.support.templates import library_templates

GPU = {"image": "train:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
CPU = {"image": "tool:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}


def library() -> dict[str, Any]:
    return {t["metadata"]["name"]: copy.deepcopy(t) for t in library_templates()}


def tenant(templates: dict[str, Any], name: str, spec: dict[str, Any]) -> dict[str, Any]:
    templates[name] = {"metadata": {"name": name}, "spec": spec}
    return templates


def calling(step: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A workflow of its own templates whose entrypoint runs one step."""
    return {"entrypoint": "main", "templates": [{"name": "main", "steps": [[{"name": "s", **step}]]}], **spec}


def sft(arguments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"templateRef": {"name": STEPS_TEMPLATE, "template": "sft"},
            **({"arguments": {"parameters": arguments}} if arguments is not None else {})}


def test_the_librarys_templates_with_the_grace_passed_on_reach_no_grace_above_the_capped_one() -> None:
    """No false refusal: offhours-job and the pipeline pass the workflow's (capped) grace to every GPU step."""
    for name in (JOB_TEMPLATE, PIPELINE_TEMPLATE):
        spec = {"workflowTemplateRef": {"name": name}, "arguments": {"parameters": [{"name": "service", "value": "c"}]}}
        assert template_grace(spec, library()) == TemplateGrace(), name


def test_a_research_step_gets_what_its_caller_passes_else_its_inputs_default() -> None:
    passed = [{"name": GRACE_PARAMETER, "value": "{{workflow.parameters." + GRACE_PARAMETER + "}}"}]
    assert template_grace(calling(sft(passed)), library()) == TemplateGrace()
    got = template_grace(calling(sft([{"name": GRACE_PARAMETER, "value": "20"}])), library())
    assert got.seconds == 20 and got.unknown is None
    got = template_grace(calling(sft()), library())
    assert got.seconds == 120 and f"template sft.podSpecPatch (its {GRACE_PARAMETER})" in got.where


def test_an_own_templates_input_passed_on_is_what_that_template_got() -> None:
    """The workflow's capped grace through its own template's input, and that input's default when none is given."""
    on = [{"name": GRACE_PARAMETER, "value": "{{inputs.parameters." + GRACE_PARAMETER + "}}"}]
    inner = {"name": "inner", "inputs": {"parameters": [{"name": GRACE_PARAMETER, "default": "300"}]},
             "steps": [[{"name": "t", **sft(on)}]]}
    spec = {"entrypoint": "main", "templates": [inner, {"name": "main", "steps": [[
        {"name": "a", "template": "inner", "arguments": {"parameters": [
            {"name": GRACE_PARAMETER, "value": "{{workflow.parameters." + GRACE_PARAMETER + "}}"}]}},
        {"name": "b", "template": "inner"}]]}]}
    got = template_grace(spec, library())
    assert got.seconds == 300 and "template sft" in got.where  # step b: inner's default, passed on to sft
    spec["templates"][1]["steps"][0].pop()  # step a alone: the workflow's grace, capped at admission
    assert template_grace(spec, library()) == TemplateGrace()


def test_an_unpatched_gpu_pod_gets_kubernetes_default_and_a_cpu_pod_is_not_counted() -> None:
    templates = tenant({}, "t", {"templates": [{"name": "gpu", "container": GPU}, {"name": "cpu", "container": CPU},
                                              {"name": "mig", "container": {"resources": {"limits": {
                                                  "nvidia.com/mig-1g.10gb": "1"}}}}]})
    assert template_grace(calling({"templateRef": {"name": "t", "template": "cpu"}}), templates) == TemplateGrace()
    for target in ("gpu", "mig"):
        got = template_grace(calling({"templateRef": {"name": "t", "template": target}}), templates)
        assert got.seconds == 30 and "Kubernetes' default" in got.where, target


def test_the_workflow_wide_patch_and_template_defaults_reach_a_template_it_calls() -> None:
    templates = tenant({}, "t", {"templates": [{"name": "gpu", "container": GPU}]})
    step = {"templateRef": {"name": "t", "template": "gpu"}}
    wide = template_grace(calling(step, podSpecPatch='{"terminationGracePeriodSeconds": 600}'), templates)
    assert (wide.seconds, wide.where) == (600, "spec.podSpecPatch")
    defaults = template_grace(calling(step, templateDefaults={"podSpecPatch": "terminationGracePeriodSeconds: 700"}),
                              templates)
    assert (defaults.seconds, defaults.where) == (700, "spec.templateDefaults.podSpecPatch")
    # The workflow's own spec laid over its template's: the template's wide patch counts only where it sets none.
    tenant(templates, "runner", {"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 900}',
                                 "templates": [{"name": "main", "container": GPU}]})
    got = template_grace({"workflowTemplateRef": {"name": "runner"}}, templates)
    assert (got.seconds, got.where) == (900, "WorkflowTemplate runner spec.podSpecPatch")
    got = template_grace({"workflowTemplateRef": {"name": "runner"},
                          "podSpecPatch": '{"terminationGracePeriodSeconds": 10}'}, templates)
    assert got.seconds == 10


def test_hooks_and_exit_handlers_are_followed() -> None:
    templates = tenant({}, "t", {"templates": [{"name": "slow", "container": GPU,
                                                "podSpecPatch": '{"terminationGracePeriodSeconds": 600}'}]})
    slow = {"templateRef": {"name": "t", "template": "slow"}}
    own = {"entrypoint": "main", "templates": [{"name": "main", "container": CPU}, {"name": "bye", "steps": [[
        {"name": "s", **slow}]]}]}
    for spec in ({**own, "hooks": {"exit": slow}}, {**own, "onExit": "bye"},
                 {"entrypoint": "entry", "templates": [*own["templates"], {"name": "entry", "steps": [[
                     {"name": "s", "template": "main", "hooks": {"running": {"expression": "true", **slow}}}]]}]}):
        got = template_grace(spec, templates)
        assert got.seconds == 600, spec
    dag = {"entrypoint": "d", "templates": [{"name": "main", "container": CPU}, {"name": "d", "dag": {"tasks": [
        {"name": "a", "template": "main", "onExit": "bye"}]}}, {"name": "bye", "steps": [[{"name": "s", **slow}]]}]}
    assert template_grace(dag, templates).seconds == 600


def test_what_cannot_be_read_is_unknown_with_its_reason() -> None:
    lib = library()
    cases = {
        "runs ClusterWorkflowTemplate x, which the gate may not read":
            calling({"templateRef": {"name": "x", "template": "y", "clusterScope": True}}),
        "runs WorkflowTemplate nope, which is not in its namespace": calling({"templateRef": {"name": "nope",
                                                                                              "template": "y"}}),
        f"WorkflowTemplate {STEPS_TEMPLATE} has no template nope": calling({"templateRef": {"name": STEPS_TEMPLATE,
                                                                                            "template": "nope"}}),
        "its grace is not a whole number of seconds": calling(sft([{"name": GRACE_PARAMETER, "value": "{{=1+1}}"}])),
    }
    for reason, spec in cases.items():
        got = template_grace(spec, lib)
        assert got.seconds is None and got.unknown is not None and reason in got.unknown, (reason, got)
    assert template_grace(calling(sft()), None).unknown == "the WorkflowTemplates of its namespace could not be read " \
                                                            "this tick"
    # The workflow-wide patch as an expression: unknown even on a pod that asks only for CPU (it may add a GPU).
    tenant(lib, "t", {"templates": [{"name": "cpu", "container": CPU}]})
    got = template_grace(calling({"templateRef": {"name": "t", "template": "cpu"}},
                                 podSpecPatch="{{workflow.parameters.patch}}"), lib)
    assert got.unknown is not None and "spec.podSpecPatch" in got.unknown


def test_a_template_that_is_too_large_too_deep_or_makes_too_many_calls_is_unknown() -> None:
    big = tenant({}, "big", {"templates": [{"name": "gpu", "container": GPU}],
                             "padding": list(range(MAX_TEMPLATE_NODES))})
    got = template_grace(calling({"templateRef": {"name": "big", "template": "gpu"}}), big)
    assert got.unknown is not None and "too large" in got.unknown
    loop = tenant({}, "loop", {"templates": [{"name": "again", "steps": [[
        {"name": "s", "templateRef": {"name": "loop", "template": "again"}}]]}]})
    got = template_grace(calling({"templateRef": {"name": "loop", "template": "again"}}), loop)
    assert got.unknown is not None and f"more than {MAX_DEPTH} levels" in got.unknown
    wide = tenant({}, "wide", {"templates": [{"name": "cpu", "container": CPU}]})
    spec = {"entrypoint": "main", "templates": [{"name": "main", "dag": {"tasks": [
        {"name": f"t{i}", "templateRef": {"name": "wide", "template": "cpu"}} for i in range(MAX_CALLS)]}}]}
    got = template_grace(spec, wide)
    assert got.unknown is not None and "more than 1,000 template calls" in got.unknown


def test_a_research_patch_is_recognised_only_as_the_librarys_text() -> None:
    """A patch that differs from the research step's by one character is an expression: unknown."""
    lib = tenant({}, "t", {"templates": [{"name": "s", "container": GPU, "podSpecPatch": RESEARCH_POD_SPEC_PATCH[:-3]
                                          + " }}", "inputs": {"parameters": [{"name": GRACE_PARAMETER,
                                                                              "default": "1"}]}}]})
    assert template_grace(calling({"templateRef": {"name": "t", "template": "s"}}), lib).unknown is not None


def test_direct_refs_names_each_reference_once_a_cluster_scoped_one_apart() -> None:
    spec = calling({"templateRef": {"name": "b", "template": "x"}}, workflowTemplateRef={"name": "a"},
                   hooks={"exit": {"templateRef": {"name": "c", "template": "y", "clusterScope": True}}})
    spec["templates"].append({"name": "d", "dag": {"tasks": [{"name": "t", "templateRef": {"name": "b"}},
                                                             {"name": "u", "templateRef": "odd"}]}})
    assert direct_refs(spec) == ("?", "ClusterWorkflowTemplate/c", "a", "b")
    assert direct_refs({"entrypoint": "main", "templates": [{"name": "main", "container": GPU}]}) == ()


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2, 100), st.text(max_size=8),
                  st.sampled_from(["t", "gpu", "main", STEPS_TEMPLATE, "sft", GRACE_PARAMETER, RESEARCH_POD_SPEC_PATCH,
                                   '{"terminationGracePeriodSeconds": 5}', "{{workflow.parameters.x}}"]))
_keys = st.sampled_from(["name", "template", "templateRef", "templates", "steps", "dag", "tasks", "container",
                         "resources", "limits", "podSpecPatch", "hooks", "onExit", "entrypoint", "arguments",
                         "parameters", "value", "inputs", "default", "clusterScope", "inline", "templateDefaults",
                         "workflowTemplateRef", "resource", "manifest", "spec", "nvidia.com/gpu"])
_tree = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(_keys, inner, max_size=4)), max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_tree, templates=st.dictionaries(st.sampled_from(["t", STEPS_TEMPLATE, "x"]), _tree, max_size=3))
def test_any_tenant_written_shape_is_a_grace_or_an_unknown_never_a_failure(spec: Any, templates: Any) -> None:
    got = template_grace(spec, {**library(), **templates})
    assert isinstance(got, TemplateGrace)
    assert got.unknown is None or got.seconds is None
    assert got.seconds is None or 0 <= got.seconds < float("inf")


def test_a_grace_argument_too_large_for_a_float_is_unknown_not_a_failure() -> None:
    # A tenant-written whole number past a float's range (JSON keeps it an int) once raised OverflowError out of
    # the walk: the service's whole tick failed instead of that one workflow waiting.
    huge = 10 ** 400
    for arguments in ([{"name": GRACE_PARAMETER, "value": huge}],):
        got = template_grace(calling(sft(arguments)), library())
        assert got.seconds is None and got.unknown is not None and "whole number" in got.unknown
    templates = tenant(library(), "t", {"templates": [
        {"name": "x", "podSpecPatch": RESEARCH_POD_SPEC_PATCH, "container": GPU,
         "inputs": {"parameters": [{"name": GRACE_PARAMETER, "default": huge}]}}]})
    got = template_grace(calling({"templateRef": {"name": "t", "template": "x"}}), templates)
    assert got.seconds is None and got.unknown is not None


def test_a_templates_patch_with_a_grace_past_a_floats_range_is_unknown_not_a_failure() -> None:
    # The patch's YAML reads as an int too large for a float: `patch_grace` raised OverflowError out of the walk.
    for patch in ("terminationGracePeriodSeconds: " + "9" * 400, '{"terminationGracePeriodSeconds": ' + "9" * 400 + "}"):
        templates = tenant(library(), "t", {"templates": [{"name": "x", "podSpecPatch": patch, "container": GPU}]})
        got = template_grace(calling({"templateRef": {"name": "t", "template": "x"}}), templates)
        assert got.seconds is None and got.unknown is not None and "whole number" in got.unknown
