"""The gate's fail-safe, its admission record, configuration changes, tenant values and the Lease's clock.

Each test names the fault it plays in its first line and checks what survived.
"""

import json

import pytest

from offhours.scripts.cluster.base import ClusterError, Deployment
from offhours.scripts.cluster.lease import LeaseObserver
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.names import ANNOTATION_BORROWED_FROM, ANNOTATION_PRIORITY, EVENT_SERVICE_RELEASED, LABEL_STATE
from tests.support.templates import with_offhours_parts
from tests.unit.test_gate_controller import TICK, World, config

LOW = 10.0


def scales(w: World) -> list[int]:
    return [int(c.split(" ")[2]) for c in w.cluster.calls if c.startswith("scale chat ")]


# -- the fail-safe -------------------------------------------------------------------------------------
def test_the_fail_safe_never_restores_a_baseline_of_another_incarnation() -> None:
    """Fault: the Deployment is deleted and recreated at 8 while 4 were lent, then three ticks fail."""
    w = World(replicas=12)
    for i in range(2):
        w.park(f"job-{i}", replicas=2)
    for _ in range(7):
        w.tick(chat=LOW)
    assert w.replicas() == 8 and w.record().baseline == 12
    w.cluster.add_deployment("serving", "chat", 8)  # a new incarnation (a new UID)
    for _ in range(3):
        w.cluster.fail_next["write-state chat"] = [ClusterError("HTTP 503 Service Unavailable")]
        w.tick(chat=LOW)
    assert w.replicas() == 8 and 12 not in scales(w), w.log.getvalue()
    assert "the Deployment is a new one: nothing the gate lent is on it, nothing to restore" in w.log.getvalue()
    w.tick(chat=LOW)
    record = w.record()
    assert record.baseline == 8 and record.deployment_uid == w.cluster.deployments[("serving", "chat")].uid


class Relabelled(MemoryCluster):
    """`code` resolves to chat's Deployment at run time (its label moved): a config check cannot see it."""

    relabelled: bool = False

    def deployment(self, namespace: str, service: str, name: str | None = None) -> Deployment:
        return super().deployment(namespace, "chat" if service == "code" and self.relabelled else service, name)


def test_two_services_on_one_deployment_never_lower_it_in_their_fail_safes() -> None:
    """Fault: two configured services resolve to one Deployment, each with its own (stale) memory of it."""
    w = World()
    w.cluster = Relabelled(deployments=w.cluster.deployments, pods=w.cluster.pods, templates=w.cluster.templates)
    w.gate.cluster = w.cluster
    w.lend(2)  # chat at 4: baseline 8, 4 lent
    w.cluster.relabelled = True
    stored = json.loads(w.cluster.states[("serving", "chat")])
    w.cluster.states[("serving", "code")] = json.dumps({**stored, "baseline": 6, "admitted": {}})  # code: its baseline 6
    for _ in range(4):
        w.tick(chat=LOW, code=LOW)
    assert w.replicas() == 8, w.log.getvalue()
    assert scales(w) == sorted(scales(w)) and 6 not in scales(w)[-3:]  # never lowered after the lend


# -- what counts as lent ---------------------------------------------------------------------------------
def test_a_copied_admission_mark_lends_nothing() -> None:
    """Fault: a tenant copies the admission mark (the Deployment's UID) onto its own running workflow."""
    w = World()
    w.lend(1)
    w.park("forged", replicas=2)
    wf = w.wf("forged")
    wf["spec"].pop("suspend")
    wf["metadata"]["labels"][LABEL_STATE] = "admitted"
    wf["metadata"]["annotations"][ANNOTATION_BORROWED_FROM] = w.cluster.deployments[("serving", "chat")].uid
    out = w.tick(chat=100.0)  # full load: everything lent is reclaimed
    assert out["chat"].decision is not None and out["chat"].decision.lent == 2  # job-0 only
    assert w.replicas() == 8 and w.wf("forged")["spec"]["shutdown"] == "Stop"
    assert "forged runs without admission" in " ".join(out["chat"].plan.notes)


def test_a_service_removed_from_the_config_while_lending_gets_its_replicas_back() -> None:
    """Fault: chat is removed from the gate configuration while 4 of its 8 replicas are lent."""
    w = World()
    w.lend(2)
    assert w.replicas() == 4
    only_code = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                              "metrics": {"source": "direct", "maxAgeSeconds": 180},
                              "services": {"code": {"capacity": {"requestsPerSecond": 10}}}})
    w.gate = Gate(only_code, w.cluster, w.source, clock=lambda: w.now, out=w.log, monotonic=lambda: w.now)
    # The ledger's return of chat (what was lowered, by object) and the release of its record both fail once.
    w.cluster.fail_next["find-deployment"] = [ClusterError("HTTP 503 Service Unavailable")] * 2
    w.tick()
    assert w.replicas() == 4 and ("serving", "chat") in w.cluster.states  # a failure keeps the record for the next tick
    assert w.cluster.ledgers["serving"]  # and the ledger's entry
    w.tick()
    assert w.replicas() == 8 and ("serving", "chat") not in w.cluster.states and not w.cluster.ledgers["serving"]
    events = [e for e in w.cluster.events if e.reason == EVENT_SERVICE_RELEASED]
    assert [(e.kind, e.name, e.warning) for e in events] == [("Deployment", "chat", True)] * 2
    assert "given back from 4 to 8 (its baseline 8)" in events[0].message, events[0].message
    assert "no longer in the gate configuration" in events[1].message, events[1].message
    assert [w.state(j) for j in ("job-0", "job-1", "job-0-p1", "job-1-p1")] == ["preempted"] * 2 + ["parked"] * 2
    w.tick()
    assert [e.reason for e in w.cluster.events].count(EVENT_SERVICE_RELEASED) == 2  # forgotten once given back


def test_a_service_removed_after_an_owner_scaled_it_keeps_the_owners_change() -> None:
    """Fault: on-call raised the removed service by hand while it lent: its baseline moves by as much."""
    w = World()
    w.lend(2)
    w.cluster.deployments[("serving", "chat")].replicas = 5  # on-call added one
    w.gate = Gate(parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                                "metrics": {"source": "direct", "maxAgeSeconds": 180},
                                "services": {"code": {"capacity": {"requestsPerSecond": 10}}}}),
                  w.cluster, w.source, clock=lambda: w.now, out=w.log, monotonic=lambda: w.now)
    w.tick()
    assert w.replicas() == 9


# -- tenant-written values -------------------------------------------------------------------------------
def test_a_decoy_under_the_copys_name_never_blocks_a_stop() -> None:
    """Fault: a tenant creates a workflow under the name the gate's parked copy would take."""
    w = World()
    w.lend(1)
    w.park("job-0-p1", svc="code", replicas=1)  # the decoy, on another service
    w.tick(chat=100.0)
    assert w.wf("job-0")["spec"]["shutdown"] == "Stop" and w.replicas() == 8
    copies = [n for (_, n), wf in w.cluster.workflows.items()
              if wf["metadata"]["labels"].get("offhours.io/copy-of") == w.wf("job-0")["metadata"]["uid"]]
    assert len(copies) == 1 and copies[0].startswith("job-0-p1-")
    assert w.wf("job-0-p1")["metadata"]["labels"]["offhours.io/service"] == "code"  # the decoy untouched


@pytest.mark.parametrize("value", ["1000001", "-5000", "99999"])
def test_a_priority_out_of_bounds_is_that_workflows_problem_and_nothing_elses(value: str) -> None:
    """Fault: a tenant writes an absurd priority on its parked workflow to jump the queue."""
    w = World()
    w.park("greedy", replicas=2)
    w.park("honest", replicas=2)
    w.wf("greedy")["metadata"]["annotations"][ANNOTATION_PRIORITY] = value
    for _ in range(7):
        w.tick(chat=LOW)
    assert w.state("honest") == "admitted" and w.state("greedy") == "parked"
    assert "is outside -1000..1000" in w.wf("greedy")["metadata"]["annotations"]["offhours.io/waiting-reason"]


def test_submit_refuses_a_priority_out_of_bounds() -> None:
    template = with_offhours_parts({"metadata": {"name": "offhours-job"}, "spec": {"arguments": {"parameters": [
        {"name": "service", "value": "chat"}, {"name": "run-id"}]}}})
    with pytest.raises(SubmitError, match=r"^priority must be a whole number from -1000 to 1000, got 5000$"):
        parked_workflow(template, {"run-id": "r1"}, "research", priority=5000)
    assert parked_workflow(template, {"run-id": "r1"}, "research", priority=1000)["metadata"]["annotations"]


# -- the Lease's clock -----------------------------------------------------------------------------------
def test_a_live_lease_is_never_taken_whatever_the_holders_clock_says() -> None:
    """Fault: the holder's clock runs 2 minutes behind ours (its renewTime looks 2 minutes old)."""
    local = [0.0]
    observer = LeaseObserver(lambda: local[0])
    holder_clock = -120.0
    for _ in range(20):  # the holder renews every 20 s; a 60 s Lease
        record = ("gate/other", holder_clock + local[0], 0.0, 60, 0)
        assert not observer.expired(record, 60)
        local[0] += 20.0
    record = ("gate/other", holder_clock + local[0], 0.0, 60, 0)  # then it dies: the record stops changing
    taken = []
    for _ in range(5):
        taken.append(observer.expired(record, 60))
        local[0] += 20.0
    assert taken == [False, False, False, False, True]  # observed unchanged for more than 60 s on our clock


def test_a_new_process_waits_a_whole_lease_before_taking_a_dead_holders() -> None:
    observer = LeaseObserver(lambda: 1000.0)
    assert not observer.expired(("gate/dead", 1.0, 1.0, 60, 3), 60)  # however old its renewTime looks


def test_the_gate_config_of_these_tests_has_both_services() -> None:
    assert [p.name for p in config().services] == ["chat", "code"] and TICK == 60.0


def test_the_admission_record_round_trips_and_a_forged_one_is_no_memory() -> None:
    """Fault: someone with rights on the state ConfigMap writes an admission record that is not one."""
    from offhours.scripts.policy.record import ServiceRecord

    record = ServiceRecord(deployment_uid="u", baseline=8, admitted={"wf-1": 2, "wf-2": 1}, deployment="chat")
    again = ServiceRecord.from_json(record.to_json())
    assert (again.admitted, again.lent, again.deployment) == ({"wf-1": 2, "wf-2": 1}, 3, "chat")
    assert ServiceRecord.from_json('{"baseline":8}').admitted is None  # before the gate kept one: the marks decide
    for bad in ('{"baseline":8,"admitted":{"wf":-1}}', '{"baseline":8,"admitted":{"wf":"2"}}',
                '{"baseline":8,"admitted":["wf"]}', '{"baseline":8,"admitted":{"wf":1e9}}'):
        assert ServiceRecord.from_json(bad) == ServiceRecord(), bad


def test_a_first_name_that_is_no_object_name_never_blocks_the_park() -> None:
    """Fault: a tenant writes a first-name annotation the API server would refuse as a name."""
    from offhours.scripts.cluster.workflow import build_parked_copy

    original = {"metadata": {"name": "train", "uid": "u1", "labels": {},
                             "annotations": {"offhours.io/first-name": "Not A Name/../x"}}, "spec": {}}
    assert build_parked_copy(original)["metadata"]["name"] == "train-p1"
