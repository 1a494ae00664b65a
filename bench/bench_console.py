"""Benchmark: the console's memory, `/metrics` series and page sizes over a long uptime and a large fleet.

The console reads the pool every 15 s by default; here every INTERVAL (60 s: a service's history is
capped at 480 points, which reads more often only fill sooner), in memory (its `PoolSource` over
prepared pools; the pages rendered by Flask's test client), SERVICES services for DAYS days while tenants
churn WORKFLOWS workflows (a new set every hour, some with invented `offhours.io/service` labels)
and each service's numbers change on every read: the worst case for the history. Measured at the
end of each simulated day: the Python heap the console holds (tracemalloc, after the reads), the
history points, the counters' remembered workflows, the `/metrics` series and bytes, and the pool,
queue and usage pages' bytes. Bounded means: flat from day 2 on. Writes bench/results/console.json.
"""

import dataclasses
import gc
import json
import platform
import sys
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "console.json"
SERVICES, WORKFLOWS, DAYS, INTERVAL = 100, 2000, 3, 60
INVENTED = 200  # of each hour's workflows, with a made-up service label
START = datetime(2025, 3, 1, tzinfo=timezone.utc)


def ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def objects(hour: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The serving namespace's objects and the workflows alive in `hour` of the run."""
    names = [f"svc-{i:03d}" for i in range(SERVICES)]
    cms = [{"metadata": {"name": f"offhours-state-{n}"}, "data": {"state.json": json.dumps(
        {"baseline": 10, "failedTicks": 0, "lastDecision": {"at": ts(START), "action": "hold", "required": 6,
                                                            "lent": 2}})}} for n in names]
    deps = [{"metadata": {"name": n, "uid": f"uid-{n}", "labels": {"offhours.io/service": n}},
             "spec": {"replicas": 8, "template": {"spec": {"containers": [
                 {"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}}, "status": {"readyReplicas": 8}} for n in names]
    at = START + timedelta(hours=hour)
    wfs = []
    for i in range(WORKFLOWS):
        service = f"invented-{hour}-{i}" if i < INVENTED else names[i % SERVICES]
        wfs.append({"metadata": {"name": f"h{hour}-wf-{i}", "namespace": "research", "uid": f"h{hour}-{i}",
                                 "creationTimestamp": ts(at), "labels": {
                                     "offhours.io/service": service, "offhours.io/replicas": "1",
                                     "offhours.io/state": "admitted" if i % 3 else "parked"},
                                 "annotations": {"offhours.io/admitted-at": ts(at)} if i % 3 else {}},
                    "spec": {"suspend": not i % 3}, "status": {"phase": "Running" if i % 3 else ""}})
    return cms, deps, wfs


def main() -> None:
    from offhours.scripts.console.app import create_app
    from offhours.scripts.console.source import PoolSource
    from offhours.scripts.metrics.exposition import parse
    from offhours.scripts.pool.model import build_pool

    class Reader:
        pool: Any = None

        def read(self, now: datetime | None = None, require_workflows: bool = False) -> Any:
            return self.pool

    reader = Reader()
    source = PoolSource(reader, interval=0)
    client = create_app(source, services=[f"svc-{i:03d}" for i in range(SERVICES)]).test_client()
    reads_per_hour = 3600 // INTERVAL
    days: list[dict[str, Any]] = []
    tracemalloc.start()
    started = time.perf_counter()
    for hour in range(DAYS * 24):
        base = build_pool(*objects(hour), "serving", START + timedelta(hours=hour))
        for read in range(reads_per_hour):
            at = START + timedelta(hours=hour, seconds=read * INTERVAL)
            # Every service's numbers change on every read (the history's worst case).
            services = tuple(dataclasses.replace(s, required=1 + read % 5) for s in base.services)
            reader.pool = dataclasses.replace(base, services=services, read_at=at)
            source.pool()
        if (hour + 1) % 24 == 0:
            gc.collect()
            heap = tracemalloc.get_traced_memory()[0]
            metrics = client.get("/metrics").get_data(as_text=True)
            days.append({
                "day": (hour + 1) // 24, "heapMiB": round(heap / 2**20, 1),
                "historyPoints": len(source.history), "rememberedWorkflows": len(source.metrics.admitted),
                "metricsSeries": len(parse(metrics).samples), "metricsKiB": round(len(metrics) / 1024, 1),
                "poolPageKiB": round(len(client.get("/").data) / 1024, 1),
                "queuePageKiB": round(len(client.get("/queue").data) / 1024, 1),
                "usagePageKiB": round(len(client.get("/usage").data) / 1024, 1)})
            print(days[-1], flush=True)
    result = {"services": SERVICES, "workflowsPerHour": WORKFLOWS, "inventedServicesPerHour": INVENTED,
              "readIntervalSeconds": INTERVAL, "reads": DAYS * 24 * reads_per_hour,
              "seconds": round(time.perf_counter() - started, 1), "python": platform.python_version(), "days": days}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
