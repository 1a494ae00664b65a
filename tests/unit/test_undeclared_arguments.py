"""A workflow from `argo submit --from` with an argument its template does not declare is caught before it runs.

The Workflow is built the way the argo CLI builds one for `argo submit --from workflowtemplate/T -p k=v`:
a `workflowTemplateRef` and `spec.arguments.parameters` holding every `-p`. The template is the one the
library installs.

Invariants, in words:
- every undeclared argument is named, each with the declared names closest to it, and none that is declared;
- a workflow whose arguments are all declared (or that runs no template) is admitted;
- any shape a tenant can write (no spec, arguments that are not a list, parameters without names) is read
  without an exception, and refuses nothing it cannot read.
"""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cluster.arguments import refusal, undeclared_arguments
from offhours.scripts.cluster.parked import declared_arguments
from offhours.workflows.render import manifests

TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
DECLARED = list(declared_arguments(TEMPLATE))


def _argo_submit(params: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"generateName": "offhours-llm-pipeline-", "namespace": "research"},
            "spec": {"workflowTemplateRef": {"name": "offhours-llm-pipeline"},
                     "arguments": {"parameters": [{"name": k, "value": v} for k, v in params.items()]}}}


def test_a_typo_of_sft_gpus_is_refused_naming_it_and_its_near_miss() -> None:
    wf = _argo_submit({"service": "chat", "run-id": "r1", "sft-gpu": "4"})
    assert undeclared_arguments(wf, TEMPLATE) == ["no parameter sft-gpu (did you mean sft-gpus?)"]
    line = refusal(wf, TEMPLATE)
    assert line is not None and line.startswith("not admitted: its template offhours-llm-pipeline has no parameter "
                                                "sft-gpu (did you mean sft-gpus?)")


@given(chosen=st.lists(st.sampled_from(DECLARED), unique=True),
       extra=st.lists(st.from_regex(r"[a-z][a-z0-9-]{1,20}", fullmatch=True), unique=True, max_size=4))
def test_exactly_the_undeclared_arguments_are_named(chosen: list[str], extra: list[str]) -> None:
    extra = [e for e in extra if e not in DECLARED]
    wf = _argo_submit({**{k: "1" for k in chosen}, **{k: "1" for k in extra}})
    lines = undeclared_arguments(wf, TEMPLATE)
    assert [line.split()[2] for line in lines] == sorted(extra)
    assert (refusal(wf, TEMPLATE) is None) == (not extra)


@given(spec=st.one_of(st.none(), st.integers(), st.text(), st.dictionaries(
    st.sampled_from(["arguments", "workflowTemplateRef"]),
    st.one_of(st.none(), st.text(), st.lists(st.one_of(st.none(), st.integers(), st.dictionaries(
        st.sampled_from(["name", "value"]), st.one_of(st.none(), st.integers(), st.text(max_size=5))))),
        st.dictionaries(st.sampled_from(["name", "parameters"]), st.one_of(st.text(max_size=5), st.lists(
            st.dictionaries(st.just("name"), st.one_of(st.none(), st.text(max_size=5))))))))))
def test_any_tenant_written_shape_is_read_without_an_exception(spec: Any) -> None:
    wf = {"spec": spec}
    lines = undeclared_arguments(wf, TEMPLATE)
    assert isinstance(lines, list)
    assert not any(line.split()[2] in DECLARED for line in lines)


def test_a_workflow_that_runs_no_template_is_not_judged_here() -> None:
    wf = _argo_submit({"anything": "1"})
    del wf["spec"]["workflowTemplateRef"]
    assert undeclared_arguments(wf, TEMPLATE) == [] and refusal(wf, TEMPLATE) is None
