"""Benchmark: what the GPUs lent are worth to jobs of each shape, with the gate's choice of replicas and without.

On every shipped trace (m-small, m-mid and the four stress traces), the default fleet (4 services, 4-GPU
replicas) is replayed through the gate's default policy; the replicas it lends each minute are then followed
on nodes of 8 GPUs carrying two replicas each, either one service per node or services dealt out across
nodes (mixed), under two choosers of the replicas a scale-down removes: the ReplicaSet's own ranking (no
pod-deletion-cost: most replicas of the set on the node first, then newest) and the gate's
(policy/placement.py: whole nodes first, the rest packed). A scale-up puts a replica back where the
scheduler's least-allocated scoring would, the same for both. Reported per job shape (pods x GPUs per pod):
GPU-hours whole gangs of that shape could use on the freed GPUs, and GPU-minutes lent that no such gang could
use. Assumes: the queue never runs dry of that shape; no other GPU pods on the nodes; the lent series is the
simulator's (engine.py), so the serving side is identical under both choosers.
Writes bench/results/placement.json.
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "placement.json"


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.nodes import CHOOSERS, SHAPES, lent_per_service, pack, replay
    from offhours.scripts.simulate.report import simulate
    from offhours.scripts.simulate.stress import all_traces
    from offhours.scripts.simulate.trace import load_trace

    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for trace in (load_trace("m-small"), load_trace("m-mid"), *all_traces()):
        fleet = default_fleet(trace)
        sim = simulate(trace, fleet, generated_jobs(fleet), modes=("gate",))
        lent = lent_per_service(sim.series, "gate", [s.name for s in fleet.services])
        for mixed in (False, True):
            layout = pack(fleet, gpus_per_node=8, mixed=mixed)
            for chooser in CHOOSERS:
                r = replay(layout, lent, chooser)
                rows.append({
                    "trace": trace.name, "layout": "mixed" if mixed else "one service per node",
                    "nodes": len(layout.nodes), "chooser": chooser, "gpuHoursLent": round(r.gpu_hours_lent, 1),
                    "wholeNodeGpuHours": round(r.whole_node_gpu_hours, 1),
                    "shapes": {name: {"usableGpuHours": round(s.usable_gpu_hours, 1),
                                      "unusedGpuMinutes": round(s.unused_gpu_minutes)} for name, s in r.shapes.items()},
                })
                print(json.dumps(rows[-1]), flush=True)
    out = {"python": sys.version.split()[0], "gpusPerNode": 8, "replicaGpus": 4,
           "shapes": {name: f"{s.pods} pod(s) x {s.gpus_per_pod} GPUs" for name, s in SHAPES.items()},
           "rows": rows, "seconds": round(time.perf_counter() - started, 1)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
