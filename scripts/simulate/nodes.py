"""The simulated fleet's nodes: which replicas sit where, and what the GPUs lent are worth to jobs of each shape.

The replay (engine.py) decides how many replicas each service lends each minute; this module places those
replicas on nodes and follows, minute by minute, which of them a scale-down removes and where a scale-up
puts them back, under two choosers of the replicas removed:

- `replicaset`: the ReplicaSet controller's own ranking when nothing marks a pod's deletion cost, computed once
  per scale-down as the controller does: pods on nodes with more replicas of the set go first, then the newest,
  pods of one age in random order (the controller breaks those ties by UID);
- `gate`: the gate's choice (policy/placement.py `choose_removals`: whole nodes first, the rest packed).

Either way a scale-up puts a replica where the scheduler's default scoring (least allocated) would: on
the node with the most free GPUs; that is the same for both, and the worst case for whole free nodes.
Per minute, for each job shape (pods x GPUs per pod), the GPUs whole gangs of it could use on the freed
GPUs, and the GPUs lent that no such gang could use (lent but unused).
"""

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from offhours.scripts.policy.placement import Node, Replica, Shape, choose_removals, usable_gpus
from offhours.scripts.simulate.fleet import Fleet

CHOOSERS = ("replicaset", "gate")
# The shapes reported: one whole 8-GPU node, a two-node gang of 8-GPU pods, one 4-GPU pod.
SHAPES = {"1x8": Shape(1, 8), "2x8": Shape(2, 8), "1x4": Shape(1, 4)}


@dataclass(frozen=True)
class Layout:
    """Nodes and the serving replicas on them, as the fleet runs with nothing lent."""

    nodes: tuple[Node, ...]
    replicas: tuple[Replica, ...]


def pack(fleet: Fleet, gpus_per_node: int = 8, mixed: bool = False) -> Layout:
    """Place every service's baseline replicas on nodes of `gpus_per_node` GPUs, filling each node.

    `mixed`: services share nodes (replicas dealt out round-robin across services), as a fleet scheduled
    by spreading does; otherwise each service fills its own nodes (the last one shared if it is not full).
    """
    queue: list[tuple[str, int]] = []
    if mixed:
        left = {s.name: s.baseline for s in fleet.services}
        while any(left.values()):
            for s in fleet.services:
                if left[s.name]:
                    queue.append((s.name, s.policy.gpus_per_replica))
                    left[s.name] -= 1
    else:
        queue = [(s.name, s.policy.gpus_per_replica) for s in fleet.services for _ in range(s.baseline)]
    nodes: list[Node] = []
    replicas: list[Replica] = []
    used = gpus_per_node
    for i, (service, gpus) in enumerate(queue):
        if gpus > gpus_per_node:
            raise ValueError(f"a replica of {service} takes {gpus} GPUs, more than a node's {gpus_per_node}")
        if used + gpus > gpus_per_node:
            nodes.append(Node(f"node-{len(nodes):04d}", gpus_per_node))
            used = 0
        replicas.append(Replica(f"{service}-{i:05d}", service, nodes[-1].name, gpus))
        used += gpus
    return Layout(tuple(nodes), tuple(replicas))


@dataclass
class ShapeReport:
    """What the GPUs lent were worth to one job shape over the trace."""

    usable_gpu_hours: float = 0.0
    unused_gpu_minutes: float = 0.0


@dataclass
class PlacementReport:
    """One chooser over one trace: GPU-hours lent, whole nodes free, and the worth of each shape."""

    chooser: str
    gpu_hours_lent: float = 0.0
    whole_node_gpu_hours: float = 0.0  # GPU-hours on nodes entirely free
    shapes: dict[str, ShapeReport] = field(default_factory=dict)


def _replicaset_choice(serving: Mapping[str, Replica], service: str, k: int, created: Mapping[str, int],
                       rng: random.Random) -> list[Replica]:
    """Return the ReplicaSet's own choice of `k` pods to delete, ranked once as its controller ranks them.

    Pods on nodes with more replicas of the set first; then the newest; pods of one age (the controller's
    log-scale age buckets) in random order, as the controller breaks those ties by UID.
    """
    live = [r for r in serving.values() if r.service == service]
    per_node: dict[str, int] = {}
    for r in live:
        per_node[r.node] = per_node.get(r.node, 0) + 1
    draw = {r.name: rng.random() for r in live}
    live.sort(key=lambda r: (-per_node[r.node], -_age_bucket(created[r.name]), draw[r.name]))
    return live[:k]


def _age_bucket(created_minute: int) -> int:
    """Return the log2 bucket of a creation minute (the controller's LogarithmicScaleDown compares these)."""
    return max(0, created_minute).bit_length()


def replay(layout: Layout, lent: Mapping[str, np.ndarray], chooser: str,
           shapes: Mapping[str, Shape] = SHAPES, seed: int = 0) -> PlacementReport:
    """Follow the replicas lent each minute (`lent[service]`, replicas) on the nodes under `chooser`.

    `seed`: the ReplicaSet's random tie-breaks (the gate's choice draws nothing).
    """
    if chooser not in CHOOSERS:
        raise ValueError(f"unknown chooser {chooser!r}: one of {', '.join(CHOOSERS)}")
    minutes = max((len(v) for v in lent.values()), default=0)
    serving = {r.name: r for r in layout.replicas}
    removed: dict[str, list[Replica]] = {s: [] for s in lent}
    created = {r.name: 0 for r in layout.replicas}
    # What the layout leaves unallocated is free from the start, as the gate reads it (allocatable less what the
    # node's pods request): a node half filled by one replica can be emptied by lowering that one. What the
    # lend is worth is measured beyond what was free before it (`initial`), and never above what was lent.
    free = {n.name: n.gpus - sum(r.gpus for r in layout.replicas if r.node == n.name) for n in layout.nodes}
    initial_whole = sum(n.gpus for n in layout.nodes if n.gpus and free[n.name] >= n.gpus)
    initial_worth = {name: usable_gpus(shape, layout.nodes, free) for name, shape in shapes.items()}
    report = PlacementReport(chooser, shapes={name: ShapeReport() for name in shapes})
    worth: dict[str, int] = {}
    rng = random.Random(seed)
    whole = 0
    lent_gpus = 0
    changed = True
    for minute in range(minutes):
        for service, series in lent.items():
            want = int(series[minute]) if minute < len(series) else 0
            have = len(removed[service])
            if want > have:
                if chooser == "gate":
                    pool = [r for r in serving.values() if r.service == service]
                    gone = list(choose_removals(layout.nodes, pool, {service: want - have}, free))
                else:
                    gone = _replicaset_choice(serving, service, want - have, created, rng)
                for r in gone:
                    del serving[r.name]
                    free[r.node] += r.gpus
                    removed[service].append(r)
                changed = True
            elif want < have:
                for _ in range(have - want):
                    back = removed[service].pop()
                    node = max((n for n in free if free[n] >= back.gpus), key=lambda n: (free[n], n))
                    placed = Replica(back.name, back.service, node, back.gpus)
                    free[node] -= back.gpus
                    serving[placed.name] = placed
                    created[placed.name] = minute + 1
                changed = True
        if changed:
            lent_gpus = sum(r.gpus for rs in removed.values() for r in rs)
            whole = sum(n.gpus for n in layout.nodes if n.gpus and free[n.name] >= n.gpus)
            whole = max(0, whole - initial_whole)
            worth = {name: min(lent_gpus, max(0, usable_gpus(shape, layout.nodes, free) - initial_worth[name]))
                     for name, shape in shapes.items()}
            changed = False
        report.gpu_hours_lent += lent_gpus / 60.0
        report.whole_node_gpu_hours += whole / 60.0
        for name in shapes:
            report.shapes[name].usable_gpu_hours += worth[name] / 60.0
            report.shapes[name].unused_gpu_minutes += max(0, lent_gpus - worth[name])
    return report


def lent_per_service(series: Mapping[str, np.ndarray], mode: str, services: Sequence[str]) -> dict[str, np.ndarray]:
    """Return the replicas each service lent per minute in one mode of a simulation's series."""
    return {s: series[f"{mode}:lent:{s}"] for s in services}
