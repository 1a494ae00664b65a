"""Benchmark: the gap between two runs of the gate CronWorkflow, on the local control plane.

Real: the API server, the Argo controller running the installed `offhours-gate` CronWorkflow
(Forbid), the gate's pod run for real by the control plane's pod runner (Hera's runner, the gate's
loop with reclaim checks). The schedule is every minute here (Argo's finest), each run lasting
until the hand-over before the next (`run-seconds` = 60 - HANDOVER_SECONDS, counted from the run's
creation). Measured from the pods' own status: the previous run's container finished -> the next
run's container started (what a reclaim cannot see meanwhile), for RUNS runs; and whether any run
was skipped (Forbid skips a run while the last is still active). The gap in the reaction time is
this plus the next process's start to its first tick. Writes bench/results/handover.json.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes import config as kube_config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "handover.json"
STATE = Path(os.environ.get("OFFHOURS_CLUSTER_DIR", "/tmp/offhours-cluster"))
SERVING, RUNS = "serving", 3


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.cronworkflows.gate import HANDOVER_SECONDS
    from offhours.workflows.render import write
    from tests.e2e.conftest import gate_config_raw

    env = dict(line.split("=", 1) for line in (STATE / "env").read_text().split())

    def kubectl(*args: str) -> str:
        return subprocess.run([f"{env['OFFHOURS_CLUSTER_BIN']}/offhours-kube", "kubectl", "--kubeconfig",
                               env["KUBECONFIG"], *args], capture_output=True, text=True, check=True, timeout=120).stdout

    api = kube_config.new_client_from_config(env["KUBECONFIG"])
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), yaml.safe_dump({**gate_config_raw(8000), "tickSeconds": 60, "reclaimCheckSeconds": 15}))
        kubectl("apply", "--server-side", "--force-conflicts", "-k", tmp)
    kubectl("-n", SERVING, "delete", "workflows", "--all", "--ignore-not-found", "--wait=true")
    # No pod GC: the pods' status (container started and finished) is what is measured.
    patch = {"spec": {"suspend": False, "schedules": ["* * * * *"], "workflowSpec": {"podGC": None, "arguments": {"parameters": [
        {"name": "config", "value": "/etc/offhours/gate.yaml"}, {"name": "dry-run", "value": "false"},
        {"name": "run-seconds", "value": str(60 - HANDOVER_SECONDS)}]}}}}
    custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", SERVING, "cronworkflows", "offhours-gate", patch)
    started = time.time()
    seen: dict[str, dict[str, Any]] = {}
    try:
        deadline = started + 60 * (RUNS + 2) + 30
        while time.time() < deadline:
            for run in _runs(custom, core):
                kept = seen.setdefault(run["name"], run)
                kept.update({k: v for k, v in run.items() if v is not None})
            if len([r for r in seen.values() if r["finished"] is not None]) >= RUNS:
                break
            time.sleep(2)
    finally:
        custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", SERVING, "cronworkflows", "offhours-gate",
                                              {"spec": {"suspend": True}})
    runs = sorted(seen.values(), key=lambda r: r["created"])
    gaps = [b["started"] - a["finished"] for a, b in zip(runs, runs[1:])
            if a["finished"] is not None and b["started"] is not None]
    minutes = sorted({int(r["created"] // 60) for r in runs})
    skipped = sum(b - a - 1 for a, b in zip(minutes, minutes[1:]))
    result: dict[str, Any] = {
        "schedule": "* * * * *", "run_seconds": 60 - HANDOVER_SECONDS, "handover_seconds": HANDOVER_SECONDS,
        "runs": [{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()} for r in runs],
        "gap_seconds": [round(g, 2) for g in gaps],
        "gap_median_s": round(statistics.median(gaps), 2) if gaps else None,
        "gap_max_s": round(max(gaps), 2) if gaps else None,
        "runs_skipped": skipped, "cpus": os.cpu_count(), "load_average_1m": os.getloadavg()[0],
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def _runs(custom: client.CustomObjectsApi, core: client.CoreV1Api) -> list[dict[str, Any]]:
    """Each gate run: created, its container's start and finish (epoch seconds), its phase."""
    out = []
    for wf in custom.list_namespaced_custom_object("argoproj.io", "v1alpha1", SERVING, "workflows")["items"]:
        name = wf["metadata"]["name"]
        created = _epoch(wf["metadata"]["creationTimestamp"])
        start = finish = None
        for pod in core.list_namespaced_pod(SERVING, label_selector=f"workflows.argoproj.io/workflow={name}").items:
            for status in pod.status.container_statuses or []:
                if status.name != "main":
                    continue
                state = status.state
                if state.running is not None:
                    start = state.running.started_at.timestamp()
                if state.terminated is not None:
                    start, finish = state.terminated.started_at.timestamp(), state.terminated.finished_at.timestamp()
        out.append({"name": name, "created": created, "started": start, "finished": finish,
                    "phase": (wf.get("status") or {}).get("phase")})
    return out


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


if __name__ == "__main__":
    main()
