"""The `Cluster` contract: the same checks run on the in-memory cluster and on the real API server.

A harness creates the objects (an inference Deployment, parked workflows) the way each world
does; the checks only use the `Cluster` interface.
"""

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import pytest

from offhours.scripts.cluster.base import Cluster, ClusterError, ServingWrite
from offhours.scripts.policy.plan import ADMITTED, PARKED


class Harness(Protocol):
    cluster: Cluster
    serving: str
    research: str

    def add_service(self, name: str, replicas: int) -> None: ...
    def add_parked(self, name: str, service: str, replicas: int) -> None: ...
    def read_workflow(self, name: str) -> dict[str, Any]: ...
    def replicas(self, deployment: str) -> int: ...
    def set_replicas(self, deployment: str, replicas: int) -> None: ...  # another writer (an on-call human)
    def add_hpa(self, deployment: str, low: int, high: int) -> None: ...
    def set_max_replicas(self, deployment: str, high: int) -> None: ...  # another writer (the HPA's owner)
    def add_stateful_set(self, name: str, replicas: int) -> None: ...  # a StatefulSet labelled app=<name>
    def scale_of(self, kind: str, name: str) -> int: ...  # its /scale's spec.replicas, read by the harness
    def set_scale(self, kind: str, name: str, replicas: int) -> None: ...  # another writer, on /scale
    def add_config_map(self, name: str) -> None: ...  # an object of a kind without a scale subresource
    def controlled_replica_set(self, deployment: str) -> str: ...  # the name of a Deployment's ReplicaSet


def deployment_found_by_label_scaled_and_its_state_kept(h: Harness) -> None:
    h.add_service("contract-svc", 3)
    dep = h.cluster.deployment(h.serving, "contract-svc")
    assert dep.name == "contract-svc" and dep.replicas == 3 and dep.uid
    assert h.cluster.autoscaler(dep) is None
    assert h.cluster.lower_serving(dep, 3, 2) == ServingWrite(2)
    again = h.cluster.deployment(h.serving, "contract-svc")
    assert again.replicas == 2 == h.replicas("contract-svc") and again.uid == dep.uid
    assert h.cluster.read_state(h.serving, "contract-svc") is None
    h.cluster.write_state(h.serving, "contract-svc", '{"baseline":3}')
    h.cluster.write_state(h.serving, "contract-svc", '{"baseline":4}')  # the second write updates
    assert h.cluster.read_state(h.serving, "contract-svc") == '{"baseline":4}'


def serving_writes_test_the_value_they_read(h: Harness) -> None:
    """A lower carries a test of the replicas its decision read: stale, refused with the value found; fresh, applied.

    A raise is max(what is there, what is needed): a stale read costs a read again, never the raise.
    """
    h.add_service("contract-svc7", 4)
    dep = h.cluster.deployment(h.serving, "contract-svc7")
    h.set_replicas("contract-svc7", 6)  # an on-call engineer, after the gate read 4
    assert h.cluster.lower_serving(dep, 4, 2) == ServingWrite(6, conflict=True)
    assert h.replicas("contract-svc7") == 6 and dep.replicas == 6  # nothing written; the caller holds the value found
    assert h.cluster.lower_serving(dep, 6, 3) == ServingWrite(3)
    assert h.replicas("contract-svc7") == 3
    h.set_replicas("contract-svc7", 5)  # raised by someone else past what the gate will raise to
    assert h.cluster.raise_serving(dep, 3, 4) == ServingWrite(5) and h.replicas("contract-svc7") == 5
    h.set_replicas("contract-svc7", 1)  # lowered by someone else after the gate read 5
    assert h.cluster.raise_serving(dep, 5 - 2, 4) == ServingWrite(4) and h.replicas("contract-svc7") == 4


def autoscaler_writes_test_the_max_they_read(h: Harness) -> None:
    """With an HPA, the gate's lower of its maxReplicas is tested as a Deployment's replicas are."""
    h.add_service("contract-svc8", 2)
    h.add_hpa("contract-svc8", 1, 6)
    dep = h.cluster.deployment(h.serving, "contract-svc8")
    scaler = h.cluster.autoscaler(dep)
    assert scaler is not None and (scaler.kind, scaler.max_replicas) == ("HorizontalPodAutoscaler", 6)
    h.set_max_replicas("contract-svc8", 9)  # its owner, after the gate read 6
    assert h.cluster.lower_serving(scaler, 6, 4) == ServingWrite(9, conflict=True) and scaler.max_replicas == 9
    assert h.cluster.lower_serving(scaler, 9, 4) == ServingWrite(4)
    h.set_max_replicas("contract-svc8", 3)
    assert h.cluster.raise_serving(scaler, 4, 6) == ServingWrite(6)
    assert h.cluster.lower_serving(scaler, 6, 5) == ServingWrite(5)  # the server holds the raise: a test of 6 applies


def the_server_time_is_the_api_servers(h: Harness) -> None:
    """What offhours dates and ages everything by: the API server's clock (here on this machine's), never going back."""
    first = h.cluster.server_time()
    h.cluster.read_state(h.serving, "contract-no-such-service")  # an answer: its Date is heard
    second = h.cluster.server_time()
    assert abs(first - time.time()) < 120 and first <= second


def parked_job_is_admitted_then_stopped(h: Harness) -> None:
    h.add_parked("contract-a", "contract-svc2", 2)
    jobs = {j.name: j for j in h.cluster.jobs(h.research, "contract-svc2")}
    assert jobs["contract-a"].state == PARKED and jobs["contract-a"].replicas == 2
    h.cluster.admit(h.research, replace(jobs["contract-a"], exit_seconds=44.6, exit_learnt=True), "uid-of-the-deployment")
    wf = h.read_workflow("contract-a")
    assert not wf["spec"].get("suspend") and wf["metadata"]["labels"]["offhours.io/state"] == "admitted"
    assert "offhours.io/admitted-at" in wf["metadata"]["annotations"]
    assert wf["metadata"]["annotations"]["offhours.io/exit-seconds"] == "45"  # its expected exit, whole seconds
    assert wf["metadata"]["annotations"]["offhours.io/borrowed-from"] == "uid-of-the-deployment"
    admitted = [j for j in h.cluster.jobs(h.research, "contract-svc2") if j.name == "contract-a"]
    assert [(j.state, j.borrowed_from) for j in admitted] == [(ADMITTED, "uid-of-the-deployment")]
    h.cluster.stop(h.research, jobs["contract-a"])
    wf = h.read_workflow("contract-a")
    assert wf["spec"]["shutdown"] == "Stop" and wf["metadata"]["labels"]["offhours.io/state"] == "preempted"
    assert "offhours.io/preempted-at" in wf["metadata"]["annotations"]
    assert "contract-a" not in {j.name for j in h.cluster.jobs(h.research, "contract-svc2")}


def admission_caps_the_grace_in_the_same_write(h: Harness) -> None:
    """With the service's cap, the resume also writes the grace parameter its pods take: at most the cap."""
    h.add_parked("contract-g", "contract-svc4", 1)
    [job] = [j for j in h.cluster.jobs(h.research, "contract-svc4") if j.name == "contract-g"]
    h.cluster.admit(h.research, job, "uid-of-the-deployment", max_grace_seconds=25.9)
    wf = h.read_workflow("contract-g")
    params = {p["name"]: p.get("value") for p in wf["spec"]["arguments"]["parameters"]}
    assert not wf["spec"].get("suspend") and wf["metadata"]["labels"]["offhours.io/state"] == "admitted"
    assert params["termination-grace-seconds"] == "25"  # whole seconds, rounded down: never above the cap
    assert params["service"] == "contract-svc4" and params["replicas"] == "1"  # the rest kept


def parking_a_copy_is_idempotent(h: Harness) -> None:
    h.add_parked("contract-b", "contract-svc3", 1)
    job = next(j for j in h.cluster.jobs(h.research, "contract-svc3") if j.name == "contract-b")
    first = h.cluster.park_copy(h.research, job)
    second = h.cluster.park_copy(h.research, job, {first.uid})  # the gate recorded making it: found again
    assert first == second and first.name == "contract-b-p1"
    copy = h.read_workflow(first.name)
    assert copy["metadata"]["uid"] == first.uid
    assert copy["spec"]["suspend"] is True and copy["metadata"]["annotations"]["offhours.io/preemptions"] == "1"
    assert copy["metadata"]["annotations"]["offhours.io/parked-from"] == "contract-b"
    assert copy["metadata"]["labels"]["offhours.io/copy-of"] == h.read_workflow("contract-b")["metadata"]["uid"]
    names = [j.name for j in h.cluster.jobs(h.research, "contract-svc3")]
    assert names.count("contract-b-p1") == 1
    # A decoy under the copy's usual name is never taken for the copy, and never fails the park: the copy
    # goes under a name the API server makes unique; parking again finds it by its link and its UID. A
    # decoy that copies the link too (labels are anyone's to write) is no copy the gate made either.
    h.add_parked("contract-c", "contract-svc3", 1)
    h.add_parked("contract-c-p1", "contract-svc3", 1)
    decoy = h.read_workflow("contract-c-p1")
    job = next(j for j in h.cluster.jobs(h.research, "contract-svc3") if j.name == "contract-c")
    made = h.cluster.park_copy(h.research, job)
    assert made.name.startswith("contract-c-p1-") and h.cluster.park_copy(h.research, job, {made.uid}) == made
    original_uid = h.read_workflow("contract-c")["metadata"]["uid"]
    assert h.read_workflow(made.name)["metadata"]["labels"]["offhours.io/copy-of"] == original_uid
    assert h.read_workflow("contract-c-p1")["metadata"]["labels"] == decoy["metadata"]["labels"]
    h.cluster.delete_workflow(h.research, made.name)
    h.cluster.delete_workflow(h.research, "contract-c-p1")
    h.cluster.delete_workflow(h.research, "contract-c-p1")  # deleting what is gone is success
    assert h.cluster.workflow(h.research, "contract-c-p1") is None


def a_stop_is_of_the_workflow_listed_never_of_one_made_again_under_its_name(h: Harness) -> None:
    """Deleted and made again under its name between the list and the stop: the new workflow is not stopped."""
    h.add_parked("contract-r", "contract-svc5", 1)
    [listed] = [j for j in h.cluster.jobs(h.research, "contract-svc5") if j.name == "contract-r"]
    assert listed.uid
    h.cluster.delete_workflow(h.research, "contract-r")
    deadline = time.monotonic() + 30  # a real API server may take a moment to finish the delete
    while h.cluster.workflow(h.research, "contract-r") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    h.add_parked("contract-r", "contract-svc5", 1)
    again = h.read_workflow("contract-r")
    assert again["metadata"]["uid"] != listed.uid
    try:
        h.cluster.stop(h.research, listed)
    except ClusterError:
        pass  # refused: the next tick decides on the workflow it lists then
    wf = h.read_workflow("contract-r")
    assert wf["metadata"]["uid"] == again["metadata"]["uid"] and not wf["spec"].get("shutdown"), wf["spec"]
    assert wf["metadata"]["labels"]["offhours.io/state"] == "parked"
    [new] = [j for j in h.cluster.jobs(h.research, "contract-svc5") if j.name == "contract-r"]
    h.cluster.stop(h.research, new)  # the workflow listed now is stopped
    assert h.read_workflow("contract-r")["spec"]["shutdown"] == "Stop"
    h.cluster.delete_workflow(h.research, "contract-r")


def a_workflow_is_adopted_and_its_waiting_reason_written(h: Harness) -> None:
    """Adopting marks the workflow admitted against the Deployment and drops its waiting reason; annotating merges."""
    h.add_parked("contract-d", "contract-svc6", 1)
    [job] = [j for j in h.cluster.jobs(h.research, "contract-svc6") if j.name == "contract-d"]
    h.cluster.annotate_workflow(h.research, "contract-d", {"offhours.io/waiting-reason": "serving needs it"},
                                {"offhours.io/contract": "kept"})
    wf = h.read_workflow("contract-d")
    assert wf["metadata"]["annotations"]["offhours.io/waiting-reason"] == "serving needs it"
    assert wf["metadata"]["labels"]["offhours.io/contract"] == "kept"
    assert wf["metadata"]["labels"]["offhours.io/service"] == "contract-svc6"  # a merge: the rest kept
    h.cluster.adopt(h.research, job, "uid-of-the-deployment")
    wf = h.read_workflow("contract-d")
    assert wf["metadata"]["labels"]["offhours.io/state"] == "admitted"
    assert wf["metadata"]["annotations"]["offhours.io/borrowed-from"] == "uid-of-the-deployment"
    assert "offhours.io/waiting-reason" not in wf["metadata"]["annotations"]
    assert wf["metadata"]["labels"]["offhours.io/contract"] == "kept"
    h.cluster.delete_workflow(h.research, "contract-d")


def the_gates_records_are_listed_and_deleted(h: Harness) -> None:
    """Every record is listed by its service (with and without its text); a deleted one is gone, deleting it again
    is success."""
    h.cluster.write_state(h.serving, "contract-rec1", '{"baseline":5}')
    h.cluster.write_state(h.serving, "contract-rec2", '{"baseline":6}')
    assert {"contract-rec1", "contract-rec2"} <= set(h.cluster.state_services(h.serving))
    records = h.cluster.state_records(h.serving)
    assert (records["contract-rec1"], records["contract-rec2"]) == ('{"baseline":5}', '{"baseline":6}')
    h.cluster.delete_state(h.serving, "contract-rec1")
    h.cluster.delete_state(h.serving, "contract-rec1")
    assert "contract-rec1" not in h.cluster.state_services(h.serving)
    assert h.cluster.read_state(h.serving, "contract-rec1") is None
    h.cluster.delete_state(h.serving, "contract-rec2")


def missing_workflow_is_none(h: Harness) -> None:
    assert h.cluster.workflow(h.research, "contract-no-such-workflow") is None


def lease_admits_one_writer_at_a_time(h: Harness) -> None:
    assert h.cluster.acquire_lease(h.serving, "contract/one", 30)
    assert h.cluster.acquire_lease(h.serving, "contract/one", 30)  # renewing is fine
    assert not h.cluster.acquire_lease(h.serving, "contract/two", 30)
    h.cluster.release_lease(h.serving, "contract/one")
    assert h.cluster.acquire_lease(h.serving, "contract/two", 30)
    h.cluster.release_lease(h.serving, "contract/two")


def lease_notes_are_written_only_by_the_holder_and_survive_renewals(h: Harness) -> None:
    assert h.cluster.acquire_lease(h.serving, "contract/one", 30)
    assert h.cluster.note_on_lease(h.serving, "contract/one", "chat", '{"applied":9}')
    assert not h.cluster.note_on_lease(h.serving, "contract/two", "code", "{}")  # not the holder: nothing written
    assert h.cluster.acquire_lease(h.serving, "contract/one", 30)  # a renewal keeps the notes
    assert h.cluster.lease_notes(h.serving) == {"chat": '{"applied":9}'}
    assert h.cluster.note_on_lease(h.serving, "contract/one", "chat", None)
    assert h.cluster.note_on_lease(h.serving, "contract/one", "chat", None)  # removing what is gone is fine
    assert h.cluster.lease_notes(h.serving) == {}
    h.cluster.release_lease(h.serving, "contract/one")


def a_stateful_set_is_scaled_through_its_scale_and_its_pods_found_by_its_selector(h: Harness) -> None:
    """Any kind with /scale, as a Deployment: read, lowered and raised only through its scale, tested on spec.replicas.

    Its pods are the ones its scale's status.selector selects; an HPA of a Deployment of the same name is not its own.
    """
    h.add_stateful_set("contract-sts", 2)
    h.add_hpa("contract-sts", 1, 5)  # an HPA of the Deployment contract-sts (none exists): not the StatefulSet's
    text = "apps/v1/StatefulSet/contract-sts"
    target = h.cluster.deployment(h.serving, "contract-sts", text)
    assert (target.kind, target.name, target.replicas, target.text) == ("StatefulSet", "contract-sts", 2, text)
    assert target.uid and "app=contract-sts" in target.selector
    assert h.cluster.autoscaler(target) is None
    assert sorted(p.name for p in h.cluster.ready_pods(target)) == ["contract-sts-0", "contract-sts-1"]
    h.set_scale("StatefulSet", "contract-sts", 3)  # a human, after the gate read 2
    assert h.cluster.lower_serving(target, 2, 1) == ServingWrite(3, conflict=True)
    assert h.scale_of("StatefulSet", "contract-sts") == 3 and target.replicas == 3
    assert h.cluster.lower_serving(target, 3, 1) == ServingWrite(1) and h.scale_of("StatefulSet", "contract-sts") == 1
    assert h.cluster.raise_serving(target, 1, 2) == ServingWrite(2) and h.scale_of("StatefulSet", "contract-sts") == 2
    found = h.cluster.find_deployment(h.serving, text)
    assert found is not None and (found.uid, found.kind) == (target.uid, "StatefulSet")
    assert h.cluster.find_deployment(h.serving, "apps/v1/StatefulSet/contract-no-such-sts") is None


def a_target_the_gate_must_not_scale_is_refused_naming_it(h: Harness) -> None:
    """A kind without /scale, and an object another controller owns (named, with the object to configure instead)."""
    h.add_config_map("contract-cm")
    with pytest.raises(ClusterError, match=r"^ConfigMap contract-cm \(v1\): kind ConfigMap has no scale subresource"):
        h.cluster.deployment(h.serving, "contract-cm", "v1/ConfigMap/contract-cm")
    h.add_service("contract-svc9", 1)
    replica_set = h.controlled_replica_set("contract-svc9")
    with pytest.raises(ClusterError, match=f"^ReplicaSet {replica_set} .* is controlled by Deployment contract-svc9"):
        h.cluster.deployment(h.serving, "contract-svc9", f"apps/v1/ReplicaSet/{replica_set}")
    with pytest.raises(ClusterError, match="scale target 'apps/v1/Bad_Kind/x': kind"):
        h.cluster.find_deployment(h.serving, "apps/v1/Bad_Kind/x")


def the_ledger_keeps_one_entry_per_object_and_changes_only_that_key(h: Harness) -> None:
    """The gate's ledger (`policy.ownership`): made by its first write, one key written or removed at a time."""
    a, b = "contract-ledger-a", "contract-ledger-b"
    assert a not in h.cluster.ledger(h.serving)
    h.cluster.write_ledger_entry(h.serving, a, '{"v":1}')
    h.cluster.write_ledger_entry(h.serving, b, '{"v":1,"b":2}')
    h.cluster.write_ledger_entry(h.serving, a, '{"v":1,"a":1}')
    ledger = h.cluster.ledger(h.serving)
    assert (ledger[a], ledger[b]) == ('{"v":1,"a":1}', '{"v":1,"b":2}')
    h.cluster.write_ledger_entry(h.serving, a, None)
    h.cluster.write_ledger_entry(h.serving, a, None)  # a missing key: success, nothing else changes
    ledger = h.cluster.ledger(h.serving)
    assert a not in ledger and ledger[b] == '{"v":1,"b":2}'
    h.cluster.write_ledger_entry(h.serving, b, None)
    assert b not in h.cluster.ledger(h.serving)


CONTRACT: list[Callable[[Harness], None]] = [
    deployment_found_by_label_scaled_and_its_state_kept,
    serving_writes_test_the_value_they_read,
    autoscaler_writes_test_the_max_they_read,
    the_server_time_is_the_api_servers,
    parked_job_is_admitted_then_stopped,
    admission_caps_the_grace_in_the_same_write,
    parking_a_copy_is_idempotent,
    a_stop_is_of_the_workflow_listed_never_of_one_made_again_under_its_name,
    a_workflow_is_adopted_and_its_waiting_reason_written,
    the_gates_records_are_listed_and_deleted,
    missing_workflow_is_none,
    lease_admits_one_writer_at_a_time,
    lease_notes_are_written_only_by_the_holder_and_survive_renewals,
    a_stateful_set_is_scaled_through_its_scale_and_its_pods_found_by_its_selector,
    a_target_the_gate_must_not_scale_is_refused_naming_it,
    the_ledger_keeps_one_entry_per_object_and_changes_only_that_key,
]
