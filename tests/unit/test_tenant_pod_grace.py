"""A tenant's way around the grace cap (`maxGraceSeconds`), each played against the gate on the in-memory cluster.

The cap bounds how long a stop may keep serving's GPUs. The gate writes it into the grace parameter
at admission; these are the other routes to a pod's terminationGracePeriodSeconds a tenant controls,
and what must hold for each: never admitted (nor adopted) above the cap, stopped if it already runs,
its reason written on it, and the plan never reading its exit time as the cap it escaped.
"""

from typing import Any

import pytest

from offhours.scripts.cluster.grace import own_grace
from offhours.scripts.names import ANNOTATION_WAITING_REASON, EVENT_GRACE_ABOVE_CAP, GRACE_PARAMETER, STATE_ADMITTED

from .test_gate_controller import World, config

GPU = {"resources": {"limits": {"nvidia.com/gpu": "8"}}}


def _graces(wf: dict[str, Any]) -> list[Any]:
    return [p.get("value") for p in wf["spec"]["arguments"]["parameters"] if p.get("name") == GRACE_PARAMETER]


def _admitted(cap: float = 30) -> World:
    w = World(config(maxGraceSeconds=cap))
    w.park("greedy", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("greedy") == "admitted" and _graces(w.wf("greedy")) == [str(int(cap))], w.log.getvalue()
    return w


@pytest.mark.parametrize("edit", [
    pytest.param(lambda ps: [p for p in ps if p.get("name") != GRACE_PARAMETER], id="removed"),
    pytest.param(lambda ps: [p for p in ps if p.get("name") != GRACE_PARAMETER]
                 + [{"name": GRACE_PARAMETER, "valueFrom": {"configMapKeyRef": {"name": "g", "key": "g"}}}],
                 id="valueFrom"),
    pytest.param(lambda ps: [{"name": GRACE_PARAMETER, "value": "86400"}, *ps], id="a second one, first"),
    pytest.param(lambda ps: [p if p.get("name") != GRACE_PARAMETER else {**p, "value": "3e1"} for p in ps],
                 id="not a whole number"),
])
def test_an_admitted_jobs_grace_parameter_rewritten_out_of_the_cap_is_stopped_and_named(edit: Any) -> None:
    """The fault: a tenant rewrites the admitted workflow's grace parameter so that it no longer reads within the cap."""
    w = _admitted()
    args = w.wf("greedy")["spec"]["arguments"]
    args["parameters"] = edit(args["parameters"])
    out = w.tick(chat=1)["chat"]
    assert w.state("greedy") == "preempted" and w.wf("greedy")["spec"]["shutdown"] == "Stop", w.log.getvalue()
    assert out.plan is not None and any("greedy was admitted but its termination-grace-seconds" in n
                                        for n in out.plan.notes)
    assert w.replicas() == 8  # what it was lent is serving's again in the same tick
    events = [e for e in w.cluster.events if e.reason == EVENT_GRACE_ABOVE_CAP]
    assert len(events) == 1 and events[0].warning and "research/greedy" in events[0].message
    assert w.state("greedy-p1") == "parked"  # the run goes on from its copy


def test_the_copy_of_a_job_stopped_for_its_grace_is_admitted_again_with_the_cap() -> None:
    """The fault: a raised grace; what survives: the run, from its copy, capped again before any pod of it exists."""
    w = _admitted()
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "86400"
    w.tick(chat=1)
    w.cluster.finish("research", "greedy", "Failed")  # Argo ended the stopped workflow
    for _ in range(8):
        w.tick(chat=1)
    assert w.state("greedy-p1") == "admitted" and _graces(w.wf("greedy-p1")) == ["30"], w.log.getvalue()
    assert len([e for e in w.cluster.events if e.reason == EVENT_GRACE_ABOVE_CAP]) == 1  # said once, not every tick


def test_the_plan_reads_a_raised_grace_as_it_is_not_as_the_cap() -> None:
    """The fault: the plan took a job's exit time as capped at 30 s while its pods may take a day to stop."""
    w = _admitted()
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "86400"
    out = w.tick(chat=1)["chat"]
    assert out.plan is not None
    (stopped,) = [j for j in out.plan.stop if j.name == "greedy"]
    assert stopped.exit_seconds == 86400.0


def test_a_grace_lowered_within_the_cap_is_left_alone_and_seen_without_a_request_per_workflow() -> None:
    """No false alarm, and no cost: the check reads the workflows the tick lists anyway (no GET per workflow)."""
    w = _admitted()
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "10"
    before = len(w.cluster.calls)
    w.tick(chat=1)
    calls = w.cluster.calls[before:]
    assert w.state("greedy") == "admitted" and not [c for c in calls if c.startswith(("get-workflow", "stop"))], calls


def test_lowering_the_cap_in_the_config_stops_the_jobs_above_the_new_one() -> None:
    """An operator lowers maxGraceSeconds: pods admitted under the old cap would outlast the new one; stopped, parked."""
    w = _admitted(cap=120)
    w.gate.config = config(maxGraceSeconds=30)
    w.tick(chat=1)
    assert w.state("greedy") == "preempted" and w.state("greedy-p1") == "parked", w.log.getvalue()


def _own(w: World, name: str, spec: dict[str, Any]) -> None:
    """Turn a parked workflow into one of its own templates (no offhours WorkflowTemplate)."""
    own = w.wf(name)["spec"]
    own.pop("workflowTemplateRef")
    own.update(spec)


OWN_GRACES = {
    "a YAML patch": {"entrypoint": "main", "templates": [
        {"name": "main", "podSpecPatch": "terminationGracePeriodSeconds: 86400\n", "container": GPU}]},
    "a parameterised patch": {"entrypoint": "main", "templates": [
        {"name": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": {{inputs.parameters.g}}}',
         "inputs": {"parameters": [{"name": "g", "value": "10"}]}, "container": GPU}]},
    "templateDefaults": {"entrypoint": "main", "templateDefaults": {
        "podSpecPatch": '{"terminationGracePeriodSeconds": 600}'}, "templates": [{"name": "main", "container": GPU}]},
    "a key in another case (Go's JSON matches it)": {"entrypoint": "main", "podSpecPatch":
                                                     '{"TerminationGracePeriodSeconds": 600}',
                                                     "templates": [{"name": "main", "container": GPU}]},
    "the key twice, the last one long": {"entrypoint": "main", "podSpecPatch":
                                         '{"terminationGracePeriodSeconds": 10, "terminationGracePeriodSeconds": 600}',
                                         "templates": [{"name": "main", "container": GPU}]},
    "a $patch directive": {"entrypoint": "main", "templates": [
        {"name": "main", "podSpecPatch": '{"$patch": "replace", "containers": []}', "container": GPU}]},
    "a YAML merge key": {"entrypoint": "main", "templates": [
        {"name": "main", "podSpecPatch": "a: &g {terminationGracePeriodSeconds: 600}\n<<: *g\n", "container": GPU}]},
    "an inline step template": {"entrypoint": "main", "templates": [{"name": "main", "steps": [[
        {"name": "s", "inline": {"container": GPU, "podSpecPatch": '{"terminationGracePeriodSeconds": 600}'}}]]}]},
    "a resource template's pod": {"entrypoint": "main", "templates": [{"name": "main", "resource": {
        "action": "create", "manifest": "kind: Pod\nspec:\n  terminationGracePeriodSeconds: 600\n"}}]},
    "a manifest from an artifact": {"entrypoint": "main", "templates": [{"name": "main", "resource": {
        "action": "create", "manifestFrom": {"artifact": {"name": "pod"}}}}]},
    "a string, not a number": {"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": "20"}',
                               "templates": [{"name": "main", "container": GPU}]},
    "nothing at all, under a cap below Kubernetes' default": {"entrypoint": "main",
                                                              "templates": [{"name": "main", "container": GPU}]},
}


@pytest.mark.parametrize("spec", list(OWN_GRACES.values()), ids=list(OWN_GRACES))
def test_a_workflow_whose_own_spec_sets_its_pods_grace_above_the_cap_stays_parked_saying_why(
        spec: dict[str, Any]) -> None:
    """The fault: a parked workflow of its own templates gives its pods a grace the parameter cap cannot bound."""
    w = World(config(maxGraceSeconds=20))
    w.park("own", replicas=2)
    _own(w, "own", spec)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("own") == "parked" and w.replicas() == 8, w.log.getvalue()
    reason = w.wf("own")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason.startswith("not admitted: its pods' grace period is its own") and "maxGraceSeconds 20" in reason
    assert "at most 20 s" in reason  # what to change


def test_a_workflow_of_its_own_templates_within_the_cap_is_admitted() -> None:
    """No false refusal: a whole-number grace within the cap, set for every pod, is admitted."""
    w = World(config(maxGraceSeconds=30))
    w.park("own", replicas=2)
    _own(w, "own", {"entrypoint": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 20}',
                    "templates": [{"name": "main", "container": GPU}]})
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("own") == "admitted", w.log.getvalue()


def test_an_offhours_template_run_with_its_own_workflow_wide_patch_is_refused_too() -> None:
    """The fault: a workflow of the offhours template adds a workflow-wide podSpecPatch (Argo merges it into every pod)."""
    w = World(config(maxGraceSeconds=30))
    w.park("patched", replicas=2)
    w.wf("patched")["spec"]["podSpecPatch"] = '{"terminationGracePeriodSeconds": 86400}'
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("patched") == "parked", w.log.getvalue()


def test_a_running_workflow_with_its_own_grace_is_not_adopted_but_stopped_and_parked() -> None:
    """The fault: `argo submit` of a workflow of its own templates, running at once without admission."""
    w = World(config(maxGraceSeconds=30))
    for _ in range(6):
        w.tick(chat=1)
    w.park("direct", replicas=2, state="")
    _own(w, "direct", OWN_GRACES["a YAML patch"])
    out = w.tick(chat=1)["chat"]
    assert out.plan is not None and not out.plan.adopt and w.state("direct") == "preempted", w.log.getvalue()
    assert w.state("direct-p1") == "parked" and w.replicas() == 8


def test_a_patch_added_to_an_admitted_workflow_gets_it_stopped() -> None:
    """The fault: a tenant adds a workflow-wide podSpecPatch to its admitted workflow (later pods would carry it)."""
    w = _admitted()
    w.wf("greedy")["spec"]["podSpecPatch"] = '{"terminationGracePeriodSeconds": 86400}'
    w.tick(chat=1)
    assert w.state("greedy") == "preempted" and w.replicas() == 8, w.log.getvalue()


def test_a_spec_too_large_to_walk_reads_as_above_any_cap() -> None:
    """Bounded work: a hostile spec of a million values is read to a bound, and that reads as unreadable."""
    wf = {"spec": {"workflowTemplateRef": {"name": "x"}, "templates": [{"name": f"t{i}"} for i in range(30_000)]}}
    found = own_grace(wf)
    assert found is not None and found[0] == float("inf")


def test_the_yaml_a_workflow_may_make_the_gate_parse_is_bounded_and_beyond_it_reads_as_above_any_cap() -> None:
    """Bounded work: a grace is read while the tick observes (before serving's writes), so one workflow's YAML is
    read up to a bound: a long YAML patch, or many short ones, read as unreadable (JSON, parsed in C, is not
    refused for its length below 64 KiB)."""
    short = "containers: []\n"
    long_yaml = "containers:\n" + "".join(f"- name: c{i}\n" for i in range(400))
    assert own_grace({"spec": {"workflowTemplateRef": {"name": "x"}, "podSpecPatch": short}}) is None
    assert own_grace({"spec": {"workflowTemplateRef": {"name": "x"}, "podSpecPatch": long_yaml}}) == (
        float("inf"), "spec.podSpecPatch")
    many = {"workflowTemplateRef": {"name": "x"}, "templates": [{"name": f"t{i}", "podSpecPatch": short * 20}
                                                                 for i in range(40)]}
    found = own_grace({"spec": many})
    assert found is not None and found[0] == float("inf")
    as_json = '{"containers": [' + ",".join(f'{{"name": "c{i}"}}' for i in range(2000)) + "]}"
    assert own_grace({"spec": {"workflowTemplateRef": {"name": "x"}, "podSpecPatch": as_json}}) is None


def test_a_stop_for_the_grace_that_fails_is_retried_and_its_event_comes_once_it_is_done() -> None:
    """The fault: the API refuses the stop of the job whose grace was raised; the next tick stops it, and says so once."""
    from offhours.scripts.cluster.base import ClusterError

    w = _admitted()
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "86400"
    w.cluster.fail_next["stop greedy"] = [ClusterError("stop workflow research/greedy: HTTP 503")] * 6
    w.tick(chat=1)
    assert w.state("greedy") == STATE_ADMITTED and w.replicas() == 8  # serving has its replicas back regardless
    assert not [e for e in w.cluster.events if e.reason == EVENT_GRACE_ABOVE_CAP]
    w.cluster.fail_next.clear()
    w.tick(chat=1)
    assert w.state("greedy") == "preempted" and len(
        [e for e in w.cluster.events if e.reason == EVENT_GRACE_ABOVE_CAP]) == 1, w.log.getvalue()
