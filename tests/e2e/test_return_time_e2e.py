"""End to end: the time from a load step to serving capacity back, with a research job on the GPUs serving needs.

Real: API server, scheduler (priority preemption), controller-manager, Argo controller, the gate's
run loop (`TickLoop`: a full tick, then reclaim checks every few seconds) as the gate's
ServiceAccount, the direct scraper over HTTP. Stand-ins: kwok nodes (a research pod's deletion is
immediate there: the victim's grace is 0 s) and the vLLM servers, emulated on each serving pod's IP,
which serve only `COLD_START` seconds after their pod is Ready (the emulator's cold start, known).

Each step: load is low, the gate lends a replica, a research job holds its GPUs (the cluster has
no other free GPU); the loop runs with tickSeconds 60; at t0 load steps up to need every replica.
Capacity is back when the new replica is Ready and its emulated vLLM answers. The bound is two
check periods (a step partway through a period shows whole at the next check: rates are taken over
one period) + the victim's grace + the cold start + scheduling slack: well inside one tick.
The figures of the run are written to bench/results/return_time.json.
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
from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.sources import DirectSource

from .conftest import RESEARCH, SERVING, gate_config_raw, wait
from .runner import LocalPodRunner
from .test_gate_e2e import ServingLoad, _job, gate_setup  # noqa: F401 - gate_setup is the fixture used below
from .test_pipeline_e2e import GROUP, VERSION

CHECK_SECONDS = 5
TICK_SECONDS = 60
COLD_START = 3.0  # the emulated vLLM answers this long after its pod is Ready
VICTIM_GRACE = 0.0  # kwok deletes a pod at once
SLACK = 10.0  # the reclaim's writes, the ReplicaSet controller, the scheduler's preemption, kwok's stages
STEPS = 3
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "return_time.json"


class ColdLoad(ServingLoad):
    """ServingLoad whose emulated vLLM on a new pod answers only COLD_START s after the pod is first seen Ready."""

    def __init__(self, api: client.ApiClient, port: int) -> None:
        super().__init__(api, port)
        self.first_seen: dict[str, float] = {}
        self.lock = threading.Lock()

    def advance(self) -> None:
        with self.lock:
            now = time.monotonic()
            dt, self.last = now - self.last, now
            ips = self.ready_ips()
            for ip in ips:
                self.first_seen.setdefault(ip, now)
                if ip not in self.servers and now - self.first_seen[ip] >= COLD_START:
                    self.servers[ip] = EmulatedServer(engines=2)
                    self.fleet.add(ip, self.port, self.servers[ip])
            serving = [ip for ip in ips if ip in self.servers]
            for ip in serving:
                share = self.rps * dt / len(serving)
                self.servers[ip].feed(share, share * 100, share * 10, dt)

    def serving(self) -> int:
        with self.lock:
            return len([ip for ip in self.ready_ips() if ip in self.servers])


def test_capacity_is_back_within_check_grace_cold_start_and_slack(api: client.ApiClient, gate_setup: dict[str, Any],  # noqa: F811
                                                                   runner: LocalPodRunner) -> None:
    custom, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    load = ColdLoad(api, gate_setup["load"].port)  # the fixture's own emulator has served nothing yet
    raw = {**gate_config_raw(load.port), "tickSeconds": TICK_SECONDS, "reclaimCheckSeconds": CHECK_SECONDS}
    raw["metrics"] = {**raw["metrics"], "maxSampleAgeSeconds": 600}
    log = Logger(io.StringIO())  # the loop's own lines; the gate's go to the fixture's log
    feeding = threading.Event()

    def feed() -> None:
        while not feeding.wait(0.25):
            load.advance()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    bound = 2 * CHECK_SECONDS + VICTIM_GRACE + COLD_START + SLACK
    figures: list[float] = []
    try:
        wait("16 replicas serving", lambda: load.serving() == 16, timeout=60, every=0.5)
        for step in range(STEPS):
            wait("16 replicas serving", lambda: load.serving() == 16, timeout=60, every=0.5)
            name = f"return-{step}-{int(time.time())}"
            out = gate_setup["log"]
            gate = Gate(parse_config(raw), KubeCluster(gate_setup["gate_api"]), DirectSource(port=load.port), out=out,
                        holder=f"gate/e2e-return-{step}")
            custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", _job(name))
            load.rps = 5.0  # needs 1 replica of 16
            for _ in range(6):  # full ticks until the replica is lent (rates need two scrapes, then the 1 s window)
                time.sleep(1.2)
                gate.tick()
                if apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15:
                    break
            assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15, out.getvalue()
            wait("the research pod on the lent GPUs", lambda: [
                p for p in core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}")
                .items if p.status.phase == "Running"], timeout=60)
            run_for = 30.0
            loop = TickLoop(gate, seconds=run_for, log=log)
            loop_thread = threading.Thread(target=loop.run, daemon=True)
            loop_thread.start()  # a full tick now; then, with nothing to lend more, a check every CHECK_SECONDS
            time.sleep(2.0 + random.uniform(0.0, CHECK_SECONDS))  # t0 anywhere in a check period
            t0 = time.monotonic()
            load.rps = 150.0  # needs every replica
            wait("capacity back: 16 replicas Ready and serving", lambda: (
                (apps.read_namespaced_deployment("chat", SERVING).status.ready_replicas or 0) == 16
                and load.serving() == 16), timeout=bound * 3, every=0.2)
            figures.append(time.monotonic() - t0)
            loop_thread.join(run_for + 30)
            assert not loop_thread.is_alive()
            assert figures[-1] < TICK_SECONDS, "seen by a check, not by the next tick"
            wf = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
            assert wf["metadata"]["labels"]["offhours.io/state"] == "preempted" and wf["spec"]["shutdown"] == "Stop"
            custom.delete_collection_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows")
            wait("the research pods gone", lambda: not core.list_namespaced_pod(RESEARCH).items, timeout=60)
    finally:
        feeding.set()
        feeder.join()
        load.stop()
    ordered = sorted(figures)
    result = {
        "what": "load step -> capacity back (new replica Ready and its emulated vLLM serving), local control plane",
        "check_seconds": CHECK_SECONDS, "tick_seconds": TICK_SECONDS, "cold_start_seconds": COLD_START,
        "victim_grace_seconds": VICTIM_GRACE, "slack_seconds": SLACK, "bound_seconds": bound,
        "steps": len(figures), "seconds": [round(f, 2) for f in figures],
        "p50_seconds": round(statistics.median(ordered), 2),
        "p99_seconds": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "machine": platform.platform(),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    assert max(figures) <= bound, result
