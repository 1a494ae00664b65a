"""Benchmark: what one gate tick costs on the local control plane — API requests, API time, metrics time.

Real: the local control plane's API server (`make cluster-up`; started here if it is not up, and
stopped again), Prometheus (Debian's package) scraping emulated vLLM pods on the serving pods'
own IPs, and the gate itself with its `KubeCluster` and load sources. The gate ticks back to back
over SERVICES Deployments of REPLICAS replicas each, in Prometheus mode and in direct mode, with a
queued job per service so that every tick reads the research queue too. Every API request the
gate makes is counted (method and path template) and timed at the client.

Baselines in the same run: one `GET /version` (the API server's floor for one request) and one
trivial PromQL query. The figure that matters for ticks every 10-15 s is the tick's wall time
against that interval, and requests per second against the API server's budget: at a 10 s tick,
requests per tick / 10. Writes bench/results/tick.json.
"""

import dataclasses
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from kubernetes import client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / os.environ.get("OFFHOURS_BENCH_RESULT", "tick.json")
STATE = Path(os.environ.get("OFFHOURS_CLUSTER_DIR", "/tmp/offhours-cluster"))
SERVING, RESEARCH = "bench-serving", "bench-research"
# 10 x 10 by default; OFFHOURS_BENCH_SERVICES / _REPLICAS for the 1,000-replica fleet of bench_gate.py (50 x 20).
SERVICES = int(os.environ.get("OFFHOURS_BENCH_SERVICES", "10"))
REPLICAS = int(os.environ.get("OFFHOURS_BENCH_REPLICAS", "10"))
TICKS = CHECKS = int(os.environ.get("OFFHOURS_BENCH_TICKS", "15"))  # fewer for the 1,000-replica run
RPS_PER_REPLICA = 5.0  # half of each replica's capacity: the gate would lend, a queued job waits for it


class CountingApiClient(client.ApiClient):
    """An API client that records each request's method, path template and client-side time."""

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration)
        self.calls: list[tuple[str, str, float]] = []

    def call_api(self, resource_path: str, method: str, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        started = time.perf_counter()
        try:
            return super().call_api(resource_path, method, *args, **kwargs)
        finally:
            self.calls.append((method, resource_path, time.perf_counter() - started))


@dataclass
class TimedSource:
    """A load source that records how long each read took."""

    inner: Any
    seconds: float = 0.0

    def read(self, targets: Sequence[Any], now: float) -> Mapping[str, Any]:
        """Read through the wrapped source, timing it."""
        started = time.perf_counter()
        try:
            return self.inner.read(targets, now)
        finally:
            self.seconds = time.perf_counter() - started


@dataclass
class PodsOf:
    """One service's emulated pods as the Prometheus fixture wants them: name, IPs, port."""

    name: str
    ips: list[str]
    port: int


def _cluster_up() -> bool:
    """Start the local control plane unless it runs; return whether this run started it."""
    if (STATE / "env").exists():
        return False
    subprocess.run([sys.executable, str(REPO / "scripts" / "controlplane" / "lifecycle.py"), "up"], check=True)
    return True


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name, "offhours.io/service": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": SERVING,
                                                                         "labels": labels},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"offhours.io/pool": "inference"},
                         "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.12.0",
                                         "resources": {"requests": {"cpu": "10m"}}}]}}}}


def _queued_job(service: str) -> dict[str, Any]:
    """A parked research workflow for `service` that asks for every replica (so it stays queued)."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": f"job-{service}", "namespace": RESEARCH,
                         "labels": {"offhours.io/service": service, "offhours.io/replicas": str(REPLICAS),
                                    "offhours.io/state": "parked", "offhours.io/managed": "true"}},
            "spec": {"suspend": True, "entrypoint": "main", "templates": [{"name": "main", "suspend": {}}]}}


def _ready_ips(core: client.CoreV1Api, name: str) -> list[str]:
    pods = core.list_namespaced_pod(SERVING, label_selector=f"app={name}").items
    return sorted(p.status.pod_ip for p in pods if p.status.pod_ip and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))


def _setup(admin: client.ApiClient) -> dict[str, list[str]]:
    core, apps, custom = client.CoreV1Api(admin), client.AppsV1Api(admin), client.CustomObjectsApi(admin)
    for ns in (SERVING, RESEARCH):
        try:
            core.create_namespace({"metadata": {"name": ns}})
        except client.ApiException as err:
            if err.status != 409:
                raise
    for s in range(SERVICES):
        apps.create_namespaced_deployment(SERVING, _deployment(f"svc-{s}"))
        custom.create_namespaced_custom_object("argoproj.io", "v1alpha1", RESEARCH, "workflows",
                                               _queued_job(f"svc-{s}"))
    deadline = time.monotonic() + max(180, 0.5 * SERVICES * REPLICAS)  # kwok readies 1,000 pods in minutes on 2 cores
    while time.monotonic() < deadline:
        ips = {f"svc-{s}": _ready_ips(core, f"svc-{s}") for s in range(SERVICES)}
        if all(len(v) == REPLICAS for v in ips.values()):
            return ips
        time.sleep(1)
    raise RuntimeError(f"the bench Deployments did not become ready: {ips}")


def _teardown(admin: client.ApiClient) -> None:
    core = client.CoreV1Api(admin)
    for ns in (SERVING, RESEARCH):
        try:
            core.delete_namespace(ns)
        except client.ApiException as err:
            if err.status != 404:
                raise


def _gate_config(metrics: dict[str, Any]) -> dict[str, Any]:
    return {"namespace": SERVING, "workflowNamespace": RESEARCH, "tickSeconds": 10, "metrics": metrics,
            "services": {f"svc-{s}": {"deployment": f"svc-{s}", "gpusPerReplica": 4,
                                      "capacity": {"requestsPerSecond": 10}, "headroom": 0.25,
                                      "stabilizationSeconds": 3600, "minReplicas": 1} for s in range(SERVICES)}}


@dataclass
class Sample:
    """One timed call of the gate (a tick or a check): its wall time and the API requests it made."""

    wall: float
    api_seconds: float
    requests: Counter[str]
    metrics_seconds: float
    result: Any


def _measure(runs: int, feed: Any, api: CountingApiClient, timed: TimedSource, call: Any) -> list[Sample]:
    """Feed the emulated pods, then time `call()` with its API requests counted; `runs` times back to back."""
    samples = []
    for _ in range(runs):
        feed()
        api.calls.clear()
        timed.seconds = 0.0
        started = time.perf_counter()
        result = call()
        wall = time.perf_counter() - started
        samples.append(Sample(wall, sum(c[2] for c in api.calls),
                              Counter(f"{method} {path}" for method, path, _ in api.calls), timed.seconds, result))
    return samples


def _ticks(kubeconfig: str, raw: dict[str, Any], source: Any, feed: Any) -> dict[str, Any]:
    """Tick the gate TICKS times back to back, then check CHECKS times; medians after the first of each."""
    from offhours.scripts.cluster.kube import KubeCluster
    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.gate.controller import Gate
    from offhours.scripts.gate.reclaim import ReclaimCheck

    conf = client.Configuration()
    kube_config.load_kube_config(config_file=kubeconfig, client_configuration=conf)
    api = CountingApiClient(conf)
    timed = TimedSource(source)
    gate = Gate(parse_config(raw), KubeCluster(api), timed, out=io.StringIO(), holder="gate/bench")
    ticks = _measure(TICKS, feed, api, timed, gate.tick)
    for t in ticks:
        assert all(o.error is None for o in t.result), [o.error for o in t.result if o.error][:3]
    # Checks as if a replica were lent, so that each one reads and decides.
    check = ReclaimCheck(gate)
    check.remember(ticks[-1].result)
    check.basis = {name: dataclasses.replace(b, lent=1) for name, b in check.basis.items()}
    checks = _measure(CHECKS, feed, api, timed, check.due)
    assert all(c.result == [] for c in checks), [c.result for c in checks]  # half the capacity in use: none due
    steady = sorted(ticks[1:], key=lambda t: t.wall)[(TICKS - 1) // 2]  # the median tick after the first
    return {"reclaim_check": {"check_median_s": statistics.median(c.wall for c in checks[1:]),
                              "check_max_s": max(c.wall for c in checks[1:]),
                              "check_metrics_seconds_median": statistics.median(c.metrics_seconds for c in checks[1:]),
                              "api_requests_per_check_median": statistics.median(
                                  sum(c.requests.values()) for c in checks)},
            "tick_median_s": statistics.median(t.wall for t in ticks[1:]), "tick_max_s": max(t.wall for t in ticks[1:]),
            "first_tick_s": ticks[0].wall,
            "api_seconds_median": statistics.median(t.api_seconds for t in ticks[1:]),
            "metrics_seconds_median": statistics.median(t.metrics_seconds for t in ticks[1:]),
            "api_requests_per_tick_median": statistics.median(sum(t.requests.values()) for t in ticks[1:]),
            "api_requests_per_second_at_10s_ticks": statistics.median(sum(t.requests.values()) for t in ticks[1:]) / 10,
            "requests_of_the_median_tick": dict(sorted(steady.requests.items(), key=lambda kv: -kv[1]))}


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
    from offhours.scripts.metrics.sources import DirectSource, PrometheusSource
    from tests.support.fleet import free_port
    from tests.support.prometheus_fixture import running_prometheus, wait_for_samples, wait_for_targets

    started_cluster = _cluster_up()
    env = dict(line.split("=", 1) for line in (STATE / "env").read_text().split())
    admin = kube_config.new_client_from_config(env["KUBECONFIG"])
    _teardown(admin)
    while any(ns.metadata.name in (SERVING, RESEARCH) for ns in client.CoreV1Api(admin).list_namespace().items):
        time.sleep(1)  # an earlier run's namespaces still terminating
    port = free_port()
    fleet = None
    try:
        ips = _setup(admin)
        servers = {ip: EmulatedServer(engines=1) for pods in ips.values() for ip in pods}
        fleet = Fleet([(ip, port, server) for ip, server in servers.items()]).start()
        last = [time.monotonic()]

        def feed() -> None:
            now = time.monotonic()
            dt, last[0] = now - last[0], now
            for server in servers.values():
                server.feed(RPS_PER_REPLICA * dt, RPS_PER_REPLICA * dt * 122, RPS_PER_REPLICA * dt * 15, dt)

        result: dict[str, Any] = {"machine": f"{platform.machine()} {platform.python_version()}",
                                  "cpus": os.cpu_count(), "load_average_1m_at_start": os.getloadavg()[0],
                                  "services": SERVICES, "replicas_per_service": REPLICAS, "ticks": TICKS}
        versions = []
        for _ in range(20):
            t0 = time.perf_counter()
            client.VersionApi(admin).get_code()
            versions.append(time.perf_counter() - t0)
        result["baseline_api_get_version_median_s"] = statistics.median(versions)
        result["direct"] = _ticks(env["KUBECONFIG"], _gate_config(
            {"source": "direct", "direct": {"port": port, "timeoutSeconds": 2}}), DirectSource(port=port), feed)
        with tempfile.TemporaryDirectory() as tmp, running_prometheus(
                [PodsOf(name, pods, port) for name, pods in ips.items()], Path(tmp), interval="2s") as url:  # type: ignore[list-item]
            wait_for_targets(url, SERVICES * REPLICAS, timeout=120)
            wait_for_samples(url, "vllm:num_requests_running", SERVICES * REPLICAS, 2, "1m", timeout=120)
            source = PrometheusSource(url, window="1m")
            result["promql"] = _ticks(env["KUBECONFIG"], _gate_config(
                {"source": "prometheus", "prometheus": {"url": url, "window": "1m"}}), source, feed)
            t0 = time.perf_counter()
            requests.get(f"{url}/api/v1/query", params={"query": "vector(1)"}, timeout=5).json()
            result["baseline_promql_trivial_query_s"] = time.perf_counter() - t0
    finally:
        if fleet is not None:
            fleet.stop()
        _teardown(admin)
        if started_cluster:
            subprocess.run([sys.executable, str(REPO / "scripts" / "controlplane" / "lifecycle.py"), "down"], check=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
