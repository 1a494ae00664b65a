"""Benchmark: one gate read over 1,000 emulated vLLM replicas in 50 services.

Direct scrape path (1,000 HTTP GETs, parse, compute load) and PromQL path (Prometheus scraping
the same 1,000 endpoints), time and peak memory of the reading process. Baselines measured in
the same run: fetching the 1,000 pages without parsing them, and one trivial PromQL query. And a
reclaim check between ticks on the same fleet, each way: the read plus `decide` for every service
(no API request; a full tick's, with its API requests, is bench_tick.py's).
Goals: <= 2 s direct, <= 0.5 s PromQL, < 200 MB. Writes bench/results/gate.json.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "gate.json"
SERVICES, REPLICAS = 50, 20

READER = r"""
import json, resource, sys, time
from offhours.scripts.cluster.base import Pod
from offhours.scripts.metrics.sources import DirectSource, PrometheusSource, ServiceTarget
from offhours.scripts.inputs.pages import fetch_pages
import requests
mode, port, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pods = {f"svc-{s}": [Pod(f"svc-{s}-{i}", f"127.1.{s}.{i + 1}") for i in range({replicas})] for s in range({services})}
targets = [ServiceTarget(name, p) for name, p in pods.items()]
runs, cpu = [], []
for run in range(5):
    t0, c0 = time.perf_counter(), time.process_time()
    if mode == "direct":
        # Each read gets the samples of the one before, as the gate's ticks do: rates per engine series.
        out = DirectSource(port=port, concurrency=64).read(targets, time.time())
        targets = [ServiceTarget(name, p, out[name].samples) for name, p in pods.items()]
        assert all(r.load is not None and r.load.pods_read == ({replicas} if run else 0) for r in out.values()), out
    elif mode == "fetch-only":
        # The gate's own HTTP client, without the parsing.
        pages = list(fetch_pages([f"http://{p.ip}:{port}/metrics" for t in targets for p in t.pods], 5, 64, 1 << 24))
        assert len(pages) == {services} * {replicas} and all(isinstance(text, str) for _, text in pages)
    elif mode == "promql":
        out = PrometheusSource(url, window="1m").read(targets, time.time())
        assert all(r.error is None for r in out.values()), [r.error for r in out.values()][:3]
    elif mode == "promql-baseline":
        requests.get(f"{url}/api/v1/query", params={"query": "vector(1)"}, timeout=5).json()
    elif mode.startswith("check-"):
        # A reclaim check between ticks: one read of every service and `decide` on each (a replica lent
        # everywhere, so every service is read); what the gate does every reclaimCheckSeconds.
        if run == 0:
            from offhours.scripts.cluster.memory import MemoryCluster
            from offhours.scripts.config.loader import parse_config
            from offhours.scripts.gate.controller import Basis, Gate
            from offhours.scripts.gate.reclaim import ReclaimCheck
            from offhours.scripts.policy.record import ServiceRecord
            metrics = ({"source": "direct", "direct": {"port": port}} if mode == "check-direct"
                       else {"source": "prometheus", "prometheus": {"url": url, "window": "1m"}})
            config = parse_config({"tickSeconds": 60, "metrics": metrics, "services": {
                name: {"capacity": {"requestsPerSecond": 100}, "gpusPerReplica": 4} for name in pods}})
            source = (DirectSource(port=port, concurrency=64) if mode == "check-direct"
                      else PrometheusSource(url, window="1m"))
            check = ReclaimCheck(Gate(config, MemoryCluster(), source))
            check.basis = {name: Basis(config.service(name), {replicas}, 1, p, ServiceRecord()) for name, p in pods.items()}
        assert check.due() == [], "half of the capacity in use: nothing to give back"
    runs.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
print(json.dumps({"runs": runs, "cpu": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""".replace("{services}", str(SERVICES)).replace("{replicas}", str(REPLICAS))


def _reader(mode: str, port: int, url: str = "") -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", READER, mode, str(port), url], check=True, capture_output=True,
                         text=True, timeout=600)
    data = json.loads(out.stdout)
    # CPU seconds of the reading process too: unlike wall time, they hardly grow when the machine is shared.
    return {"median_s": statistics.median(data["runs"]), "min_s": min(data["runs"]),
            "cpu_median_s": statistics.median(data["cpu"]), "peak_rss_mb": data["peak_rss_mb"]}


def main() -> None:
    """Run the benchmark and write its results."""
    from tests.support.fleet import EmulatedService, free_port, start_fleet
    from tests.support.prometheus_fixture import running_prometheus, wait_for_samples, wait_for_targets

    port = free_port()
    services = [EmulatedService(f"svc-{s}", REPLICAS, subnet=s, port=port, ip_prefix="127.1") for s in range(SERVICES)]
    for svc in services:
        svc.feed(REPLICAS * 10, 60)
    fleet = start_fleet(services)
    try:
        result: dict[str, object] = {"machine": f"{platform.machine()} {platform.python_version()}",
                                     "endpoints": SERVICES * REPLICAS, "services": SERVICES,
                                     # The machine is shared: its load says how far the timings can be trusted.
                                     "load_average_1m_at_start": os.getloadavg()[0], "cpus": os.cpu_count()}
        result["direct"] = _reader("direct", port)
        result["direct_baseline_fetch_only"] = _reader("fetch-only", port)
        result["reclaim_check_direct"] = _reader("check-direct", port)
        with tempfile.TemporaryDirectory() as tmp, running_prometheus(services, Path(tmp), interval="5s") as url:
            wait_for_targets(url, SERVICES * REPLICAS, timeout=120)
            # Two scrapes of every target stored, so rate() has two points (asked of Prometheus, not slept).
            wait_for_samples(url, "vllm:num_requests_running", SERVICES * REPLICAS * 2, 2, "1m", timeout=180)
            result["promql"] = _reader("promql", port, url)
            result["promql_baseline_trivial_query"] = _reader("promql-baseline", port, url)
            result["reclaim_check_promql"] = _reader("check-promql", port, url)
        result["goals"] = {"direct_s": 2.0, "promql_s": 0.5, "peak_rss_mb": 200}
    finally:
        fleet.stop()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
