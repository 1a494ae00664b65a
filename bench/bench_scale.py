"""Benchmark: one gate tick at fleet scale: 500 services x 20 replicas, 10,000 workflows, PromQL.

The gate is the real one (`Gate.tick`), its load source the real `PrometheusSource` querying an
in-process HTTP server that answers the gate's eight PromQL queries with one series per service
(500 series each; the server shares the process and its CPU). The cluster is the in-memory one,
behind a counter of API calls and of the bytes that would cross the wire: each answer's and each
request body's JSON. It lists workflows the way
the API server does for the gate's selector (the service's label, Argo's completed ones left out);
the objects are the in-memory cluster's, so real ones (managedFields, status) weigh more.

The fleet: every service has 16 finished workflows (retained by Argo) and 4 parked jobs. Ticks:
three that see the load low (lending starts once it has been low for the 60 s window: 2,000 admissions
in one tick), then one where every service's load rises (a reclaim of all 500, 2,000 stops and parked
copies: each service's raise must come before any research-side write of any service). Reported per
tick: wall time, API calls by kind, bytes, the tracemalloc peak (a separate, traced run) and the
process's peak RSS; and whether every serving write came first. Writes bench/results/scale.json.

`python bench/bench_scale.py hostile`: the same fleet and ticks twice in one run, without and with 5,000 hostile
workflows spread over the services (a tenant's: labels claiming admission, a status forged to say Succeeded or
Running, copies pointing at an original, another run's id), to show that a tick's API calls, time and memory do
not grow with what tenants create beyond the gate's per-tick budgets. Writes bench/results/scale_hostile.json.
"""

import io
import json
import os
import platform
import resource
import sys
import threading
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, is_dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from offhours.scripts.cluster.memory import MemoryCluster  # noqa: E402
from offhours.scripts.cluster.workflow import workflow_job  # noqa: E402
from offhours.scripts.config.loader import parse_config  # noqa: E402
from offhours.scripts.gate.controller import Gate  # noqa: E402
from offhours.scripts.metrics.prometheus import queries  # noqa: E402
from offhours.scripts.metrics.sources import PrometheusSource  # noqa: E402
from offhours.scripts.policy.plan import Job  # noqa: E402
from offhours.workflows.render import manifests  # noqa: E402

RESULTS = REPO / "bench" / "results" / "scale.json"
HOSTILE_RESULTS = REPO / "bench" / "results" / "scale_hostile.json"
HOSTILE = 5000
SERVICES, REPLICAS, FINISHED, PARKED = 500, 20, 16, 4
SERVING, RESEARCH = "serving", "research"
CAPACITY_RPS = 10.0
SERVING_WRITES = ("scale", "set-max")
RESEARCH_WRITES = ("admit", "adopt", "stop", "park-copy", "delete", "annotate-workflow")
COMPLETED = "workflows.argoproj.io/completed"


def _size(value: Any) -> int:
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    elif isinstance(value, list):
        value = [asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for v in value]
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return len(str(value))


class ScaleCluster(MemoryCluster):
    """The in-memory cluster, listing like the API server, counting calls and (when asked) bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.count_bytes = False
        self.bytes_in = 0
        self.bytes_out = 0
        self.writes: list[str] = []  # the order of writes, for the serving-first check
        self._index: dict[str, list[tuple[str, str]]] = {}
        self._indexed = -1

    def _call(self, what: str) -> None:
        super()._call(what)
        kind = what.split(" ")[0]
        if kind in SERVING_WRITES or kind in RESEARCH_WRITES or kind == "write-state":
            self.writes.append(kind)

    def jobs(self, namespace: str, service: str) -> list[Job]:
        # As the API server answers the gate's selector: that service's workflows, none that Argo marked completed.
        self._call(f"list-workflows {service}")
        if self._indexed != len(self.workflows):
            self._index = {}
            for key, wf in self.workflows.items():
                labels = wf["metadata"]["labels"]
                self._index.setdefault(labels.get("offhours.io/service", ""), []).append(key)
            self._indexed = len(self.workflows)
        items = [self.workflows[k] for k in self._index.get(service, ()) if k[0] == namespace and k in self.workflows
                 and self.workflows[k]["metadata"]["labels"].get(COMPLETED) != "true"]
        if self.count_bytes:
            self.bytes_in += _size(items)
        return [job for wf in items if (job := workflow_job(wf, service)) is not None]

    def workflow_templates(self, namespace: str) -> dict[str, dict[str, Any]]:
        # The API server answers the whole WorkflowTemplate objects.
        if self.count_bytes:
            self.bytes_in += _size([t for (ns, _), t in self.templates.items() if ns == namespace])
        return super().workflow_templates(namespace)

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in _COUNTED and callable(attr):
            def counted(*args: Any, **kwargs: Any) -> Any:
                result = attr(*args, **kwargs)
                if self.count_bytes:
                    self.bytes_out += sum(_size(a) for a in args[1:]) if name in _WRITES else 0
                    self.bytes_in += _size(result) if result is not None else 0
                return result
            return counted
        return attr


# state_services: the gate's metadata-only list of its records, counted as the names it answers (a real answer
# carries each ConfigMap's metadata too: a few hundred bytes per record, whatever the record holds).
_COUNTED = {"deployment", "autoscaler", "read_state", "ready_pods", "workflow", "write_state", "lower_serving", "raise_serving",
            "admit", "stop", "park_copy", "annotate_workflow", "record_event", "lease_notes", "state_services"}
_WRITES = {"write_state", "lower_serving", "raise_serving", "admit", "stop", "park_copy", "annotate_workflow",
           "record_event"}


class Prometheus:
    """Answers the gate's PromQL instant queries: one series per service, the load set by `rps`."""

    def __init__(self, services: list[str]) -> None:
        self.services, self.rps = services, 0.3 * REPLICAS * CAPACITY_RPS
        self.by_query = {promql: key for key, promql in queries("service", "1m").items()}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                promql = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
                key = outer.by_query.get(promql)
                value = {"request_rate": outer.rps, "prompt_token_rate": outer.rps * 100,
                         "generation_token_rate": outer.rps * 10, "running": 2.0, "waiting": 0.0,
                         "kv_cache_usage": 0.2, "pods": float(REPLICAS), "newest_sample_age": 5.0}.get(key or "", 0.0)
                now = time.time()
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {"service": s}, "value": [now, repr(value)]} for s in outer.services]}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def fleet() -> tuple[ScaleCluster, list[str]]:
    cluster = ScaleCluster()
    names = [f"svc-{i:03d}" for i in range(SERVICES)]
    for template in manifests().values():  # the library's WorkflowTemplates, as installed: the gate lists them
        if template.get("kind") == "WorkflowTemplate":
            cluster.templates[(RESEARCH, template["metadata"]["name"])] = template
    for name in names:
        dep = cluster.add_deployment(SERVING, name, REPLICAS)
        cluster.pods[(SERVING, dep.name)] = cluster.pods[(SERVING, dep.name)][:REPLICAS]
        for j in range(FINISHED):
            wf = cluster.add_workflow(RESEARCH, f"{name}-done-{j}", name, 2, state="returned", phase="Succeeded",
                                      created=float(j))
            wf["metadata"]["labels"][COMPLETED] = "true"
        for j in range(PARKED):
            cluster.add_workflow(RESEARCH, f"{name}-job-{j}", name, 1 + j % 3, created=100.0 + j, priority=j % 2)
    return cluster, names


def gate_config(names: list[str], url: str) -> Any:
    return parse_config({
        "namespace": SERVING, "workflowNamespace": RESEARCH, "tickSeconds": 60,
        "metrics": {"source": "prometheus", "maxAgeSeconds": 180, "prometheus": {"url": url, "timeoutSeconds": 30}},
        "services": {n: {"capacity": {"requestsPerSecond": CAPACITY_RPS}, "headroom": 0.25, "stabilizationSeconds": 60,
                         "maxLendStep": 8, "trend": False} for n in names},
    })


def serving_first(writes: list[str]) -> bool:
    first_research = next((i for i, w in enumerate(writes) if w in RESEARCH_WRITES), len(writes))
    return not any(w in SERVING_WRITES for w in writes[first_research:])


def add_hostile(cluster: ScaleCluster, names: list[str], n: int) -> None:
    """Add n workflows a tenant made to multiply the gate's work, spread over the services, of four kinds."""
    for i in range(n):
        service, kind, name = names[i % len(names)], i % 4, f"hostile-{i:05d}"
        if kind == 0:  # labelled admitted and running: the gate never admitted it
            cluster.add_workflow(RESEARCH, name, service, 1, state="admitted", created=50.0)
        elif kind == 1:  # labelled admitted, its status forged to say it succeeded (Argo has not marked it completed)
            cluster.add_workflow(RESEARCH, name, service, 1, state="admitted", phase="Succeeded", created=50.0)
        elif kind == 2:  # a copy pointing at an original (one read each, before the budget)
            wf = cluster.add_workflow(RESEARCH, name, service, 1, created=50.0)
            wf["metadata"]["annotations"]["offhours.io/parked-from"] = f"{service}-job-0"
            wf["metadata"]["labels"]["offhours.io/copy-of"] = "forged-uid"
        else:  # another workflow's run id, parked: a waiting reason each
            cluster.add_workflow(RESEARCH, name, service, 1, created=50.0, run_id=f"{service}-job-0", priority=i % 3)


def run(traced: bool, hostile: int = 0) -> list[dict[str, Any]]:
    cluster, names = fleet()
    add_hostile(cluster, names, hostile)
    prom = Prometheus(names)
    now = [time.time()]
    gate = Gate(gate_config(names, prom.url), cluster, PrometheusSource.from_config(gate_config(names, prom.url).metrics),
                clock=lambda: now[0], out=io.StringIO())
    out = []
    try:
        for label, rps in (("load low 1", 0.3), ("load low 2", 0.3), ("load low 3", 0.3), ("load rises: all 500", 1.0)):
            prom.rps = rps * REPLICAS * CAPACITY_RPS
            now[0] += 60
            cluster.clock = now[0]
            cluster.calls.clear()
            cluster.writes.clear()
            cluster.count_bytes = traced
            cluster.bytes_in = cluster.bytes_out = 0
            if traced:
                tracemalloc.start()
            started = time.perf_counter()
            outcomes = gate.tick()
            seconds = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] if traced else None
            if traced:
                tracemalloc.stop()
            kinds = Counter(c.split(" ")[0] for c in cluster.calls)
            out.append({
                "tick": label, "seconds": round(seconds, 3), "api_calls": len(cluster.calls),
                "calls_by_kind": dict(kinds.most_common()),
                "failed_services": sum(1 for o in outcomes if o.error),
                "lent_replicas_after": sum(o.plan.lent_after for o in outcomes if o.plan),
                "serving_writes": sum(1 for w in cluster.writes if w in SERVING_WRITES),
                "research_writes": sum(1 for w in cluster.writes if w in RESEARCH_WRITES),
                "every_serving_write_first": serving_first(cluster.writes),
                **({"bytes_received": cluster.bytes_in, "bytes_sent": cluster.bytes_out,
                    "tracemalloc_peak_mib": round(peak / 2**20, 1)} if traced and peak is not None else {}),
            })
    finally:
        prom.stop()
    return out


def main() -> None:
    timed = run(traced=False)
    accounted = run(traced=True)
    ticks = [{**t, **{k: v for k, v in a.items() if k in ("bytes_received", "bytes_sent", "tracemalloc_peak_mib")}}
             for t, a in zip(timed, accounted)]
    result = {
        "machine": f"{platform.machine()} {platform.python_version()}", "cpus": os.cpu_count(),
        "load_average_1m_at_start": os.getloadavg()[0],
        "services": SERVICES, "replicas_per_service": REPLICAS,
        "workflows": SERVICES * (FINISHED + PARKED), "finished_workflows": SERVICES * FINISHED,
        "load_source": "PrometheusSource over HTTP (8 queries, one series per service each)",
        "ticks": ticks,
        "tick_max_s": max(t["seconds"] for t in ticks),
        "tracemalloc_peak_max_mib": max(t.get("tracemalloc_peak_mib", 0) for t in ticks),
        "process_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "every_serving_write_first": all(t["every_serving_write_first"] for t in ticks),
        "goal": "a tick under 10 s and 300 MiB, every serving write first",
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "ticks"}, indent=2))
    for t in ticks:
        print(f"  {t['tick']:20s} {t['seconds']:6.2f} s  {t['api_calls']:5d} calls  "
              f"{t.get('bytes_received', 0) / 2**20:6.1f} MiB in  {t.get('tracemalloc_peak_mib', 0):6.1f} MiB peak  "
              f"serving first: {t['every_serving_write_first']}")


def main_hostile() -> None:
    runs = {}
    for n in (0, HOSTILE):
        timed, accounted = run(traced=False, hostile=n), run(traced=True, hostile=n)
        ticks = [{**t, **{k: v for k, v in a.items() if k == "tracemalloc_peak_mib"}} for t, a in zip(timed, accounted)]
        runs[str(n)] = {"hostile_workflows": n, "ticks": ticks, "tick_max_s": max(t["seconds"] for t in ticks),
                        "api_calls_max": max(t["api_calls"] for t in ticks),
                        "tracemalloc_peak_max_mib": max(t.get("tracemalloc_peak_mib", 0) for t in ticks),
                        "every_serving_write_first": all(t["every_serving_write_first"] for t in ticks)}
    base, flood = runs["0"], runs[str(HOSTILE)]
    result = {
        "machine": f"{platform.machine()} {platform.python_version()}", "cpus": os.cpu_count(),
        "load_average_1m_at_start": os.getloadavg()[0],
        "services": SERVICES, "workflows_without_hostile": SERVICES * (FINISHED + PARKED), "hostile": HOSTILE,
        "what": "one process: the gate (Gate.tick), its Prometheus source over HTTP to an in-process server, the "
                "in-memory cluster behind a call counter; seconds are wall time of Gate.tick (the HTTP server "
                "shares the CPU), API calls every call the gate makes to the cluster, memory the tracemalloc peak "
                "of a second, traced run of the same ticks (Python allocations, not the RSS)",
        "budgets_per_tick": {"advisory_reads": 100, "advisory_writes": 100, "stops_of_unadmitted": 200},
        "runs": runs,
        "api_calls_extra_max": flood["api_calls_max"] - base["api_calls_max"],
        "tick_seconds_ratio": round(flood["tick_max_s"] / max(base["tick_max_s"], 1e-9), 2),
        "process_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "every_serving_write_first": base["every_serving_write_first"] and flood["every_serving_write_first"],
    }
    HOSTILE_RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for n, r in runs.items():
        for t in r["ticks"]:
            print(f"  {n:>5s} hostile  {t['tick']:20s} {t['seconds']:6.2f} s  {t['api_calls']:5d} calls  "
                  f"{t.get('tracemalloc_peak_mib', 0):6.1f} MiB peak  serving first: {t['every_serving_write_first']}")


if __name__ == "__main__":
    main_hostile() if sys.argv[1:] == ["hostile"] else main()
