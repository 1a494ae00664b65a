"""Where lent GPUs land: which serving replicas to remove, and whether a job's pods all fit on what is freed.

Pure: it reads nodes, the serving replicas on them and the GPUs other pods hold, and returns choices; the
adapters carry them out (a `controller.kubernetes.io/pod-deletion-cost` mark on each replica to remove, so
the ReplicaSet controller deletes those first when the gate lowers the Deployment).

The class it closes: *GPUs lent that no waiting job can use*. A ReplicaSet scaling down prefers, among
equally ranked pods, those on nodes that hold more of its pods, so on nodes of 8 GPUs with two 4-GPU
replicas each it frees four GPUs here and four there: an 8-GPU pod fits nowhere, and serving is lowered
for nothing. Three mechanisms keep that away:

- `choose_removals` picks the replicas so that the GPUs freed form whole nodes first (the nodes that take
  the fewest removals to empty), and puts what is left onto the nodes already closest to empty;
- `admit` admits a job only when every one of its pods has a place on the free GPUs per node after that
  scale-down, respecting its node selector and tolerations (a gang: all or nothing), and otherwise lends
  nothing for it;
- the gate parks again an admitted job whose pods stay unschedulable past a bound (`unplaced_pods` says
  which pod did not fit where).

Backfill rule (stated as Kueue's and KAI's documentation state theirs). Jobs are taken in queue order
(priority, then age). The first job whose pods do not all fit is the *head*: it gets a reservation, the
eligible nodes closest to fitting it, enough of them to hold all its pods once they are empty. A job behind
the head is admitted only if all its pods fit (a gang, as always) and either none of them lands on a
reserved node, or it can leave those GPUs within `bound_seconds` (its `hold_seconds`: its run-time limit,
or how long its stop takes, as it is preemptible and the gate stops it when the head fits). So backfill
never delays the head by more than the bound, and a job that cannot say how long it holds GPUs
(`hold_seconds` None) never backfills onto the head's nodes. Only one head is reserved for: a reservation
per waiting job would let a long queue of large jobs lock every node.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from offhours.scripts.policy.plan import Plan

# A pod's GPU count cannot be negative, and no node carries more than this (a bound on any input's size).
MAX_GPUS_PER_NODE = 1024


@dataclass(frozen=True)
class Taint:
    """A node taint that matters to scheduling (NoSchedule or NoExecute)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration: `operator` Exists (any value) or Equal; an empty key with Exists tolerates all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""  # empty: any effect

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates `taint` (Kubernetes' rule)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class Node:
    """A GPU node: its allocatable GPUs, labels and scheduling taints."""

    name: str
    gpus: int
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.gpus <= MAX_GPUS_PER_NODE:
            raise ValueError(f"node {self.name}: {self.gpus} GPUs is outside 0..{MAX_GPUS_PER_NODE}")


@dataclass(frozen=True)
class Replica:
    """A serving pod on a node: its service and the GPUs it holds."""

    name: str
    service: str
    node: str
    gpus: int


@dataclass(frozen=True)
class Shape:
    """A job's pods: how many, GPUs each, where they may run (node selector, tolerations)."""

    pods: int
    gpus_per_pod: int
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def __post_init__(self) -> None:
        if self.pods < 1 or not 0 < self.gpus_per_pod <= MAX_GPUS_PER_NODE:
            raise ValueError(f"a job shape needs at least one pod of 1..{MAX_GPUS_PER_NODE} GPUs, "
                             f"not {self.pods} x {self.gpus_per_pod}")

    @property
    def gpus(self) -> int:
        """All the GPUs the job's pods ask for."""
        return self.pods * self.gpus_per_pod

    def eligible(self, node: Node) -> bool:
        """Whether a pod of this shape may be scheduled on `node`: its labels match, its taints tolerated."""
        labels = dict(node.labels)
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return all(any(t.tolerates(taint) for t in self.tolerations)
                   for taint in node.taints if taint.effect in ("NoSchedule", "NoExecute"))


@dataclass(frozen=True)
class Candidate:
    """A waiting job as placement sees it: its shape, the replicas it borrows per service, its hold bound."""

    name: str
    shape: Shape
    borrows: tuple[tuple[str, int], ...]  # (service, replicas) it is lent
    hold_seconds: float | None = None  # the longest it keeps its GPUs once the gate wants them; None: unknown


@dataclass(frozen=True)
class Admission:
    """The outcome of one placement pass."""

    admit: tuple[str, ...]
    remove: tuple[Replica, ...]  # the serving replicas to remove (deletion cost marked lowest)
    placed: Mapping[str, tuple[str, ...]]  # job -> the node of each of its pods, as the pass placed them
    free_after: Mapping[str, int]  # free GPUs per node after the removals and the admitted pods
    head: str | None = None  # the first job that did not fit; its reservation
    reserved: frozenset[str] = frozenset()
    waiting: Mapping[str, str] = field(default_factory=dict)  # job -> why it was not admitted


def free_gpus(nodes: Sequence[Node], held: Mapping[str, int]) -> dict[str, int]:
    """Free GPUs per node: allocatable minus what bound pods hold (never below zero, never above allocatable)."""
    return {n.name: max(0, min(n.gpus, n.gpus - held.get(n.name, 0))) for n in nodes}


def _removals_to_empty(node: Node, free: int, on_node: Sequence[Replica]) -> int:
    """GPUs on `node` held by something other than these replicas (zero: removing them empties it)."""
    return node.gpus - free - sum(r.gpus for r in on_node)


def choose_removals(nodes: Sequence[Node], replicas: Sequence[Replica], counts: Mapping[str, int],
                    free: Mapping[str, int], avoid: frozenset[str] = frozenset()) -> tuple[Replica, ...]:
    """Choose `counts[service]` replicas of each service to remove, so that the GPUs freed form whole nodes.

    Whole nodes first: a node qualifies when every GPU on it not already free is held by a replica of a
    service still to be lowered; among those, the one needing the fewest removals (then the most GPUs
    already free, then its name) is emptied first, while the counts allow it. What is left of the counts
    goes, replica by replica, to the node with the most free GPUs so far (packed onto as few nodes as
    possible). Nodes in `avoid` (reserved for a waiting job) come last in both orders. A count above the
    service's replicas is an error: the caller lowers what exists.
    """
    by_service: dict[str, list[Replica]] = {}
    for r in replicas:
        by_service.setdefault(r.service, []).append(r)
    for service, n in counts.items():
        if n < 0 or n > len(by_service.get(service, ())):
            raise ValueError(f"cannot remove {n} replica(s) of {service}: it has {len(by_service.get(service, ()))}")
    left = dict(counts)
    node_of = {n.name: n for n in nodes}
    on_node: dict[str, list[Replica]] = {}
    for r in replicas:
        on_node.setdefault(r.node, []).append(r)
    now_free = {n.name: free.get(n.name, 0) for n in nodes}
    chosen: list[Replica] = []

    def need(name: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in on_node.get(name, ()):
            out[r.service] = out.get(r.service, 0) + 1
        return out

    emptiable = [name for name, rs in on_node.items() if name in node_of and rs
                 and _removals_to_empty(node_of[name], now_free[name], rs) == 0]
    emptiable.sort(key=lambda name: (name in avoid, len(on_node[name]), -now_free[name], name))
    for name in emptiable:
        wanted = need(name)
        if all(left.get(s, 0) >= k for s, k in wanted.items()):
            for r in sorted(on_node[name], key=lambda r: r.name):
                chosen.append(r)
                left[r.service] -= 1
                now_free[name] += r.gpus
            on_node[name] = []
    # The rest: one replica at a time onto the node with the most free GPUs so far (a node of unknown
    # size counts as none free), so partial frees pile up on few nodes.
    for service in sorted(left):
        for _ in range(left[service]):
            pool = [r for rs in on_node.values() for r in rs if r.service == service]
            best = min(pool, key=lambda r: (r.node in avoid, -(now_free.get(r.node, 0) + r.gpus), len(on_node[r.node]),
                                            r.node, r.name))
            chosen.append(best)
            on_node[best.node].remove(best)
            now_free[best.node] = now_free.get(best.node, 0) + best.gpus
    return tuple(chosen)


def place(shape: Shape, nodes: Sequence[Node], free: Mapping[str, int],
          avoid: frozenset[str] = frozenset()) -> tuple[str, ...] | None:
    """Place every pod of `shape` on the free GPUs, or return None when not all fit (a gang).

    Best fit: each pod goes to the eligible node with the fewest free GPUs that still holds it, so the
    large holes stay whole for the larger pods; nodes in `avoid` are not used.
    """
    room = {n.name: free.get(n.name, 0) for n in nodes if n.name not in avoid and shape.eligible(n)}
    out: list[str] = []
    for _ in range(shape.pods):
        fits = [name for name, f in room.items() if f >= shape.gpus_per_pod]
        if not fits:
            return None
        name = min(fits, key=lambda n: (room[n], n))
        room[name] -= shape.gpus_per_pod
        out.append(name)
    return tuple(out)


def unplaced_pods(shape: Shape, nodes: Sequence[Node], free: Mapping[str, int]) -> str | None:
    """Say which of a job's pods has no place now and why, or None when all of them fit."""
    eligible = [n for n in nodes if shape.eligible(n)]
    if not eligible:
        return (f"no node matches its pods' node selector {dict(shape.node_selector)} and tolerations")
    slots = sum(free.get(n.name, 0) // shape.gpus_per_pod for n in eligible)
    if slots >= shape.pods:
        return None
    best = sorted(eligible, key=lambda n: (-free.get(n.name, 0), n.name))[:3]
    where = ", ".join(f"{n.name} has {free.get(n.name, 0)} of {n.gpus} free" for n in best)
    return (f"pod {slots + 1} of {shape.pods} ({shape.gpus_per_pod} GPUs) fits on no node: {where}")


def reservation(shape: Shape, nodes: Sequence[Node], free: Mapping[str, int]) -> frozenset[str]:
    """Return the eligible nodes the head job would take once empty: closest to fitting first, enough for all its pods."""
    eligible = sorted((n for n in nodes if shape.eligible(n) and n.gpus >= shape.gpus_per_pod),
                      key=lambda n: (-free.get(n.name, 0), n.name))
    out: list[str] = []
    slots = 0
    for n in eligible:
        if slots >= shape.pods:
            break
        out.append(n.name)
        slots += n.gpus // shape.gpus_per_pod
    return frozenset(out)


def admit(queue: Sequence[Candidate], nodes: Sequence[Node], replicas: Sequence[Replica],
          lendable: Mapping[str, int], free: Mapping[str, int], bound_seconds: float) -> Admission:
    """Admit jobs in queue order while every pod of each fits on what the gate's own scale-down frees.

    `lendable`: replicas per service the decision lets the gate lower now; `free`: free GPUs per node
    before it. A job whose borrowing exceeds what is left lendable, or whose pods do not all fit on the
    GPUs its removals free (with those of the jobs admitted before it, placed again on the new choice),
    lends nothing. The backfill rule of the module's docstring applies behind the first job that does not fit.
    """
    counts: dict[str, int] = {}
    admitted: list[tuple[Candidate, frozenset[str]]] = []  # each job and the nodes it had to avoid
    placed: dict[str, tuple[str, ...]] = {}
    waiting: dict[str, str] = {}
    head: str | None = None
    reserved: frozenset[str] = frozenset()
    remove: tuple[Replica, ...] = ()
    free_after = dict(free)
    for job in queue:
        trial = dict(counts)
        for service, n in job.borrows:
            trial[service] = trial.get(service, 0) + n
        over = [s for s, n in trial.items() if n > min(lendable.get(s, 0), sum(r.service == s for r in replicas))]
        if over:
            waiting[job.name] = f"{', '.join(sorted(over))} cannot lend that many replicas now"
            if head is None:  # it waits for lending, not for room: still the head (else small jobs starve it)
                head = job.name
                reserved = reservation(job.shape, nodes, free_after)
            continue
        removal = choose_removals(nodes, replicas, trial, free, reserved)
        after = dict(free)
        for r in removal:
            after[r.node] = after.get(r.node, 0) + r.gpus
        may_use_reserved = job.hold_seconds is not None and job.hold_seconds <= bound_seconds
        avoid = frozenset() if may_use_reserved else reserved
        spots = _place_all([*admitted, (job, avoid)], nodes, after)
        if spots is None:
            left = _place_all(admitted, nodes, after)
            room = _minus(after, left or {}, {c.name: c.shape for c, _ in admitted})
            why = unplaced_pods(job.shape, nodes, room) or (
                f"its pods fit only on the nodes reserved for {head}, and it cannot say it leaves them "
                f"within {bound_seconds:g} s")
            waiting[job.name] = why
            if head is None:
                head = job.name
                reserved = reservation(job.shape, nodes, room)
            continue
        counts, remove, placed = trial, removal, spots
        admitted.append((job, avoid))
        free_after = _minus(after, placed, {c.name: c.shape for c, _ in admitted})
    return Admission(tuple(c.name for c, _ in admitted), remove, placed, free_after, head, reserved, waiting)


def _minus(free: Mapping[str, int], placed: Mapping[str, tuple[str, ...]], shapes: Mapping[str, Shape]) -> dict[str, int]:
    out = dict(free)
    for job, spots in placed.items():
        for node in spots:
            out[node] = out.get(node, 0) - shapes[job].gpus_per_pod
    return out


def _place_all(jobs: Sequence[tuple[Candidate, frozenset[str]]], nodes: Sequence[Node],
               free: Mapping[str, int]) -> dict[str, tuple[str, ...]] | None:
    """Place the jobs in order, each off the nodes it must avoid; None when one of them does not fit whole."""
    room = dict(free)
    out: dict[str, tuple[str, ...]] = {}
    for job, avoid in jobs:
        spots = place(job.shape, nodes, room, avoid)
        if spots is None:
            return None
        out[job.name] = spots
        for node in spots:
            room[node] -= job.shape.gpus_per_pod
    return out


def whole_nodes(nodes: Sequence[Node], free: Mapping[str, int]) -> int:
    """How many nodes are entirely free."""
    return sum(1 for n in nodes if n.gpus > 0 and free.get(n.name, 0) >= n.gpus)


def usable_gpus(shape: Shape, nodes: Sequence[Node], free: Mapping[str, int]) -> int:
    """GPUs that whole gangs of `shape` can use on these free GPUs (pods are alike, so slots count exactly)."""
    slots = sum(free.get(n.name, 0) // shape.gpus_per_pod for n in nodes if shape.eligible(n))
    return (slots // shape.pods) * shape.gpus


# The pod-deletion-cost the gate writes on a replica it chose to remove (int32, the lowest values): the
# ReplicaSet controller deletes pods of lower cost first. Values in this range are the gate's own marks.
DELETION_COST_FLOOR = -(2 ** 31)
GATE_MARK_CEILING = DELETION_COST_FLOOR + 2 ** 20


def deletion_costs(remove: Sequence[Replica], current: Mapping[str, int | None]) -> dict[str, int | None]:
    """Return the pod-deletion-cost writes before a scale-down: the chosen replicas lowest, in order of choice.

    `current`: each serving pod's present cost (None: unset). A pod that carries the gate's mark from an
    earlier tick and is not chosen now gets it taken away (None), so an old choice never steers a later
    scale-down; a cost someone else wrote on a replica not chosen is left alone (own only your delta). Returns
    only the changes.
    """
    chosen = {r.name: DELETION_COST_FLOOR + i for i, r in enumerate(remove)}
    out: dict[str, int | None] = {name: cost for name, cost in chosen.items() if current.get(name) != cost}
    for name, cost in current.items():
        if name not in chosen and cost is not None and cost < GATE_MARK_CEILING:
            out[name] = None
    return out


def shape_arguments(workflow: Mapping[str, Any]) -> dict[str, str]:
    """Return a workflow's arguments as its pods get them: its template's defaults, then its own.

    A workflow run from a WorkflowTemplate sets only what it changes; Argo keeps the template's spec it resolved
    in `status.storedWorkflowTemplateSpec` (also for a suspended one), whose defaults (the library's `gpus` of
    its job, `pods` 1) are the rest of its shape.
    """
    def params(spec: Any) -> dict[str, str]:
        found = ((spec.get("arguments") or {}).get("parameters") or []) if isinstance(spec, Mapping) else []
        return {str(q.get("name")): str(q.get("value", "")) for q in found
                if isinstance(q, Mapping) and "value" in q} if isinstance(found, list) else {}

    stored = (workflow.get("status") or {}).get("storedWorkflowTemplateSpec")
    return {**params(stored), **params(workflow.get("spec"))}


def job_shape(parameters: Mapping[str, str]) -> Shape | str:
    """Return a research job's shape from its workflow's arguments, or why it cannot be read.

    Its pods ask `gpus` GPUs each (the research step's input; 1 when unset), `pods` of them at once where
    the workflow sets that argument (1 otherwise: the library's steps run one pod at a time), on the nodes its
    `node-selector` and `tolerations` arguments allow. Tenant-written: a shape only decides whether the job
    itself is admitted, and the GPU quota bounds what its pods may take whatever it says.
    """
    def number(name: str, default: int) -> int | str:
        text = str(parameters.get(name, default)).strip()
        return int(text) if text.isdigit() and 0 < int(text) <= MAX_GPUS_PER_NODE else f"{name} {text[:40]!r} is not a count"

    gpus, pods = number("gpus", 1), number("pods", 1)
    if isinstance(gpus, str) or isinstance(pods, str):
        return gpus if isinstance(gpus, str) else str(pods)
    try:
        selector = json.loads(parameters.get("node-selector") or "{}")
        tolerations = json.loads(parameters.get("tolerations") or "[]")
    except ValueError:
        return "its node-selector or tolerations argument is not JSON"
    if not isinstance(selector, dict) or not isinstance(tolerations, list) or not all(
            isinstance(t, dict) for t in tolerations):
        return "its node-selector is not an object or its tolerations not a list of objects"
    return Shape(pods, gpus, tuple(sorted((str(k), str(v)) for k, v in selector.items())),
                 tuple(Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                                  str(t.get("effect") or "")) for t in tolerations))


def gang_admissions(p: Plan, shapes: Mapping[str, Shape], nodes: Sequence[Node], replicas: Sequence[Replica],
                    free: Mapping[str, int], bound_seconds: float) -> Plan:
    """Keep of a plan's admissions only the jobs whose pods all fit after the service's own scale-down (a gang).

    Jobs without a shape (none could be read) keep today's rule and go first; each job left out lends
    nothing (serving keeps its replicas) and waits, with the pod that did not fit in its reason.
    """
    unknown = [j for j in p.admit if j.name not in shapes]
    known = [j for j in p.admit if j.name in shapes]
    if not known:
        return p
    lendable = {p.service: sum(j.replicas for j in known)}
    taken = sum(j.replicas for j in unknown)
    pool = [r for r in replicas if r.service == p.service]
    if taken:  # the unknown jobs' replicas are removed first, as the ReplicaSet would choose among the rest
        gone = set(choose_removals(nodes, pool, {p.service: min(taken, len(pool))}, free))
        free = dict(free)
        for r in gone:
            free[r.node] = free.get(r.node, 0) + r.gpus
        pool = [r for r in pool if r not in gone]
    lendable[p.service] = min(lendable[p.service], len(pool))
    out = admit([Candidate(j.name, shapes[j.name], ((p.service, j.replicas),)) for j in known], nodes, pool,
                lendable, free, bound_seconds)
    left = [j for j in known if j.name not in out.admit]
    if not left:
        return p
    back = sum(j.replicas for j in left)
    waiting = tuple((j, 0, f"waiting: not all of its pods would fit on the GPUs {p.service} frees: "
                           f"{out.waiting.get(j.name, 'no room')}") for j in left)
    return replace(p, admit=tuple(j for j in p.admit if j not in left), scale_to=p.scale_to + back,
                   lent_after=p.lent_after - back, waiting=(*p.waiting, *waiting),
                   notes=(*p.notes, *(f"{j.name} not admitted: its pods would not all fit ({out.waiting.get(j.name)})"
                                      for j in left)))
