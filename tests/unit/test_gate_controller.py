"""The gate as a Kubernetes-style controller: one test per fault an adversarial review found.

The cluster is the in-memory `Cluster`; load comes from a scripted source (the HTTP path is
tested in test_gate.py). Each test names the fault it plays and checks what survived.
"""

import io
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from offhours.scripts.cluster.base import Autoscaler, ClusterError
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.workflow import build_parked_copy, workflow_job
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate, unique_holder
from offhours.scripts.metrics.sources import Reading, ServiceTarget
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import ConfigError, GateConfig
from offhours.scripts.policy.record import ServiceRecord
from tests.support.templates import install_library_templates

TICK = 60.0


def config(**service: object) -> GateConfig:
    # The look-ahead and the hysteresis are off unless a test turns them on: the numbers below are the capacity
    # model's alone, whatever the shipped defaults (bench/bench_frontier.py's point).
    svc = {"capacity": {"requestsPerSecond": 10}, "headroom": 0.25, "stabilizationSeconds": 300, "maxLendStep": 8,
           "trend": False, "volatilityHeadroomMax": 0.0, "lendHysteresis": 0, **service}
    return parse_config({
        "namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
        "metrics": {"source": "direct", "maxAgeSeconds": 180},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        "services": {"chat": dict(svc), "code": dict(svc)},
    })


@dataclass
class ScriptedSource:
    """Load per service as requests per second; a service may be given an error or a raw Load instead."""

    rps: dict[str, float] = field(default_factory=lambda: {"chat": 10.0, "code": 10.0})
    raw: dict[str, Load] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        out = {}
        for t in targets:
            if t.service in self.errors:
                out[t.service] = Reading(None, self.errors[t.service])
                continue
            n = len(t.pods)
            load = self.raw.get(t.service) or Load(self.rps[t.service], 0.0, 0.0, 0.0, 0.0, 0.1, n, n)
            out[t.service] = Reading(load, None)
        return out


class World:
    def __init__(self, cfg: GateConfig | None = None, replicas: int = 8) -> None:
        self.cluster = install_library_templates(MemoryCluster())
        for svc in ("chat", "code"):
            self.cluster.add_deployment("serving", svc, replicas)
        self.source = ScriptedSource()
        self.now = 0.0
        self.log = io.StringIO()
        self.gate = Gate(cfg or config(), self.cluster, self.source, clock=lambda: self.now, out=self.log,
                         monotonic=lambda: self.now)

    def tick(self, **rps: float):  # type: ignore[no-untyped-def]
        self.source.rps.update(rps)
        self.now += TICK
        self.cluster.clock = self.now
        return {o.service: o for o in self.gate.tick()}

    def replicas(self, svc: str = "chat") -> int:
        return self.cluster.deployments[("serving", svc)].replicas

    def record(self, svc: str = "chat") -> ServiceRecord:
        return ServiceRecord.from_json(self.cluster.states.get(("serving", svc)))

    def park(self, name: str, svc: str = "chat", replicas: int = 2, **kw: object) -> None:
        self.cluster.add_workflow("research", name, svc, replicas, created=self.now, **kw)  # type: ignore[arg-type]

    def wf(self, name: str) -> dict:  # type: ignore[type-arg]
        return self.cluster.workflows[("research", name)]

    def state(self, name: str) -> str | None:
        return self.wf(name)["metadata"]["labels"].get("offhours.io/state")

    def lend(self, jobs: int = 2) -> None:
        for i in range(jobs):
            self.park(f"job-{i}", replicas=2)
        for _ in range(7):
            self.tick()
        assert self.replicas() == 8 - 2 * jobs, self.log.getvalue()


def test_an_event_that_cannot_be_recorded_is_a_warning_naming_its_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # An Event is a record, not an action: its failure is one warning line (service and reason in their fields),
    # and the adoption it reports still happens.
    w = World()
    w.lend(2)
    w.cluster.deployments[("serving", "chat")].replicas = 12

    def refused(*_args: object, **_kwargs: object) -> None:
        raise ClusterError("create event: HTTP 403 Forbidden")

    monkeypatch.setattr(w.cluster, "record_event", refused)
    w.log.seek(0)
    w.log.truncate()
    w.tick()
    assert w.replicas() == 12 and w.record().baseline == 16
    lines = [line for line in w.log.getvalue().splitlines() if "could not record event ReplicasAdopted" in line]
    assert lines and lines[0].startswith("level=warning service=chat msg=") and lines[0].endswith("reason=ReplicasAdopted")

# -- ownership ----------------------------------------------------------------------------------
def test_an_on_call_scale_up_is_kept_and_becomes_the_baseline() -> None:
    w = World()
    w.lend(2)  # baseline 8, 4 lent, 4 in service
    w.cluster.deployments[("serving", "chat")].replicas = 12  # on-call, for an incident
    out = w.tick()
    assert w.replicas() == 12, "the gate must not undo a human's change"
    assert w.record().baseline == 16 and out["chat"].plan is not None and out["chat"].plan.lent_after == 4
    assert any(e.reason == "ReplicasAdopted" and "set to 12 by someone else" in e.message and "baseline 8 -> 16"
               in e.message for e in w.cluster.events)
    for _ in range(5):
        w.tick()
    assert w.replicas() == 12 and not any(c.startswith("scale chat") for c in w.cluster.calls[-40:])


def test_a_human_scale_with_nothing_lent_moves_the_baseline() -> None:
    w = World()
    w.tick()
    w.cluster.deployments[("serving", "chat")].replicas = 10
    w.tick()
    assert w.replicas() == 10 and w.record().baseline == 10


def test_with_an_hpa_the_gate_lends_by_capping_max_replicas_and_never_scales() -> None:
    w = World()
    hpa = Autoscaler("HorizontalPodAutoscaler", "serving", "chat-hpa", min_replicas=2, max_replicas=8)
    w.cluster.autoscalers[("serving", "chat")] = hpa
    w.park("job-0")
    w.park("job-1")
    for _ in range(7):
        w.tick()
    assert w.cluster.autoscalers[("serving", "chat")].max_replicas == 4
    assert not any(c.startswith("scale chat") for c in w.cluster.calls)
    assert w.record().writes_to == "HorizontalPodAutoscaler/chat-hpa" and w.record().baseline == 8
    w.cluster.autoscalers[("serving", "chat")].max_replicas = 6  # its owner raises the cap
    w.tick()
    assert w.cluster.autoscalers[("serving", "chat")].max_replicas == 6 and w.record().baseline == 10
    w.tick(chat=75)  # load needs 10: the cap goes back up first, the jobs are stopped
    assert w.cluster.autoscalers[("serving", "chat")].max_replicas == 10
    assert not any(c.startswith("scale chat") for c in w.cluster.calls)


def test_never_caps_an_hpa_below_its_own_minimum() -> None:
    w = World()
    w.cluster.autoscalers[("serving", "chat")] = Autoscaler("HorizontalPodAutoscaler", "serving", "h", 6, 8)
    w.park("big", replicas=4)
    w.park("small", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.cluster.autoscalers[("serving", "chat")].max_replicas == 6 and w.state("small") == "admitted"


def test_in_memory_hpa_clamps_replicas_to_the_cap() -> None:
    # The gate's writes only touch maxReplicas; what runs is the HPA's business (e2e proves the real one).
    w = World()
    w.cluster.autoscalers[("serving", "chat")] = Autoscaler("HorizontalPodAutoscaler", "serving", "h", 1, 8)
    w.lend(0)
    assert w.replicas() == 8 and w.cluster.autoscalers[("serving", "chat")].max_replicas == 8


def test_a_recreated_deployment_starts_fresh_and_old_loans_are_not_added_twice() -> None:
    w = World()
    w.lend(2)
    del w.cluster.deployments[("serving", "chat")]
    w.cluster.add_deployment("serving", "chat", 8)  # deleted and created again at 8 while 4 are lent
    out = w.tick()
    assert w.record().baseline == 8 and w.replicas() == 8, "not 12: the old incarnation's loans are not added"
    assert any("a new Deployment" in e.message for e in w.cluster.events)
    # The jobs admitted against the old incarnation hold no loan of this one: stopped and parked again.
    assert out["chat"].plan is not None and {j.name for j in out["chat"].plan.stop} == {"job-0", "job-1"}
    assert w.state("job-0") == "preempted" and w.state("job-0-p1") == "parked"


def test_two_services_naming_one_deployment_are_refused() -> None:
    raw = {"namespace": "s", "metrics": {"source": "direct"},
           "services": {"chat": {"capacity": {"requestsPerSecond": 1}, "deployment": "llm"},
                        "chat-b": {"capacity": {"requestsPerSecond": 1}, "deployment": "llm"}}}
    with pytest.raises(ConfigError, match="services chat and chat-b both name Deployment llm"):
        parse_config(raw)


def test_two_services_resolving_to_one_deployment_at_runtime_neither_acts() -> None:
    w = World()
    w.cluster.deployments[("serving", "code")].service = "chat"  # both look up the label chat
    w.cluster.deployments.pop(("serving", "code"))
    before = w.replicas()
    out = w.tick()
    assert out["chat"].error is not None or out["code"].error is not None
    assert w.replicas() == before


def test_min_replicas_zero_is_refused() -> None:
    with pytest.raises(ConfigError, match="minReplicas: 0 is less than the minimum of 1"):
        config(minReplicas=0)


# -- isolation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", [
    TypeError("'NoneType' object is not subscriptable"), KeyError("items"), ValueError("bad"),
    ClusterError("list workflows: HTTP 500"), ZeroDivisionError("float division by zero"),
])
def test_any_exception_in_one_service_is_its_failed_tick_and_the_other_ticks(fault: Exception) -> None:
    w = World()
    w.lend(1)
    w.cluster.fail_next["list-workflows chat"] = [fault] * 3
    results = [w.tick() for _ in range(3)]
    assert [r["chat"].error is not None for r in results] == [True, True, True]
    assert all(r["code"].error is None and r["code"].decision is not None for r in results)
    assert w.replicas() == 8, "3 failed ticks in a row: the fail-safe restores chat's baseline"
    assert "serving restored to its baseline 8" in (results[2]["chat"].error or "")
    assert any(e.reason == "GateTickFailed" and e.warning for e in w.cluster.events)
    after = w.tick()["chat"]  # healthy again: a hold never lowers serving, though 2 replicas are still lent
    assert after.plan is not None and after.plan.scale_to == 6 and w.replicas() == 8
    assert after.service == "chat"
    assert after.detail().startswith("hold lent 2 -> 2 of baseline 8; (") and "; at 8" in after.detail()


@pytest.mark.parametrize("key, value", [
    ("offhours.io/last-checkpoint", "yesterday"), ("offhours.io/priority", "high"),
    ("offhours.io/last-checkpoint", "1e400"), ("offhours.io/priority", "9" * 40),
])
def test_a_tenants_malformed_annotation_is_ignored_not_fatal(key: str, value: str) -> None:
    w = World()
    w.park("bad")
    w.wf("bad")["metadata"]["annotations"][key] = value
    w.park("good", svc="code")
    for _ in range(7):
        out = w.tick(chat=1, code=1)
    assert out["chat"].error is None and w.state("bad") == "admitted" and w.state("good") == "admitted"


@pytest.mark.parametrize("replicas", ["-3", "1e9", "abc", "", "99999"])
def test_a_job_whose_replica_count_cannot_be_trusted_is_never_admitted(replicas: str) -> None:
    w = World()
    w.park("bad")
    w.wf("bad")["metadata"]["labels"]["offhours.io/replicas"] = replicas
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("bad") == "parked" and w.replicas() == 8
    assert "is not a positive whole number of replicas" in w.wf("bad")["metadata"]["annotations"][
        "offhours.io/waiting-reason"]


@pytest.mark.parametrize("load", [
    Load(math.inf, 0, 0, 0, 0, 0, 8, 8),  # two engines at 1e308 each: the sum overflows
    Load(math.nan, 0, 0, 0, 0, 0, 8, 8),
    Load(1.0, 0, 0, -4.0, 0, 0, 8, 8),
])
def test_a_non_finite_or_negative_load_is_a_failed_reading(load: Load) -> None:
    w = World()
    w.lend(1)
    w.source.raw["chat"] = load
    out = w.tick()
    assert out["chat"].decision is not None and "unusable load reading" in out["chat"].decision.reason
    assert out["chat"].decision.action == "hold" and out["code"].error is None


def test_a_corrupted_state_is_no_memory_not_a_crash() -> None:
    w = World()
    w.tick()
    for text in ('{"baseline": "8.0"}', '{"baseline": 8.5}', "[1,2]", "not json", '{"recommendations": [["x", 1]]}'):
        w.cluster.states[("serving", "chat")] = text
        out = w.tick()
        assert out["chat"].error is None and w.record().baseline == 8 and w.replicas() == 8


def test_a_source_that_raises_fails_every_service_reading_not_the_gate() -> None:
    w = World()

    def boom(targets: object, now: float) -> dict[str, Reading]:
        raise RuntimeError("scraper bug")

    w.source.read = boom  # type: ignore[method-assign]
    out = w.tick()
    assert all("load source failed: RuntimeError: scraper bug" in (o.decision.reason if o.decision else "")
               for o in out.values())


# -- serving first ------------------------------------------------------------------------------
def test_reclaim_scales_up_first_even_if_parking_is_forbidden_forever() -> None:
    w = World()
    w.lend(2)
    w.cluster.fail_next["park-copy"] = [ClusterError("create parked copy: HTTP 403 Forbidden")] * 10
    w.cluster.calls.clear()
    out = w.tick(chat=60)  # needs 8 of 8
    assert w.replicas() == 8, "serving has its replicas back although every research-side write failed"
    writes = [c for c in w.cluster.calls if c.split()[0] in ("scale", "park-copy", "stop", "write-state")]
    assert writes[:2] == ["write-state chat", "scale chat 8"]
    assert "403" in (out["chat"].error or "") and w.state("job-0") == "admitted"  # not stopped without its copy
    w.tick(chat=60)
    assert w.replicas() == 8


def test_a_hung_progress_read_is_skipped_and_the_reclaim_goes_on() -> None:
    w = World()
    w.lend(2)
    release = threading.Event()
    w.gate.progress = lambda job: release.wait(30) and None  # an S3 endpoint that never answers
    w.gate.advisory_timeout, w.gate.advisory_budget = 0.2, 0.2
    out = w.tick(chat=60)
    release.set()
    assert w.replicas() == 8 and out["chat"].plan is not None and len(out["chat"].plan.stop) == 2
    assert "no answer within 0.2 s: skipped" in w.log.getvalue()
    assert "advisory budget" in w.log.getvalue()  # the second read is not even tried


# -- memory gaps --------------------------------------------------------------------------------
def test_after_a_gap_the_gate_observes_a_whole_window_before_lending() -> None:
    w = World()
    w.park("job", replicas=6)
    for _ in range(4):  # not yet a whole window (300 s = 5 ticks)
        w.tick(chat=1)
    w.now += 2 * 3600  # the gate was down for two hours
    outs = [w.tick(chat=1)["chat"] for _ in range(6)]
    assert [o.decision.action for o in outs if o.decision] == ["hold"] * 5 + ["lend"]
    assert "not yet for 300 s" in (outs[0].decision.reason if outs[0].decision else "")


def test_a_stale_history_never_lends_after_a_gap_even_if_it_covered_the_window() -> None:
    w = World()
    w.park("job", replicas=2)
    for _ in range(3):
        w.tick(chat=1)
    w.now += 4000
    out = w.tick(chat=1)["chat"]
    assert out.decision is not None and out.decision.action == "hold" and w.state("job") == "parked"


# -- parked copies ------------------------------------------------------------------------------
def test_copy_names_are_unique_by_construction() -> None:
    def wf(name: str, uid: str) -> dict:  # type: ignore[type-arg]
        return {"metadata": {"name": name, "uid": uid, "labels": {}, "annotations": {}}, "spec": {}}

    assert build_parked_copy(wf("llama-sft-p1", "u1"))["metadata"]["name"] == "llama-sft-p1-p1"
    names = {build_parked_copy(wf(n, n))["metadata"]["name"] for n in ("train-p2456", "train-p7789")}
    assert names == {"train-p2456-p1", "train-p7789-p1"}
    first = build_parked_copy(wf("train", "u0"))
    first["metadata"]["uid"] = "u1"
    second = build_parked_copy(first)
    assert second["metadata"]["name"] == "train-p2" and second["metadata"]["labels"]["offhours.io/copy-of"] == "u1"


def test_a_copy_waits_for_its_original_to_stop_and_is_deleted_if_it_succeeded() -> None:
    w = World()
    w.lend(1)
    w.cluster.fail_next["stop"] = [ClusterError("stop: HTTP 503")]
    w.tick(chat=60)  # parked job-0-p1, the stop failed: job-0 runs on
    assert w.state("job-0") == "admitted" and w.state("job-0-p1") == "parked"
    w.cluster.finish("research", "job-0", "Succeeded")  # it completed before the next stop
    for _ in range(7):
        w.tick(chat=1)
    assert ("research", "job-0-p1") not in w.cluster.workflows, "the copy of a completed job is deleted, never run"
    assert w.replicas() == 8


def test_a_copy_is_admitted_once_its_original_is_confirmed_stopped() -> None:
    w = World()
    w.lend(1)
    w.tick(chat=60)
    assert w.state("job-0") == "preempted" and w.wf("job-0")["status"]["phase"] == "Running"
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("job-0-p1") == "parked", "its original has not stopped yet (phase Running)"
    assert "its original job-0 has not stopped yet" in w.wf("job-0-p1")["metadata"]["annotations"][
        "offhours.io/waiting-reason"]
    w.wf("job-0")["status"]["phase"] = "Failed"  # Argo's phase for a stopped workflow
    w.tick(chat=1)
    assert w.state("job-0-p1") == "admitted"


def test_a_workflow_whose_work_is_done_is_stopped_last_and_never_parked_again() -> None:
    # Its status (anyone's to write) says only its exit handler runs: the other job is the first victim, and
    # this one is stopped only for what serving still needs, with no copy to run the ended job again.
    w = World()
    w.lend(2)
    w.wf("job-0")["status"]["nodes"] = {"x": {"name": "job-0.onExit", "phase": "Running"},
                                       "job-0": {"name": "job-0", "phase": "Succeeded"}}
    out = w.tick(chat=60)
    assert out["chat"].plan is not None and [j.name for j in out["chat"].plan.stop] == ["job-1"]
    assert [j.name for j in out["chat"].plan.cancel] == ["job-0"]
    assert w.replicas() == 8 and ("research", "job-0-p1") not in w.cluster.workflows


# -- races and the Lease ------------------------------------------------------------------------
def test_holders_are_unique_per_process_and_gate() -> None:
    assert unique_holder() != unique_holder()
    assert World().gate.holder != World().gate.holder


def test_an_expired_lease_is_taken_over_and_the_old_holder_stops_writing() -> None:
    w = World()
    w.tick()
    w.cluster.lease_holder, w.cluster.lease_until = "gate/other", w.now + 30
    assert w.gate.tick() == []  # held: skipped
    w.now += 31
    w.cluster.clock = w.now
    assert w.gate.tick() != []  # expired: taken over


def test_a_gate_that_loses_the_lease_mid_tick_writes_nothing_more() -> None:
    w = World()
    w.lend(2)
    steal = {"done": False}
    real = w.cluster.write_state

    def write_state(ns: str, svc: str, text: str) -> None:
        real(ns, svc, text)
        if not steal["done"]:  # after its first write, the tick takes long and another gate takes the Lease
            steal["done"] = True
            w.now += 100
            w.cluster.clock = w.now
            w.cluster.lease_holder, w.cluster.lease_until = "gate/other", w.now + 1000

    w.cluster.write_state = write_state  # type: ignore[method-assign]
    w.cluster.calls.clear()
    out = w.tick(chat=60)
    assert all(not c.startswith(("stop", "park-copy", "admit")) for c in w.cluster.calls)
    assert "another actor took the offhours lease" in (out["chat"].error or "") + (out["code"].error or "")


# -- accounting ---------------------------------------------------------------------------------
def test_a_copy_does_not_inherit_the_admission_or_return_of_its_original() -> None:
    w = World()
    w.lend(1)
    w.tick(chat=60)
    copy = w.wf("job-0-p1")["metadata"]
    assert "offhours.io/admitted-at" not in copy["annotations"] and "offhours.io/preempted-at" not in copy["annotations"]
    assert copy["annotations"]["offhours.io/preemptions"] == "1"
    assert w.wf("job-0")["metadata"]["annotations"]["offhours.io/preempted-at"]


def test_workflow_job_survives_any_shape_of_workflow() -> None:
    for wf in ({}, {"metadata": None}, {"metadata": {"labels": "x"}}, {"status": "Running", "spec": []},
               {"metadata": {"name": "a", "labels": {"offhours.io/replicas": "2"}}, "status": {"nodes": "x"}}):
        job = workflow_job(wf)  # type: ignore[arg-type]
        assert job is None or job.problem is not None or job.replicas == 2


@pytest.mark.parametrize("grace, exit_seconds", [("45", 45.0), ("0", 0.0), ("abc", None), ("-1", None), ("1e9", None),
                                                  ("9999999", None), (None, None)])
def test_a_jobs_exit_time_is_its_declared_grace_read_defensively(grace: str | None,
                                                                  exit_seconds: float | None) -> None:
    params = [{"name": "termination-grace-seconds", "value": grace}] if grace is not None else []
    wf = {"metadata": {"name": "a", "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "1"}},
          "spec": {"arguments": {"parameters": params}}}
    job = workflow_job(wf)
    assert job is not None and job.exit_seconds == exit_seconds


@pytest.mark.parametrize("graces, stopped", [(("3600", "30"), "job-1"), (("3600", "400"), "job-0")])
def test_the_gate_stops_the_fastest_exit_with_each_grace_capped_at_the_services(graces: tuple[str, str],
                                                                               stopped: str) -> None:
    # Two jobs declare how long they take to checkpoint on SIGTERM. The reclaim stops the one that gives its
    # GPUs back soonest; the admission caps every grace at maxGraceSeconds (300), so 3,600 and 400 tie and the
    # usual order decides (equal loss and age: by name).
    w = World(config(maxGraceSeconds=300))
    for name, grace in zip(("job-0", "job-1"), graces):
        w.park(name, replicas=2)
        w.wf(name)["spec"]["arguments"]["parameters"].append({"name": "termination-grace-seconds", "value": grace})
    for _ in range(7):
        w.tick()
    assert w.replicas() == 4, w.log.getvalue()
    out = w.tick(chat=40)["chat"]  # needs 5 of 8: one of the two 2-replica jobs is stopped
    assert out.plan is not None and [j.name for j in out.plan.stop] == [stopped]


@pytest.mark.parametrize("annotation, exit_seconds", [("45", 45.0), ("abc", 120.0), ("-5", 120.0), ("86401", 120.0)])
def test_a_measured_exit_time_comes_before_the_declared_grace_and_a_bad_one_is_ignored(
        annotation: str, exit_seconds: float) -> None:
    wf = {"metadata": {"name": "a", "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "1"},
                       "annotations": {"offhours.io/exit-seconds": annotation}},
          "spec": {"arguments": {"parameters": [{"name": "termination-grace-seconds", "value": "120"}]}}}
    job = workflow_job(wf)
    assert job is not None and job.exit_seconds == exit_seconds


def test_a_copy_learns_its_exit_time_from_its_original_and_carries_it_when_admitted() -> None:
    # The run's last stop took 45 s (preempted-at to the exit hook's returned-at): the copy is admitted with
    # offhours.io/exit-seconds=45, which then orders it as a victim, whatever its declared grace said.
    from datetime import datetime, timedelta

    w = World()
    w.lend(1)
    assert "offhours.io/exit-seconds" not in w.wf("job-0")["metadata"]["annotations"]  # nothing measured yet
    w.wf("job-0")["spec"]["arguments"] = {"parameters": [{"name": "termination-grace-seconds", "value": "120"}]}
    w.tick(chat=60)
    w.cluster.finish("research", "job-0", "Failed")  # Argo ends it; its exit hook stamped returned-at 45 s after the stop
    original = w.wf("job-0")["metadata"]["annotations"]
    stopped = datetime.strptime(original["offhours.io/preempted-at"], "%Y-%m-%dT%H:%M:%SZ")
    original["offhours.io/returned-at"] = (stopped + timedelta(seconds=45)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for _ in range(8):
        w.tick(chat=0)
    assert w.state("job-0-p1") == "admitted"
    assert w.wf("job-0-p1")["metadata"]["annotations"]["offhours.io/exit-seconds"] == "45"
    job = workflow_job(w.wf("job-0-p1"))
    assert job is not None and job.exit_seconds == 45.0  # the measurement, not the declared 120


# -- look-ahead ---------------------------------------------------------------------------------
@pytest.mark.parametrize("trend, required", [(False, 4), (True, 7)])
def test_the_trend_term_raises_what_a_rising_load_requires(trend: bool, required: int) -> None:
    # Reaction time 60 + 120 + 240 s = 7 ticks. At 10 req/s a replica serves 10: need 1 -> 3 in the
    # last 7 ticks; the trend adds that rise once more: (3 + 2) x 1.25 -> 7 replicas, against 4 without.
    w = World(config(trend=trend, coldStartSeconds=240))
    for _ in range(8):
        w.tick(chat=10)
    out = w.tick(chat=30)["chat"]
    assert out.decision is not None and out.decision.required == required
    assert len(w.record().needs) == (8 if trend else 0)  # kept only when a look-ahead term is on


# -- the act path, exactly ----------------------------------------------------------------------
def test_a_partial_reclaim_raises_serving_first_then_settles_on_what_stays_lent() -> None:
    w = World()
    w.lend(2)  # 4 lent, 4 in service
    w.cluster.calls.clear()
    w.tick(chat=40)  # needs 5: at most 3 may stay lent, one job of 2 is stopped, 2 stay lent
    assert [c for c in w.cluster.calls if c.startswith("scale")] == ["scale chat 5", "scale chat 6"]
    assert w.replicas() == 6 and w.record().applied == 6 and w.record().applying_from is None


def test_a_partial_reclaim_with_an_hpa_moves_only_its_cap() -> None:
    w = World()
    w.cluster.autoscalers[("serving", "chat")] = Autoscaler("HorizontalPodAutoscaler", "serving", "h", 1, 8)
    w.park("job-0")
    w.park("job-1")
    for _ in range(7):
        w.tick()
    w.cluster.calls.clear()
    w.tick(chat=40)
    assert [c for c in w.cluster.calls if c.startswith(("scale", "set-max"))] == ["set-max h 5", "set-max h 6"]


def test_when_the_record_cannot_be_written_a_raise_goes_ahead_and_a_lend_does_not() -> None:
    w = World()
    w.park("job-0", replicas=4)
    for _ in range(5):
        w.tick()
    w.cluster.fail_next["write-state chat"] = [ClusterError("write configmap: HTTP 500")]
    out = w.tick()  # the lend's record fails: no scale-down without it, and a failed tick restarts the window
    assert w.replicas() == 8 and w.state("job-0") == "parked" and "HTTP 500" in (out["chat"].error or "")
    actions = [w.tick()["chat"].decision.action for _ in range(6)]  # type: ignore[union-attr]
    assert actions == ["hold"] * 5 + ["lend"] and w.replicas() == 4 and w.state("job-0") == "admitted"
    w.cluster.fail_next["write-state chat"] = [ClusterError("write configmap: HTTP 500")]
    w.tick(chat=60)  # the reclaim's record fails: serving is raised anyway
    assert w.replicas() == 8


def test_the_intent_is_recorded_before_the_write_it_describes() -> None:
    class Killed(BaseException):
        pass

    w = World()
    w.lend(2)
    w.cluster.fail_next["scale chat 8"] = [Killed()]
    with pytest.raises(Killed):
        w.tick(chat=60)
    assert (w.record().applied, w.record().applying_from) == (8, 4) and w.replicas() == 4
    w.tick(chat=60)  # the next gate: 4 is its own unfinished write, not someone else's
    assert w.replicas() == 8 and w.record().baseline == 8 and (w.record().applied, w.record().applying_from) == (8, None)


def test_a_scale_that_fails_after_its_intent_is_a_failed_tick_recorded_with_that_intent() -> None:
    # Fault: the API refuses the raise itself (HTTP 503) after its intent was stored. The failed tick is
    # counted on the record that holds the intent, so the next gate knows the 4 it finds is its own write.
    w = World()
    w.lend(2)
    w.cluster.fail_next["scale chat 8"] = [ClusterError("scale: HTTP 503")]
    out = w.tick(chat=60)
    assert out["chat"].error == "scale: HTTP 503" and w.replicas() == 4
    record = w.record()
    assert (record.applied, record.applying_from, record.baseline) == (8, 4, 8)
    assert record.decision.failed_ticks == 1
    assert record.last_decision == {"at": w.now, "action": "failed", "reason": "scale: HTTP 503"}


def test_the_note_of_an_unrecorded_raise_is_removed_once_the_record_is_written() -> None:
    # Fault: the raise's record write fails (HTTP 500): the raise goes ahead, noted on the Lease; the
    # tick's closing record write succeeds, and the note goes, so no later gate reads a stale one.
    w = World()
    w.lend(2)
    w.cluster.fail_next["write-state chat"] = [ClusterError("write configmap: HTTP 500")]
    w.cluster.calls.clear()
    w.tick(chat=60)
    chat = [c for c in w.cluster.calls if c.endswith(" chat") or c.startswith("scale chat")]
    # The last write records the stopped jobs' parked copies (by their UIDs), once they are made.
    assert chat[chat.index("write-state chat"):] == ["write-state chat", "note-lease chat", "scale chat 8",
                                                      "write-state chat", "note-lease chat", "write-state chat"]
    assert w.replicas() == 8 and w.cluster.lease_annotations == {}
    assert w.cluster.lease_notes("serving") == {}


def test_progress_is_read_only_when_a_stop_is_coming() -> None:
    w = World()
    reads: list[str] = []
    w.gate.progress = lambda job: reads.append(job.name) or None  # type: ignore[func-returns-value]
    w.lend(2)
    w.tick()  # a lend
    out = w.tick(chat=30)  # needs 4: 4 stay lent, a hold
    assert out["chat"].decision is not None and out["chat"].decision.action == "hold" and reads == []
    w.tick(chat=60)
    assert sorted(reads) == ["job-0", "job-1"]


def test_a_lending_window_in_utc_is_read_at_the_tick_time() -> None:
    cfg = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                        "metrics": {"source": "direct"},
                        "schedule": {"mode": "window", "start": "20:00", "end": "08:00", "timezone": "UTC"},
                        "services": {"chat": {"capacity": {"requestsPerSecond": 10}, "stabilizationSeconds": 300},
                                     "code": {"capacity": {"requestsPerSecond": 10}}}})
    w = World(cfg)
    w.lend(1)  # midnight UTC: inside the window
    w.now = 12 * 3600.0 - TICK
    out = w.tick()
    assert out["chat"].decision is not None and out["chat"].decision.reason == "outside the lending window"
    assert w.replicas() == 8


def test_a_dry_run_plans_what_the_real_tick_then_does() -> None:
    w = World()
    w.park("job-0")
    for _ in range(5):
        w.tick()
    w.now += TICK
    dry = {o.service: o for o in w.gate.tick(dry_run=True)}["chat"]
    w.now -= TICK
    real = w.tick()["chat"]
    assert dry.plan is not None and real.plan is not None
    assert ([j.name for j in dry.plan.admit], dry.plan.scale_to) == ([j.name for j in real.plan.admit], 6) \
        == (["job-0"], real.plan.scale_to)


def test_the_last_decision_is_recorded_for_readers() -> None:
    w = World()
    w.tick()
    assert w.record().last_decision == {"at": 60.0, "action": "hold", "required": 2, "lent": 0, "target": 0,
                                        "reason": "load is low but not yet for 300 s"}


def test_a_workflow_running_without_admission_that_fits_is_adopted_against_this_incarnation() -> None:
    w = World()
    for _ in range(5):
        w.tick()
    w.park("argo-submitted")  # started by `argo submit --from`, once the window allows lending
    w.wf("argo-submitted")["spec"].pop("suspend")
    del w.wf("argo-submitted")["metadata"]["labels"]["offhours.io/state"]
    w.tick()
    assert w.state("argo-submitted") == "admitted" and w.replicas() == 6
    assert w.wf("argo-submitted")["metadata"]["annotations"]["offhours.io/borrowed-from"] == \
        w.cluster.deployments[("serving", "chat")].uid


def test_waiting_jobs_carry_their_reason_and_position_written_only_on_change() -> None:
    w = World()
    w.park("big-a", replicas=8)
    w.park("big-b", replicas=8)
    w.tick()
    a, b = (w.wf(n)["metadata"]["annotations"] for n in ("big-a", "big-b"))
    assert (a["offhours.io/queue-position"], b["offhours.io/queue-position"]) == ("1", "2")
    assert a["offhours.io/waiting-reason"] == ("waiting: chat lends nothing more now: its recent load leaves no more "
                                              "replicas to spare; position 1 in the queue")
    w.cluster.calls.clear()
    w.tick()
    assert not any(c.startswith("annotate-workflow") for c in w.cluster.calls)


def test_every_failed_job_write_is_reported_in_one_line() -> None:
    w = World()
    w.lend(2)
    w.cluster.fail_next["stop"] = [ClusterError("stop: HTTP 503"), ClusterError("stop: HTTP 504")]
    out = w.tick(chat=60)
    assert out["chat"].error == "stop job-0: stop: HTTP 503; stop job-1: stop: HTTP 504"


def test_an_admitted_job_whose_replica_label_is_rewritten_is_stopped() -> None:
    w = World()
    w.lend(1)
    w.wf("job-0")["metadata"]["labels"]["offhours.io/replicas"] = "0"  # a tenant hides what it holds
    out = w.tick()
    assert out["chat"].plan is not None and [j.name for j in out["chat"].plan.stop] == ["job-0"]
    # What it holds is what the gate lent it (its record), whatever the label says now; stopped, it goes back at once.
    assert out["chat"].decision is not None and out["chat"].decision.lent == 2
    assert w.state("job-0") == "preempted" and w.replicas() == 8


def test_a_dry_run_during_a_reclaim_names_its_victims_and_stops_nothing() -> None:
    w = World()
    w.lend(2)
    w.now += TICK
    out = {o.service: o for o in w.gate.tick(dry_run=True)}["chat"]
    w.source.rps["chat"] = 60
    out = {o.service: o for o in w.gate.tick(dry_run=True)}["chat"]
    assert out.plan is not None and sorted(j.name for j in out.plan.stop) == ["job-0", "job-1"]
    assert w.state("job-0") == "admitted" and w.replicas() == 4


def test_a_raise_whose_record_could_not_be_written_is_not_adopted_as_someone_elses() -> None:
    # Found by the fault campaign in CI: every record write of a reclaim's tick refused (a webhook's 403);
    # serving was raised anyway, and the next tick took that raise for an owner's change: baseline 8 -> 12.
    w = World()
    w.lend(2)
    w.cluster.fail_next["write-state chat"] = [ClusterError("HTTP 403 Forbidden: admission webhook denied")] * 3
    w.tick(chat=60)
    assert w.replicas() == 8
    for _ in range(8):
        w.tick(chat=0)
        assert w.record().baseline == 8 and w.replicas() <= 8
    assert not any(e.reason == "ReplicasAdopted" for e in w.cluster.events)
