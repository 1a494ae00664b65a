"""The gate end to end over the in-memory cluster, reading real HTTP metrics from emulated vLLM pods.

What runs for real here: the gate, the direct scraper (HTTP over loopback), the exposition
parser, the policy. The cluster is the in-memory implementation of the same interface that
`KubeCluster` implements (the cluster marker runs the gate against the real API server).
"""

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.exit_hook import return_gpus
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.names import ANNOTATION_GPU_SECONDS, ANNOTATION_PREEMPTIONS, LABEL_STATE
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.record import ServiceRecord
from tests.support.fleet import EmulatedService, cluster_for, free_port, start_fleet

TICK = 300.0


def config(port: int, **service: object) -> GateConfig:
    return parse_config({
        "namespace": "serving", "tickSeconds": 300,
        "metrics": {"source": "direct", "maxAgeSeconds": 600, "direct": {"port": port, "timeoutSeconds": 2}},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        # No hysteresis and no volatility term (the shipped defaults have both): the replica counts below are the
        # capacity model's at headroom 0.25.
        "services": {"chat": {"capacity": {"requestsPerSecond": 10}, "headroom": 0.25, "stabilizationSeconds": 600,
                              "maxLendStep": 4, "gpusPerReplica": 4, "lendHysteresis": 0,
                              "volatilityHeadroomMax": 0.0, **service}},
    })


def lend_all(h: "Harness") -> None:
    for _ in range(5):
        h.tick(10)
    assert h.dep.replicas == 3


class Harness:
    def __init__(self, svc: EmulatedService, cluster: MemoryCluster, cfg: GateConfig) -> None:
        self.svc, self.cluster, self.now, self.log = svc, cluster, 0.0, io.StringIO()
        self.gate = Gate(cfg, cluster, DirectSource(port=svc.port), clock=lambda: self.now, out=self.log)

    @property
    def dep(self):  # type: ignore[no-untyped-def]
        return self.cluster.deployments[("serving", "chat")]

    def tick(self, rps: float, dry_run: bool = False, waiting: float = 0.0):  # type: ignore[no-untyped-def]
        self.now += TICK
        self.cluster.clock = self.now
        self.svc.feed(rps, TICK, serving=self.dep.replicas, waiting=waiting)
        return self.gate.tick(dry_run=dry_run)[0]

    def state(self, name: str) -> str | None:
        return self.cluster.workflows[("serving", name)]["metadata"]["labels"].get(LABEL_STATE)

    def record(self) -> ServiceRecord:
        return ServiceRecord.from_json(self.cluster.states.get(("serving", "chat")))


@pytest.fixture
def harness() -> Iterator[Harness]:
    svc = EmulatedService("chat", 8, subnet=41, port=free_port())
    fleet = start_fleet([svc])
    cluster = cluster_for([svc])
    cluster.add_workflow("serving", "sft-a", "chat", 2, created=1)
    cluster.add_workflow("serving", "eval-b", "chat", 3, created=2, priority=1)
    try:
        yield Harness(svc, cluster, config(svc.port))
    finally:
        fleet.stop()


def test_lends_at_low_load_and_reclaims_on_the_first_high_tick(harness: Harness) -> None:
    h = harness
    first = h.tick(10)
    assert h.record().baseline == 8 and h.record().deployment_uid == h.dep.uid
    assert first.decision is not None and "partial data" in first.decision.reason  # no rates before a 2nd sample
    outcomes = [h.tick(10) for _ in range(4)]
    # Priority first (eval-b, 3 replicas); sft-a waits a tick since a lend step is 4 replicas.
    assert [o.plan.lent_after for o in outcomes if o.plan] == [0, 0, 3, 5]
    assert h.dep.replicas == 3  # 8 - (3 + 2)
    assert h.state("eval-b") == "admitted" and h.state("sft-a") == "admitted"
    # Scaled down before each admission: the GPUs are free before the research pods ask.
    assert h.cluster.calls.index("scale chat 5") < h.cluster.calls.index("admit eval-b")
    assert h.cluster.calls.index("scale chat 3") < h.cluster.calls.index("admit sft-a")

    h.cluster.calls.clear()
    spike = h.tick(70)
    assert spike.decision is not None and spike.decision.action == "reclaim"
    assert h.dep.replicas == 8
    # Serving first: the scale-up is the first write of the reclaim, before any research-side write.
    writes = [c for c in h.cluster.calls if not c.startswith(("get-", "list-", "read-", "acquire-"))]
    assert writes[:2] == ["write-state chat", "scale chat 8"], writes
    stopped = {name for (_, name), wf in h.cluster.workflows.items() if wf["spec"].get("shutdown") == "Stop"}
    assert stopped == {"sft-a", "eval-b"}
    parked = {name: wf for (_, name), wf in h.cluster.workflows.items() if name.endswith("-p1")}
    assert set(parked) == {"sft-a-p1", "eval-b-p1"}
    assert all(wf["spec"]["suspend"] is True and wf["metadata"]["annotations"][ANNOTATION_PREEMPTIONS] == "1"
               for wf in parked.values())
    assert any(e.reason == "GPUsReclaimed" and "lent 5->0 replicas (0 GPUs); replicas at 8" in e.message
               for e in h.cluster.events)


def test_metrics_outage_stops_lending_then_reclaims_everything(harness: Harness) -> None:
    h = harness
    lend_all(h)
    h.cluster.pods[("serving", "chat")] = [p.__class__(p.name, "127.0.99.1") for p in h.cluster.pods[("serving", "chat")]]
    reasons = []
    for _ in range(3):
        out = h.tick(10)
        assert out.decision is not None
        reasons.append(out.decision.reason)
    assert "no lending" in reasons[0] and "no lending" in reasons[1]
    assert "3 failed ticks in a row: reclaim everything" in reasons[2]
    assert h.dep.replicas == 8


def test_malformed_page_is_named_and_lends_nothing(harness: Harness) -> None:
    h = harness
    h.tick(10)
    h.tick(10)
    h.svc.servers[3].render = lambda: "vllm:num_requests_running{engine=0} 1\n"  # type: ignore[method-assign]
    out = h.tick(10)
    assert out.decision is not None and out.plan is not None
    assert "chat-3: line 1: label engine has no quoted value" in out.decision.reason
    assert out.plan.lent_after == 0 and h.dep.replicas == 8


def test_dry_run_changes_nothing(harness: Harness) -> None:
    h = harness
    for _ in range(3):
        h.tick(10, dry_run=True)
    before = [c for c in h.cluster.calls if not c.startswith(("get-", "list-", "read-"))]
    assert before == []
    assert h.cluster.states == {} and h.cluster.events == []


def test_gate_killed_between_scale_and_admit_converges(harness: Harness) -> None:
    h = harness
    for _ in range(3):
        h.tick(10)
    h.cluster.fail_next["admit"] = [ClusterError("admit: HTTP 503 Service Unavailable (retries exhausted)")]
    out = h.tick(10)
    assert out.error == "admit eval-b: admit: HTTP 503 Service Unavailable (retries exhausted)"
    assert h.dep.replicas == 5 and h.state("eval-b") == "parked"  # scaled, not admitted: capacity idle
    out = h.tick(10)  # the next tick recomputes from the objects
    assert out.plan is not None and out.plan.lent_after == 3
    assert h.state("eval-b") == "admitted" and h.dep.replicas == 5
    h.tick(10)
    assert h.state("sft-a") == "admitted" and h.dep.replicas == 3
    assert any(e.warning and "errors: admit eval-b" in e.message for e in h.cluster.events)


def test_gate_killed_between_park_and_stop_loses_no_job(harness: Harness) -> None:
    h = harness
    lend_all(h)
    h.cluster.fail_next["stop"] = [ClusterError("stop: connection reset")]
    out = h.tick(70)
    # The first stop (sft-a: lowest priority) failed after its copy was made; serving was restored
    # before either, and eval-b was parked and stopped regardless: one job's fault is that job's.
    assert h.dep.replicas == 8 and out.error == "stop sft-a: stop: connection reset"
    assert ("serving", "sft-a-p1") in h.cluster.workflows and h.state("sft-a") == "admitted"
    assert h.state("eval-b") == "preempted"
    h.tick(70)  # five pods are new (no rates yet): partial data holds, and never lowers serving
    assert h.dep.replicas == 8
    h.tick(70)
    states = {name: (wf["spec"].get("shutdown"), wf["metadata"]["labels"].get(LABEL_STATE))
              for (_, name), wf in h.cluster.workflows.items()}
    assert states["sft-a"] == ("Stop", "preempted") and states["eval-b"] == ("Stop", "preempted")
    assert states["sft-a-p1"] == (None, "parked") and states["eval-b-p1"] == (None, "parked")
    assert h.dep.replicas == 8


def test_lease_held_elsewhere_skips_the_tick(harness: Harness) -> None:
    h = harness
    h.cluster.lease_holder, h.cluster.lease_until = "exit-hook/other", 10_000.0
    assert h.gate.tick() == []
    assert "holds the offhours lease" in h.log.getvalue()


def test_exit_hook_marks_the_return_and_the_gate_scales_serving_back(harness: Harness) -> None:
    h = harness
    lend_all(h)
    wf = h.cluster.workflows[("serving", "eval-b")]
    wf["status"]["resourcesDuration"] = {"cpu": 100, "memory": 200, "nvidia.com/gpu": 43200}
    # Argo runs the exit hook as the node `<workflow>.onExit` while the workflow is still Running.
    wf["status"]["nodes"] = {"eval-b-1": {"name": "eval-b.onExit", "phase": "Running"}}
    h.cluster.calls.clear()
    done = return_gpus(h.cluster, workflow_namespace="serving", workflow_name="eval-b", status="Succeeded",
                       out=io.StringIO())
    assert done.state == "returned" and done.gpu_seconds == 43200
    assert wf["metadata"]["annotations"][ANNOTATION_GPU_SECONDS] == "43200" and h.state("eval-b") == "returned"
    # The hook has no right on serving and writes nothing there: only its own workflow.
    assert h.cluster.calls == ["get-workflow eval-b", "annotate-workflow eval-b"] and h.dep.replicas == 3
    again = return_gpus(h.cluster, workflow_namespace="serving", workflow_name="eval-b", status="Succeeded",
                        out=io.StringIO())
    assert again.state == "returned" and h.state("eval-b") == "returned"  # idempotent
    h.tick(10)  # the gate: only sft-a (2) is lent now, so serving gets eval-b's 3 replicas back at once
    assert h.dep.replicas == 6


def test_exit_hook_of_a_job_stopped_for_reclaim_keeps_it_a_preemption(harness: Harness) -> None:
    h = harness
    lend_all(h)
    h.tick(70)
    assert h.state("sft-a") == "preempted"
    done = return_gpus(h.cluster, workflow_namespace="serving", workflow_name="sft-a", status="Failed",
                       out=io.StringIO())
    assert done.state == "preempted" and h.state("sft-a") == "preempted"
    assert "offhours.io/returned-at" in h.cluster.workflows[("serving", "sft-a")]["metadata"]["annotations"]


def test_exit_hook_of_a_missing_workflow_is_one_clear_error(harness: Harness) -> None:
    with pytest.raises(ClusterError, match="workflow serving/nope not found"):
        return_gpus(harness.cluster, workflow_namespace="serving", workflow_name="nope", status="Failed",
                    out=io.StringIO())


@pytest.mark.parametrize("text, names", [
    ('[{"displayName":"sft(0)","message":"OOMKilled"}]', ["sft(0)"]),
    ('"[{\\"displayName\\":\\"rl\\"}]"', ["rl"]),
    ('"null"', []), ("null", []), ("", []), ("not json", []),
])
def test_exit_hook_reads_workflow_failures(text: str, names: list[str]) -> None:
    from offhours.scripts.gate.exit_hook import failed_nodes

    assert [n["displayName"] for n in failed_nodes(text)] == names


def test_reclaim_stops_the_job_whose_last_checkpoint_loses_least(harness: Harness, tmp_path: Path) -> None:
    from offhours.scripts.gate.controller import store_progress
    from offhours.scripts.runtime.checkpoint import CheckpointStore

    h = harness
    for name in ("sft-a", "eval-b"):
        h.cluster.workflows[("serving", name)]["spec"]["arguments"]["parameters"] += [
            {"name": "checkpoint-uri", "value": f"file://{tmp_path}/ckpt"}, {"name": "run-id", "value": name}]
    h.gate.progress = store_progress
    lend_all(h)
    import time as clock

    # eval-b checkpointed a moment ago (through the job library); sft-a never did since its start an hour ago.
    CheckpointStore(f"file://{tmp_path}/ckpt/eval-b/eval/default", run_id="eval-b").save(100, b"state")
    assert store_progress(next(j for j in h.cluster.jobs("serving", "chat") if j.name == "eval-b")) == \
        pytest.approx(clock.time(), abs=5)
    h.cluster.workflows[("serving", "eval-b")]["metadata"]["annotations"]["offhours.io/priority"] = "0"
    for name in ("sft-a", "eval-b"):
        h.cluster.workflows[("serving", name)]["status"]["startedAt"] = h.now - 3600
    saved = store_progress(next(j for j in h.cluster.jobs("serving", "chat") if j.name == "eval-b"))
    out = h.tick(28)  # needs 4 of 8 replicas: one of the two jobs must go
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["eval-b"], h.log.getvalue()
    # The stop records the checkpoint it was chosen by, for `offhours why` and the work `usage` counts as lost.
    stopped = h.cluster.workflows[("serving", "eval-b")]["metadata"]["annotations"]
    assert saved is not None and stopped["offhours.io/last-checkpoint"] == clock.strftime(
        "%Y-%m-%dT%H:%M:%SZ", clock.gmtime(saved))
    assert "offhours.io/last-checkpoint" not in h.cluster.workflows[("serving", "sft-a")]["metadata"]["annotations"]


def test_holds_are_one_counted_event_not_one_per_tick(harness: Harness) -> None:
    h = harness
    for _ in range(3):
        h.tick(10)  # the first ticks only hold (no full window yet)
    holds = [e for e in h.cluster.events if e.reason == "GateHold"]
    assert len(holds) == 1 and holds[0].count == 3


def test_exit_hook_records_exactly_what_happened() -> None:
    from offhours.scripts.gate.exit_hook import Returned

    cluster = MemoryCluster()
    wf = cluster.add_workflow("research", "eval-b", "chat", 3, state="admitted")
    wf["status"]["resourcesDuration"] = {"nvidia.com/gpu": 43200}
    failures = json.dumps([{"displayName": f"n{i}"} for i in range(5)] + [{"id": "no-name"}])
    out = io.StringIO()
    done = return_gpus(cluster, workflow_namespace="research", workflow_name="eval-b", status="Failed",
                       failures=failures, clock=lambda: 86400.0 * 365 + 3723, out=out)
    assert done == Returned("eval-b", "chat", "returned", 43200.0)
    assert out.getvalue() == ('level=info service=chat msg="workflow eval-b ended Failed (returned); 43200 GPU-seconds; '
                              'chat gets its replicas back; 6 failed node(s): n0, n1, n2, n3, n4" workflow=eval-b\n')
    unnamed = io.StringIO()
    return_gpus(cluster, workflow_namespace="research", workflow_name="eval-b", status="Failed",
                failures=json.dumps([{"id": "no-name"}]), clock=lambda: 86400.0 * 365 + 3723, out=unnamed)
    assert unnamed.getvalue().endswith('; 1 failed node(s): ?" workflow=eval-b\n')
    annotations = wf["metadata"]["annotations"]
    assert annotations["offhours.io/returned-at"] == "1971-01-01T01:02:03Z"
    assert annotations["offhours.io/gpu-seconds"] == "43200"


def test_exit_hook_without_a_service_label_or_gpu_record() -> None:
    cluster = MemoryCluster()
    wf = cluster.add_workflow("research", "x", "chat", 1)
    del wf["metadata"]["labels"]["offhours.io/service"]
    out = io.StringIO()
    done = return_gpus(cluster, workflow_namespace="research", workflow_name="x", status="Succeeded", out=out)
    assert done.service == "" and done.gpu_seconds is None
    assert out.getvalue() == 'level=info msg="workflow x ended Succeeded (returned); GPU-seconds not recorded; its service ' \
                             'gets its replicas back" workflow=x\n'
    assert "offhours.io/gpu-seconds" not in wf["metadata"]["annotations"]


@pytest.mark.parametrize("status, seconds", [
    ({"resourcesDuration": {"nvidia.com/gpu": 0}}, 0.0),
    ({"resourcesDuration": {"nvidia.com/gpu": "120"}}, 120.0),
    ({"resourcesDuration": {"nvidia.com/gpu": 0.5}}, 0.5),
    ({"resourcesDuration": {"nvidia.com/gpu": -1}}, None),
    ({"resourcesDuration": {"nvidia.com/gpu": True}}, None),
    ({"resourcesDuration": {"nvidia.com/gpu": "nan"}}, None),
    ({"resourcesDuration": {"nvidia.com/gpu": "a lot"}}, None),
    ({"resourcesDuration": ["nvidia.com/gpu"]}, None),
    ({"resourcesDuration": {}}, None),
    ("Running", None),
])
def test_gpu_seconds_reads_only_a_sane_number(status: object, seconds: float | None) -> None:
    from offhours.scripts.gate.exit_hook import gpu_seconds

    assert gpu_seconds({"status": status}) == seconds


def test_failures_are_decoded_at_most_one_quoting_deep() -> None:
    from offhours.scripts.gate.exit_hook import failed_nodes

    nodes = [{"displayName": "a"}]
    assert failed_nodes(json.dumps(nodes)) == nodes
    assert failed_nodes(json.dumps(json.dumps(nodes))) == nodes
    assert failed_nodes(json.dumps(json.dumps(json.dumps(nodes)))) == []
    assert failed_nodes("   ") == []


def test_exit_hook_writes_utc_whatever_the_pod_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "Asia/Seoul")
    time.tzset()
    try:
        cluster = MemoryCluster()
        wf = cluster.add_workflow("research", "x", "chat", 1)
        return_gpus(cluster, workflow_namespace="research", workflow_name="x", status="Succeeded", clock=lambda: 0.0,
                    out=io.StringIO())
        assert wf["metadata"]["annotations"]["offhours.io/returned-at"] == "1970-01-01T00:00:00Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
