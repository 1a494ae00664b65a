"""The gate never admits nor adopts a workflow that sets an argument its WorkflowTemplate does not declare.

`argo submit --from workflowtemplate/offhours-llm-pipeline -p sft-gpu=4` (a typo of `sft-gpus`) makes a
Workflow that Argo runs with the template's default and never reads `sft-gpu`. Played through the real
`Gate` on the in-memory cluster, with the WorkflowTemplates the library installs.

Invariants, in words:
- such a workflow is never admitted nor adopted, nothing is lent for it, and its waiting reason names the
  argument and its near miss;
- the templates are listed once per tick, and only on a tick where a job that may be admitted runs one;
- templates that cannot be read refuse nothing: the tick goes on, and says so in its log;
- whatever shape of arguments or templates a tenant writes, the tick never fails and serving keeps its floor.
"""

import copy
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.names import ANNOTATION_WAITING_REASON, LABEL_STATE
from offhours.workflows.render import manifests
from tests.unit.test_gate_controller import World

PIPELINE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
JOB = manifests()["workflowtemplate-offhours-job.yaml"]
TEMPLATE = PIPELINE["metadata"]["name"]
NEAR_MISS = "no parameter sft-gpu (did you mean sft-gpus?)"


def world() -> World:
    w = World()
    for t in (PIPELINE, JOB):
        w.cluster.templates[("research", t["metadata"]["name"])] = copy.deepcopy(t)
    return w


def argo_submitted(w: World, name: str, params: dict[str, str], template: str = TEMPLATE, replicas: int = 2) -> None:
    """A workflow as `argo submit --from workflowtemplate/<template> -p k=v ...` makes it: running, not admitted
    (the template's labelsFrom labels it with its run-id argument)."""
    w.park(name, replicas=replicas, state="", run_id=params.get("run-id"))
    spec = w.wf(name)["spec"]
    spec.pop("suspend", None)
    spec["workflowTemplateRef"] = {"name": template}
    spec["arguments"] = {"parameters": [{"name": k, "value": v} for k, v in
                                        {"service": "chat", "replicas": str(replicas), **params}.items()]}


def template_reads(w: World) -> int:
    return sum(c == "list-workflowtemplates" for c in w.cluster.calls)


def test_an_argo_submitted_typo_is_never_adopted_and_its_copy_says_did_you_mean() -> None:
    # The fault: `-p sft-gpu=4` would run silently on lent GPUs with sft-gpus' default.
    w = world()
    argo_submitted(w, "typo", {"run-id": "r1", "sft-gpu": "4"})
    notes: list[str] = []
    for i in range(9):  # quiet load: room to lend from the 6th tick on
        out = w.tick()
        if i == 0:
            w.cluster.finish("research", "typo", "Failed")  # Argo ends the stopped original: its copy may run
        assert not out["chat"].plan.admit and not out["chat"].plan.adopt, w.log.getvalue()
        assert w.replicas() == 8  # nothing lent for it
        notes += out["chat"].plan.notes
    assert w.wf("typo")["spec"]["shutdown"] == "Stop"  # it ran without admission: stopped, parked again
    copies = [n for (_, n) in w.cluster.workflows if n.startswith("typo-")]
    assert copies == ["typo-p1"] and w.state("typo-p1") == "parked" and w.wf("typo-p1")["spec"]["suspend"] is True
    reason = w.wf("typo-p1")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason.startswith(f"not admitted: its template {TEMPLATE} has {NEAR_MISS}"), reason
    # The tick's Event says why it was stopped; no later one claims the refused copy merely does not fit.
    assert [n for n in notes if n.startswith(f"typo runs without admission but its template {TEMPLATE} has {NEAR_MISS}")
            and n.endswith(": stopped and parked again")], notes
    assert not [n for n in notes if "no parked job fits" in n], notes


def test_a_well_formed_one_is_admitted_beside_a_refused_one_with_one_template_read_per_tick() -> None:
    w = world()
    w.park("good", replicas=2)
    w.wf("good")["spec"]["workflowTemplateRef"] = {"name": TEMPLATE}
    w.wf("good")["spec"]["arguments"]["parameters"].append({"name": "sft-gpus", "value": "4"})
    w.park("bad", replicas=2)
    w.wf("bad")["spec"]["workflowTemplateRef"] = {"name": TEMPLATE}
    w.wf("bad")["spec"]["arguments"]["parameters"].append({"name": "sft-gpu", "value": "4"})
    w.park("code-job", svc="code", replicas=2)  # runs offhours-job with its declared arguments
    for _ in range(7):
        before = template_reads(w)
        w.tick()
        assert template_reads(w) - before <= 1  # two services with candidates, one list
    assert w.state("good") == "admitted" and w.state("code-job") == "admitted" and w.state("bad") == "parked"
    assert w.replicas() == 6 and w.replicas("code") == 6
    assert NEAR_MISS in w.wf("bad")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]


def test_unreadable_templates_admit_nothing_that_runs_one_and_the_tick_goes_on() -> None:
    # The fault: the list of WorkflowTemplates is forbidden (an RBAC not yet rolled out) on every tick. What a
    # job that runs one gives its pods to stop is then unknown: it waits, saying why; a job of its own templates
    # is admitted, and every service's tick goes on.
    w = world()
    w.cluster.fail_next["list-workflowtemplates"] = [ClusterError("list workflowtemplates: HTTP 403 Forbidden")] * 20
    w.park("typo", replicas=2)
    w.wf("typo")["spec"]["workflowTemplateRef"] = {"name": TEMPLATE}
    w.wf("typo")["spec"]["arguments"]["parameters"].append({"name": "sft-gpu", "value": "4"})
    w.park("other", svc="code", replicas=2)
    w.park("own", svc="code", replicas=2)
    own = w.wf("own")["spec"]
    del own["workflowTemplateRef"]
    own.update(entrypoint="main", podSpecPatch='{"terminationGracePeriodSeconds": 20}',
               templates=[{"name": "main", "container": {"image": "train:1"}}])
    for _ in range(7):
        out = w.tick()
        assert not out["chat"].failed and not out["code"].failed
    assert w.state("typo") == "parked" and w.state("other") == "parked" and w.replicas() == 8
    assert w.state("own") == "admitted" and w.replicas("code") == 6
    for name in ("typo", "other"):
        assert w.wf(name)["metadata"]["annotations"][ANNOTATION_WAITING_REASON] == (
            "not admitted: its pods' grace period cannot be known: the WorkflowTemplates of its namespace could not "
            "be read this tick"), name
    lines = [line for line in w.log.getvalue().splitlines() if "WorkflowTemplates of research unreadable" in line]
    assert lines and "403 Forbidden" in lines[0] and lines[0].startswith("level=warning")


def test_a_workflow_without_a_template_is_unaffected_and_costs_no_template_read() -> None:
    w = world()
    w.park("inline", replicas=2)
    spec = w.wf("inline")["spec"]
    del spec["workflowTemplateRef"]  # its own templates: its arguments are its own
    spec["entrypoint"] = "main"
    spec["arguments"]["parameters"].append({"name": "sft-gpu", "value": "4"})
    # A ClusterWorkflowTemplate of the same name as a namespaced one: that one's arguments are not its.
    w.park("cluster-scoped", svc="code", replicas=2)
    w.wf("cluster-scoped")["spec"]["workflowTemplateRef"] = {"name": TEMPLATE, "clusterScope": True}
    w.wf("cluster-scoped")["spec"]["arguments"]["parameters"].append({"name": "gpus", "value": "1"})
    for _ in range(7):
        w.tick()
    # What its pods give to stop is unknown (the gate may not read a ClusterWorkflowTemplate): it waits, saying so.
    assert w.state("inline") == "admitted" and w.state("cluster-scoped") == "parked", w.log.getvalue()
    assert "runs ClusterWorkflowTemplate offhours-llm-pipeline, which the gate may not read" in \
        w.wf("cluster-scoped")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert template_reads(w) == 0
    # A typo parked beside them is refused, and costs one read a tick while it waits.
    w.park("typo", replicas=2)
    w.wf("typo")["spec"]["workflowTemplateRef"] = {"name": TEMPLATE}
    w.wf("typo")["spec"]["arguments"]["parameters"].append({"name": "sft-gpu", "value": "4"})
    for _ in range(3):
        w.tick()
    assert w.state("typo") == "parked" and template_reads(w) == 3


_name = st.sampled_from(["sft-gpu", "sft-gpus", "gpus", "service", "replicas"])
_text = st.one_of(st.none(), st.integers(), st.text(max_size=6), _name)
_param = st.one_of(_text, st.fixed_dictionaries({"name": _name}, optional={"value": _text}),
                   st.dictionaries(st.sampled_from(["name", "value"]), _text, max_size=2))
_parameters = st.one_of(_text, st.lists(_param, max_size=4))
_arguments = st.one_of(st.fixed_dictionaries({"parameters": _parameters}), _text,
                       st.dictionaries(st.just("parameters"), _parameters))
_ref = st.one_of(st.just({"name": TEMPLATE}), st.just({"name": TEMPLATE, "clusterScope": True}), _text,
                 st.dictionaries(st.sampled_from(["name", "clusterScope"]),
                                 st.one_of(_text, st.just(TEMPLATE), st.booleans()), max_size=2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ref=_ref, arguments=_arguments, template_spec=st.one_of(
    st.fixed_dictionaries({"arguments": _arguments}), _text, st.dictionaries(st.just("arguments"), _arguments)))
@example(ref={"name": TEMPLATE}, arguments={"parameters": [{"name": "sft-gpu", "value": "4"}]},
         template_spec={"arguments": {"parameters": [{"name": "sft-gpus", "value": "8"}]}})
def test_any_tenant_written_shape_never_fails_the_tick(ref: Any, arguments: Any, template_spec: Any) -> None:
    # What it sets and what its template declares, read before the gate writes anything on it.
    spec = template_spec if isinstance(template_spec, dict) else {}
    declared = _names(spec.get("arguments", {}).get("parameters") if isinstance(spec.get("arguments"), dict) else None)
    given_names = _names(arguments.get("parameters") if isinstance(arguments, dict) else None)
    runs_it = isinstance(ref, dict) and ref.get("name") == TEMPLATE and not ref.get("clusterScope")
    w = World()
    w.cluster.templates[("research", TEMPLATE)] = {"metadata": {"name": TEMPLATE}, "spec": copy.deepcopy(template_spec)}
    w.park("hostile", replicas=2)
    w.wf("hostile")["spec"].update(workflowTemplateRef=copy.deepcopy(ref), arguments=copy.deepcopy(arguments))
    for _ in range(7):
        out = w.tick()
        assert not out["chat"].failed, out["chat"].error
        assert w.replicas() >= 6  # its 2 replicas at most, whatever it wrote
    # Admitted only if every argument name it sets (as Argo reads them) is one its template declares.
    if runs_it and set(given_names) - set(declared):
        assert w.wf("hostile")["metadata"]["labels"].get(LABEL_STATE) == "parked"
        assert "not admitted: its template" in w.wf("hostile")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]


def _names(parameters: Any) -> list[str]:
    if not isinstance(parameters, list):
        return []
    return [p["name"] for p in parameters if isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"]]
