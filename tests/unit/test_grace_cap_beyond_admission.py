"""Ways a job's pods could still carry a grace above the service's `maxGraceSeconds` after the gate let it run.

The cap is written by `admit` (a parked job resumed) and `adopt` (running without admission, and it fits).
The faults: a tenant rewriting the parameter after the admission, and a workflow of its own templates
setting its pods' grace itself, were let run with whatever grace they carried while the plan read their
exit time as capped. Both are now the job's problem (`policy.grace`); more routes in test_tenant_pod_grace.py.
"""

from offhours.scripts.cluster.workflow import GRACE_PARAMETER

from .test_gate_controller import World, config


def _grace_values(wf: dict) -> list:  # type: ignore[type-arg]
    return [p.get("value") for p in wf["spec"]["arguments"]["parameters"]
            if isinstance(p, dict) and p.get("name") == GRACE_PARAMETER]


def test_an_adopted_job_is_capped_like_an_admitted_one() -> None:
    w = World(config(maxGraceSeconds=30))
    for _ in range(6):
        w.tick(chat=1)  # the load has stayed low for the stabilisation window: the next tick may lend
    w.park("direct", replicas=2, state="")  # argo submit --from: running, never parked
    w.wf("direct")["spec"]["arguments"]["parameters"].append({"name": GRACE_PARAMETER, "value": "86400"})
    w.tick(chat=1)
    assert w.state("direct") == "admitted", w.log.getvalue()  # adopted: it now holds 2 lent replicas
    assert w.replicas() == 6
    assert _grace_values(w.wf("direct")) == ["30"]


def test_a_grace_raised_after_admission_is_capped_or_stopped() -> None:
    w = World(config(maxGraceSeconds=30))
    w.park("greedy", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("greedy") == "admitted" and _grace_values(w.wf("greedy")) == ["30"]
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "86400"  # kubectl patch: Argo substitutes the workflow's arguments into every later pod
    w.tick(chat=1)
    assert _grace_values(w.wf("greedy")) == ["30"] or w.state("greedy") != "admitted", w.log.getvalue()


def test_a_workflow_with_its_own_pod_grace_is_not_admitted_above_the_cap() -> None:
    w = World(config(maxGraceSeconds=30))
    w.park("own", replicas=2)
    spec = w.wf("own")["spec"]
    spec.pop("workflowTemplateRef")
    spec["entrypoint"] = "main"
    spec["templates"] = [{"name": "main", "podSpecPatch": '{"terminationGracePeriodSeconds": 86400}',
                          "container": {"image": "tenant/trainer", "resources": {"limits": {"nvidia.com/gpu": "8"}}}}]
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("own") == "parked", w.log.getvalue()
