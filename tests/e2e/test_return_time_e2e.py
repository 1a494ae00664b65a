"""End to end: the time from a load step to serving capacity back, each phase timed by the gate itself.

Real: API server, scheduler (priority preemption), controller-manager, Argo controller, the gate's
run loop (`TickLoop`: a full tick, then reclaim checks every few seconds) as the gate's
ServiceAccount, its return-path watch (scripts/gate/return_watch.py) and the direct scraper over
HTTP, and the victim: the reference research job run as a local process by the pod runner, which
checkpoints on SIGTERM and exits (the scheduler's preemption deletes its pod with the job's grace;
kwok has no exec for Argo to signal it). Stand-ins: kwok nodes and the vLLM servers, emulated per
serving pod (by name, at its IP), which serve only `COLD_START` seconds after their pod is Ready (a known start).

Each step: load is low, the gate lends a replica, the reference job holds its GPUs (the cluster has no
other free GPU); the loop runs with tickSeconds 60; at t0 load steps up to need every replica. The
gate's watch times the reclaim's phases on its own monotonic clock (rise seen, decision, victims' pods
gone, scheduled, Ready, serving). The test asserts the phase histograms present and ordered (every
phase of every served reclaim counted, each >= 0, summing to the total), never their values; the
figures go to bench/results/return_time.json with what each includes: the control plane's part
(decision, the victim's real checkpoint exit, scheduling, Ready) apart from the emulated start.
"""

import io
import json
import platform
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.loop import TickLoop
from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.gate.return_watch import POLL_SECONDS, ReturnWatch
from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.metrics.sources import DirectSource
from offhours.scripts.policy.return_phases import OUTCOMES, PHASE_LABELS, PHASES, SERVED, TOTAL, ClosedReclaim

from .conftest import RESEARCH, SERVING, gate_config_raw, wait
from .runner import LocalPodRunner
from .test_gate_e2e import ServingLoad, gate_setup  # noqa: F401 - gate_setup is the fixture used below
from .test_pipeline_e2e import GROUP, VERSION, workflow
from .test_researcher_journey_e2e import LOCAL_IMAGE

CHECK_SECONDS = 5
TICK_SECONDS = 60
COLD_START = 3.0  # the emulated vLLM answers this long after its pod is Ready
VICTIM_GRACE = 20.0  # the reference job's grace: it checkpoints on SIGTERM and exits well inside it
STEPS = 3
RUN_FOR = 60.0  # each step's loop: long enough for the watch to follow the reclaim to serving
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "return_time.json"


class ColdLoad(ServingLoad):
    """ServingLoad whose emulated vLLM on a new pod answers only COLD_START s after the pod is first seen Ready.

    Keyed by pod name, not IP: kwok may give a new replica the IP its lent predecessor had, and an
    emulator keyed by IP would find that IP already serving and answer at once (a start measured as
    0 s). A pod whose IP another pod's emulator still holds takes it over: the old listener is closed
    (that vLLM is gone), and the new pod's opens only after its own emulated start.
    """

    def __init__(self, api: client.ApiClient, port: int) -> None:
        super().__init__(api, port)
        self.first_seen: dict[str, float] = {}  # pod name -> when first seen Ready
        self.by_pod: dict[str, EmulatedServer] = {}  # pod name -> its emulated vLLM, once started
        self.holder: dict[str, str] = {}  # IP -> the pod whose emulated vLLM listens there
        self.lock = threading.Lock()

    def ready_pods(self) -> list[tuple[str, str]]:
        """(name, IP) of every Ready chat pod not being deleted."""
        pods = self.core.list_namespaced_pod(SERVING, label_selector="app=chat").items
        return [(p.metadata.name, p.status.pod_ip) for p in pods
                if p.status.pod_ip and p.metadata.deletion_timestamp is None
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]

    def advance(self) -> None:
        with self.lock:
            now = time.monotonic()
            dt, self.last = now - self.last, now
            pods = self.ready_pods()
            for name, ip in pods:
                self.first_seen.setdefault(name, now)
                held_by = self.holder.get(ip)
                if held_by is not None and held_by != name:  # the IP went to a new pod: the old vLLM is gone
                    self.fleet.remove(ip, self.port)
                    self.by_pod.pop(held_by, None)
                    del self.holder[ip]
                if name not in self.by_pod and now - self.first_seen[name] >= COLD_START:
                    self.by_pod[name] = EmulatedServer(engines=2)
                    self.fleet.add(ip, self.port, self.by_pod[name])
                    self.holder[ip] = name
            serving = [name for name, _ in pods if name in self.by_pod]
            for name in serving:
                share = self.rps * dt / len(serving)
                self.by_pod[name].feed(share, share * 100, share * 10, dt)

    def serving(self) -> int:
        with self.lock:
            return len([name for name, _ in self.ready_pods() if name in self.by_pod])


class KeptMetrics(ReturnMetrics):
    """The gate's return metrics, keeping each ended reclaim too (the figures per step)."""

    def __init__(self, services: list[str]) -> None:
        super().__init__(services)
        self.ended: list[ClosedReclaim] = []

    def record(self, closed: ClosedReclaim) -> None:
        super().record(closed)
        self.ended.append(closed)


def reference_job(name: str, tmp: Path) -> dict[str, Any]:
    """A parked offhours-job workflow running the reference job (checkpoint every 50 steps, on SIGTERM too)."""
    params = {"service": "chat", "replicas": "1", "run-id": name, "image": LOCAL_IMAGE, "gpus": "4",
              "output-uri": f"file://{tmp}/out", "checkpoint-uri": f"file://{tmp}/ckpt",
              "node-selector": '{"offhours.io/pool": "inference"}',
              "termination-grace-seconds": str(int(VICTIM_GRACE)),
              "args": json.dumps(["--steps", "100000", "--every", "50", "--step-seconds", "0.05"])}
    wf = workflow(name, "offhours-job", params, suspend=True)
    wf["metadata"]["labels"] = {"offhours.io/service": "chat", "offhours.io/replicas": "1",
                                "offhours.io/state": "parked", "offhours.io/managed": "true"}
    return wf


def training(runner: LocalPodRunner, workflow: str) -> str:
    """What the job step's pod of `workflow` printed so far."""
    return "".join(line for (ns, pod), lines in list(runner.outputs.items())
                   if ns == RESEARCH and pod.startswith(f"{workflow}-job-") for line in list(lines))


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def test_capacity_is_back_and_the_gate_times_each_phase(api: client.ApiClient, gate_setup: dict[str, Any],  # noqa: F811
                                                        runner: LocalPodRunner, tmp_path: Path) -> None:
    custom, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    load = ColdLoad(api, gate_setup["load"].port)  # the fixture's own emulator has served nothing yet
    raw = {**gate_config_raw(load.port), "tickSeconds": TICK_SECONDS, "reclaimCheckSeconds": CHECK_SECONDS}
    raw["metrics"] = {**raw["metrics"], "maxSampleAgeSeconds": 600}
    log = Logger(io.StringIO())  # the loop's own lines; the gate's go to the fixture's log
    feeding = threading.Event()
    metrics = KeptMetrics(["chat"])

    def feed() -> None:
        while not feeding.wait(0.25):
            load.advance()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    figures: list[float] = []
    victims: list[str] = []
    try:
        wait("16 replicas serving", lambda: load.serving() == 16, timeout=60, every=0.5)
        for step in range(STEPS):
            wait("16 replicas serving", lambda: load.serving() == 16, timeout=60, every=0.5)
            name = f"return-{step}-{int(time.time())}"
            out = gate_setup["log"]
            gate = Gate(parse_config(raw), KubeCluster(gate_setup["gate_api"]), DirectSource(port=load.port), out=out,
                        holder=f"gate/e2e-return-{step}")
            store = tmp_path / f"store-{step}"  # not named after the run id: steps add /<run-id>/<step> themselves
            store.mkdir()
            custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", reference_job(name, store))
            load.rps = 5.0  # needs 1 replica of 16
            for _ in range(6):  # full ticks until the replica is lent (rates need two scrapes, then the 1 s window)
                time.sleep(1.2)
                gate.tick()
                if apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15:
                    break
            assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15, out.getvalue()
            try:
                wait("the reference job training on the lent GPUs", lambda: "start at step" in training(runner, name),
                     timeout=180)
            except AssertionError as err:
                wf = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
                raise AssertionError(f"{err}; workflow: {wf['metadata'].get('labels')} {wf.get('status')}; "
                                     f"pods run: {[(r.pod, r.exit_code, r.output[-300:]) for r in runner.ran]}; "
                                     f"running: {[p for _, p in runner.outputs]}") from None
            victims.append(name)
            loop = TickLoop(gate, seconds=RUN_FOR, log=log, watch=ReturnWatch(gate, metrics))
            loop_thread = threading.Thread(target=loop.run, daemon=True)
            loop_thread.start()  # a full tick now; then, with nothing to lend more, a check every CHECK_SECONDS
            time.sleep(2.0 + random.uniform(0.0, CHECK_SECONDS))  # t0 anywhere in a check period
            t0 = time.monotonic()
            load.rps = 150.0  # needs every replica
            wait("capacity back: 16 replicas Ready and serving", lambda: (
                (apps.read_namespaced_deployment("chat", SERVING).status.ready_replicas or 0) == 16
                and load.serving() == 16), timeout=RUN_FOR, every=0.2)
            figures.append(time.monotonic() - t0)
            wait("the gate's watch to see it serving", lambda: len(metrics.ended) == step + 1,
                 timeout=RUN_FOR, every=0.2)
            loop_thread.join(RUN_FOR + 30)
            assert not loop_thread.is_alive()
            assert figures[-1] < TICK_SECONDS, "seen by a check, not by the next tick"
            wf = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
            assert wf["metadata"]["labels"]["offhours.io/state"] == "preempted" and wf["spec"]["shutdown"] == "Stop"
            train = wait("the victim's training to exit", lambda: [r for r in runner.ran
                                                                  if r.pod.startswith(f"{name}-job-")], timeout=60)
            # The real exit: SIGTERM from the preemption, a checkpoint, exit 75 (not an instant delete).
            assert train[0].exit_code == 75 and "SIGTERM: checkpointed at step" in train[0].output, train[0].output[-300:]
            custom.delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")
            wait("the research pods gone", lambda: not core.list_namespaced_pod(RESEARCH).items, timeout=90)
    finally:
        feeding.set()
        feeder.join()
        load.stop()
    page = parse(metrics.render())
    counts = {s.label("phase"): s.value for s in page.samples if s.name == "offhours_return_phase_seconds_count"}
    sums = {s.label("phase"): s.value for s in page.samples if s.name == "offhours_return_phase_seconds_sum"}
    outcomes = {s.label("outcome"): s.value for s in page.samples if s.name == "offhours_return_reclaims_total"}
    # Present: every phase of every reclaim, each reclaim served (none superseded, cancelled or abandoned).
    assert counts == dict.fromkeys(PHASE_LABELS, float(STEPS)) and set(outcomes) == set(OUTCOMES)
    assert outcomes[SERVED] == STEPS and sum(outcomes.values()) == STEPS, outcomes
    # Ordered: each reclaim's milestones in order (phases >= 0) and its phases adding up to its total.
    served = [c for c in metrics.ended if c.outcome == SERVED]
    assert len(served) == STEPS
    for c in served:
        assert all(c.phases[p] >= 0 for p in PHASE_LABELS) and c.phases[TOTAL] == sum(c.phases[p] for p in PHASES)
    assert abs(sums[TOTAL] - sum(sums[p] for p in PHASES)) < 1e-6
    control_plane = [sum(c.phases[p] for p in ("decision", "victims_exit", "scheduling", "start")) for c in served]
    result = {
        "what": "a load step -> capacity back on the local control plane; each reclaim's phases timed by the gate's "
                "own watch (scripts/gate/return_watch.py) on its monotonic clock, at its poll period",
        "includes": {
            "decision": "rise seen (the check's read began) -> the reclaim pass answered (serving raised, victim stopped)",
            "victims_exit": "-> the victim's pods ended: the reference job's real checkpoint-on-SIGTERM exit after "
                            "the scheduler's preemption (local process, grace %g s)" % VICTIM_GRACE,
            "scheduling": "-> the replacement replica bound to a (kwok) node",
            "start": "-> the replacement Ready (kwok's stages: no image pull, no real container start)",
            "serving": "-> its vLLM metrics answering: the EMULATED start, %g s after Ready by construction" % COLD_START,
            "control_plane": "decision + victims_exit + scheduling + start: the measured part",
            "capacity_back": "the test's own clock: t0 (load stepped) -> 16 Ready and serving; includes the wait "
                             "for the next check (rates over one check period)",
        },
        "assumes": "kwok nodes (no image pull, no real vLLM load), the emulated cold start; a real fleet's start "
                   "comes from `offhours calibrate` on its own histograms or bench/gpu",
        "check_seconds": CHECK_SECONDS, "tick_seconds": TICK_SECONDS, "poll_seconds": POLL_SECONDS,
        "cold_start_seconds": COLD_START, "victim_grace_seconds": VICTIM_GRACE, "steps": len(figures),
        "phases_seconds": {p: [round(c.phases[p], 2) for c in served] for p in PHASE_LABELS},
        "phases_p50_seconds": {p: p50([c.phases[p] for c in served]) for p in PHASE_LABELS},
        "control_plane_seconds": [round(v, 2) for v in control_plane],
        "control_plane_p50_seconds": p50(control_plane),
        "emulated_start_seconds": [round(c.phases["serving"], 2) for c in served],
        "capacity_back_seconds": [round(f, 2) for f in figures],
        "capacity_back_p50_seconds": p50(figures),
        "machine": platform.platform(),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
