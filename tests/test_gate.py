"""The gate end to end over the in-memory cluster, reading real HTTP metrics from emulated vLLM pods.

What runs for real here: the gate, the direct scraper (HTTP over loopback), the exposition
parser, the policy. The cluster is the in-memory implementation of the same interface that
`KubeCluster` implements (the cluster marker runs the gate against the real API server).
"""

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from offhours.scripts.cluster.base import (
    ANNOTATION_BASELINE,
    ANNOTATION_GPU_SECONDS,
    ANNOTATION_PREEMPTIONS,
    LABEL_STATE,
    ClusterError,
)
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.exit_hook import return_gpus
from offhours.scripts.gate import Gate
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.policy.config import GateConfig, parse_config

from .fleet import EmulatedService, cluster_for, free_port, start_fleet

TICK = 300.0


def config(port: int, **service: object) -> GateConfig:
    return parse_config({
        "namespace": "serving", "tickSeconds": 300,
        "metrics": {"source": "direct", "maxAgeSeconds": 600, "direct": {"port": port, "timeoutSeconds": 2}},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        "services": {"chat": {"capacity": {"requestsPerSecond": 10}, "headroom": 0.25, "stabilizationSeconds": 600,
                              "maxLendStep": 4, "gpusPerReplica": 4, **service}},
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
    assert h.dep.annotations[ANNOTATION_BASELINE] == "8"
    assert first.decision is not None and "partial data" in first.decision.reason  # no rates before a 2nd sample
    outcomes = [h.tick(10) for _ in range(4)]
    # Priority first (eval-b, 3 replicas); sft-a waits a tick since a lend step is 4 replicas.
    assert [o.plan.lent_after for o in outcomes if o.plan] == [0, 0, 3, 5]
    assert h.dep.replicas == 3  # 8 - (3 + 2)
    assert h.state("eval-b") == "admitted" and h.state("sft-a") == "admitted"
    # Scaled down before each admission: the GPUs are free before the research pods ask.
    assert h.cluster.calls.index("scale chat 5") < h.cluster.calls.index("admit eval-b")
    assert h.cluster.calls.index("scale chat 3") < h.cluster.calls.index("admit sft-a")

    spike = h.tick(70)
    assert spike.decision is not None and spike.decision.action == "reclaim"
    assert h.dep.replicas == 8
    stopped = {name for (_, name), wf in h.cluster.workflows.items() if wf["spec"].get("shutdown") == "Stop"}
    assert stopped == {"sft-a", "eval-b"}
    parked = {name: wf for (_, name), wf in h.cluster.workflows.items() if name.endswith("-p1")}
    assert set(parked) == {"sft-a-p1", "eval-b-p1"}
    assert all(wf["spec"]["suspend"] is True and wf["metadata"]["annotations"][ANNOTATION_PREEMPTIONS] == "1"
               for wf in parked.values())
    assert any(e.reason == "GPUsReclaimed" and "lent 5->0 replicas (0 GPUs); scale to 8" in e.message
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
    before = [c for c in h.cluster.calls if not c.startswith(("get-", "list-"))]
    assert before == []
    assert ANNOTATION_BASELINE not in h.dep.annotations and h.cluster.events == []


def test_gate_killed_between_scale_and_admit_converges(harness: Harness) -> None:
    h = harness
    for _ in range(3):
        h.tick(10)
    h.cluster.fail_next["admit"] = [ClusterError("admit: HTTP 503 Service Unavailable (retries exhausted)")]
    out = h.tick(10)
    assert out.error is not None and "503" in out.error
    assert h.dep.replicas == 5 and h.state("eval-b") == "parked"  # scaled, not admitted: capacity idle
    out = h.tick(10)  # the next tick recomputes from the objects
    assert out.plan is not None and out.plan.lent_after == 3
    assert h.state("eval-b") == "admitted" and h.dep.replicas == 5
    h.tick(10)
    assert h.state("sft-a") == "admitted" and h.dep.replicas == 3
    assert any(e.reason == "GateActionFailed" and e.warning for e in h.cluster.events)


def test_gate_killed_between_park_and_stop_loses_no_job(harness: Harness) -> None:
    h = harness
    lend_all(h)
    h.cluster.fail_next["stop"] = [ClusterError("stop: connection reset")]
    h.tick(70)
    assert ("serving", "sft-a-p1") in h.cluster.workflows or ("serving", "eval-b-p1") in h.cluster.workflows
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


def test_exit_hook_returns_replicas_and_records_gpu_seconds(harness: Harness) -> None:
    h = harness
    lend_all(h)
    wf = h.cluster.workflows[("serving", "eval-b")]
    wf["status"]["resourcesDuration"] = {"cpu": 100, "memory": 200, "nvidia.com/gpu": 43200}
    out = io.StringIO()
    done = return_gpus(h.cluster, namespace="serving", workflow_namespace="serving", workflow_name="eval-b",
                       service="chat", status="Succeeded", out=out)
    assert done.scaled_to == 6 and done.gpu_seconds == 43200
    assert h.dep.replicas == 6
    assert wf["metadata"]["annotations"][ANNOTATION_GPU_SECONDS] == "43200"
    assert h.state("eval-b") == "returned"
    again = return_gpus(h.cluster, namespace="serving", workflow_namespace="serving", workflow_name="eval-b",
                        service="chat", status="Succeeded", out=out)
    assert again.scaled_to is None and h.dep.replicas == 6  # idempotent
    h.tick(10)  # the gate agrees: only sft-a is lent, and it does not take eval-b's replicas again at once
    assert h.dep.replicas in (6, 3)
    assert sum(int(w["metadata"]["labels"]["offhours.io/replicas"]) for w in h.cluster.workflows.values()
               if w["metadata"]["labels"].get(LABEL_STATE) == "admitted") == 8 - h.dep.replicas


def test_exit_hook_waits_for_the_lease_then_gives_up_cleanly(harness: Harness) -> None:
    h = harness
    h.cluster.lease_holder, h.cluster.lease_until = "gate/other", 10_000.0
    with pytest.raises(ClusterError, match="lease stayed taken"):
        return_gpus(h.cluster, namespace="serving", workflow_namespace="serving", workflow_name="sft-a",
                    service="chat", status="Failed", lease_wait_seconds=4, sleep=lambda s: None)
    assert h.dep.replicas == 8 and h.state("sft-a") == "parked"


@pytest.mark.parametrize("text, names", [
    ('[{"displayName":"sft(0)","message":"OOMKilled"}]', ["sft(0)"]),
    ('"[{\\"displayName\\":\\"rl\\"}]"', ["rl"]),
    ('"null"', []), ("null", []), ("", []), ("not json", []),
])
def test_exit_hook_reads_workflow_failures(text: str, names: list[str]) -> None:
    from offhours.scripts.exit_hook import failed_nodes

    assert [n["displayName"] for n in failed_nodes(text)] == names


def test_reclaim_stops_the_job_whose_last_checkpoint_loses_least(harness: Harness, tmp_path: Path) -> None:
    from offhours.scripts.checkpoint import CheckpointStore
    from offhours.scripts.gate import store_progress

    h = harness
    for name in ("sft-a", "eval-b"):
        h.cluster.workflows[("serving", name)]["spec"]["arguments"]["parameters"] += [
            {"name": "checkpoint-uri", "value": f"file://{tmp_path}/ckpt"}, {"name": "run-id", "value": name}]
    h.gate.progress = store_progress
    lend_all(h)
    import time as clock

    # eval-b checkpointed a moment ago (through the job library); sft-a never did since its start an hour ago.
    CheckpointStore(f"file://{tmp_path}/ckpt/eval-b/eval/default").save(100, b"state")
    assert store_progress(next(j for j in h.cluster.jobs("serving", "chat") if j.name == "eval-b")) == \
        pytest.approx(clock.time(), abs=5)
    h.cluster.workflows[("serving", "eval-b")]["metadata"]["annotations"]["offhours.io/priority"] = "0"
    for name in ("sft-a", "eval-b"):
        h.cluster.workflows[("serving", name)]["status"]["startedAt"] = h.now - 3600
    out = h.tick(28)  # needs 4 of 8 replicas: one of the two jobs must go
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["eval-b"], h.log.getvalue()


def test_holds_are_one_counted_event_not_one_per_tick(harness: Harness) -> None:
    h = harness
    for _ in range(3):
        h.tick(10)  # the first ticks only hold (no full window yet)
    holds = [e for e in h.cluster.events if e.reason == "GateHold"]
    assert len(holds) == 1 and holds[0].count == 3
