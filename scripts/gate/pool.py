"""The gate's read of what holds the serving pool's GPUs, and its stop of squatters (decisions in policy/holding.py).

Once per tick the pods of the serving and research namespaces that hold a node (bound or nominated: a pending pod
holds nothing, so a tenant's flood of them is never read) are read as the scheduler counts them. What research pods
hold on the pool beyond what each admission was lent (by the gate's own record, never by a workflow's labels or
status) is squatted: each service decides with it counted as lent, so none lends onto it and none judges its serving
capacity with it. A research pod that no running workflow explains (a pod made directly, one whose labels point
elsewhere, one named as Argo never names that workflow's pods) is a squatter: after every serving write it is deleted
(within the grace cap) and an Event names it.

The pool's nodes are those serving's pods run on, those a configured `pool.nodeSelector` picks, and those research's
GPU pods run on (research holds GPUs only by the gate's loans). A read cut short (more pods holding nodes than its
bound) or failed is never taken as the whole: the research pods are then read node by node on the pool's known
nodes (serving's and the selected ones), within a budget, so a squatter there is still
counted and stopped, and the tick lends nothing new (`PoolHolding.whole`); a reclaim stands.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offhours.scripts.gate.actuate import event
from offhours.scripts.names import EVENT_POOL_SQUATTER, LABEL_SERVICE
from offhours.scripts.policy.holding import (
    PodSeat,
    PoolHolding,
    explained_by,
    holds,
    pool_holding,
    pool_nodes,
    squatters,
    unexplained_gpus,
)
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job

SQUATTER_GRACE_SECONDS = 30
"""A squatter's deletion grace when no service caps it lower (its own grace may be anything: a tenant wrote it)."""
MAX_SQUATTER_STOPS = 20
"""Squatters looked up and stopped per tick at most (the rest next tick; all of them stay counted meanwhile)."""
MAX_NODE_READS = 100
"""Nodes read one by one per tick when the research namespace's read was cut short (a rotating window of them)."""


@dataclass(frozen=True)
class PoolRead:
    """One tick's pods of the serving and research namespaces, and what they hold beyond the gate's loans."""

    holding: PoolHolding
    unexplained_gpus: int
    services_on: Mapping[str, Any]  # node -> the observed service whose ready pods run there

    @property
    def whole(self) -> bool:
        """Whether every pod that can hold a pool node was read (if not, nothing new is lent this tick)."""
        return self.holding.whole


def read_pool(gate: Any, t: Any, observed: Sequence[Any], counted_jobs: Callable[..., list[Job]]) -> PoolRead:
    """Read the pods once a tick; a read cut short or failed is logged and counted as a partial view (`whole` false).

    `counted_jobs`: the controller's reading of each service's jobs by its own record (what it lent).
    """
    serving, research = gate.config.namespace, gate.config.workflow_namespace
    try:
        serving_all = gate.cluster.pool_seats((serving,))
    except Exception as err:  # noqa: BLE001 - nothing known of the pool: nothing new lent, nothing stopped
        gate.log.warning(f"could not count the pool's pods: {type(err).__name__}: {err}: nothing more is lent")
        return PoolRead(pool_holding((), (), serving, whole=False), 0, {})
    by_pod = {p.name: obs for obs in observed for p in obs.pods}
    serving_seats = [s for s in serving_all if s.name in by_pod]
    selected, whole = _selected_nodes(gate)
    known = pool_nodes(serving_seats, selected)
    try:
        research_seats = gate.cluster.pool_seats((research,))
    except Exception as err:  # noqa: BLE001 - read again where it matters most, and lend nothing new
        gate.log.warning(f"could not count the pool's pods: {type(err).__name__}: {err}: the pool's known nodes "
                         "are read one by one, and nothing more is lent")
        research_seats, whole = _node_by_node(gate, research, known, getattr(t, "turn", 0)), False
    nodes = pool_nodes(serving_seats, known | {s.node for s in research_seats if holds(s)})
    held = pool_holding([*serving_all, *research_seats], nodes, serving, whole)
    loans = {(j.name, j.uid): obs.policy.gpus_per_replica * j.replicas
             for obs in observed for j in counted_jobs(obs.jobs, obs.record, obs.dep.uid) if j.state == ADMITTED}
    return PoolRead(held, unexplained_gpus(held, loans), {s.node: by_pod[s.name] for s in serving_seats})


def _selected_nodes(gate: Any) -> tuple[frozenset[str], bool]:
    """Return the nodes the configured pool node selector picks, and whether they are all known.

    None configured: none, all known. A read that fails (no ClusterRole to list nodes, a fleet past the bound) is
    logged and leaves the view partial: the pool's nodes are not all known, so nothing new is lent.
    """
    labels = gate.config.pool_node_selector
    if not labels:
        return frozenset(), True
    try:
        return frozenset(gate.cluster.nodes_selected(labels)), True
    except Exception as err:  # noqa: BLE001 - the pool's nodes unknown: a partial view
        gate.log.warning(f"could not list the pool's nodes (pool.nodeSelector): {type(err).__name__}: {err}: "
                         "nothing more is lent")
        return frozenset(), False


def _node_by_node(gate: Any, namespace: str, nodes: frozenset[str], turn: int) -> list[PodSeat]:
    """Read `namespace`'s pods on each of `nodes` (MAX_NODE_READS of them, from a window that moves each tick).

    Each node's read is bounded by what a node can hold, not by what a tenant creates; one that fails leaves its
    node unread (the tick lends nothing new either way).
    """
    ordered = sorted(nodes)
    if len(ordered) > MAX_NODE_READS:
        start = (turn * MAX_NODE_READS) % len(ordered)
        ordered = (ordered[start:] + ordered[:start])[:MAX_NODE_READS]
    seats: dict[str, PodSeat] = {}
    for node in ordered:
        try:
            for seat in gate.cluster.node_seats(namespace, node):
                seats.setdefault(seat.uid or f"{seat.namespace}/{seat.name}", seat)
        except Exception as err:  # noqa: BLE001 - that node unread this tick
            gate.log.warning(f"could not read the pods on node {node}: {type(err).__name__}: {err}")
    return list(seats.values())


def stop_squatters(gate: Any, t: Any, observed: Sequence[Any]) -> None:
    """Delete the research pods holding pool GPUs that no running workflow explains, naming each in an Event.

    The Event goes on the Deployment of the service whose pods share the squatter's node (else the first service).
    In a partial view (a reclaim check's pass over some services, a service whose read failed), the running
    workflows of the services not observed are unknown: a pod whose workflow (by name and UID) is labelled
    with one of them is left alone (counted still) until a pass observes it.
    """
    pool = getattr(t, "pool", None)
    if pool is None or t.dry_run or not observed:
        return
    unobserved = frozenset(p.name for p in gate.config.services) - {obs.policy.name for obs in observed}
    running = {(j.name, j.uid) for obs in observed for j in obs.jobs if j.state != PARKED and j.uid}
    cap = int(min([SQUATTER_GRACE_SECONDS, *(obs.policy.max_grace_seconds for obs in observed)]))
    # The budget bounds what is done (stops, workflow reads), never what is skipped: pods left to the release
    # cost no stop, and one read answers for every pod of a workflow, so they crowd no squatter out.
    released: dict[tuple[str, str], bool] = {}
    recorded: list[frozenset[str] | None] = []  # the services the gate holds a record of: listed once, if needed
    stops = 0
    for seat in squatters(pool.holding, gate.config.workflow_namespace, running):
        if stops >= MAX_SQUATTER_STOPS or len(released) > MAX_SQUATTER_STOPS:
            break
        claims = explained_by(seat) or ("", "")  # one answer per workflow its pods can be (never a stranger's)
        if claims not in released:
            released[claims] = _offhours_job_elsewhere(gate, seat, recorded, unobserved)
        if released[claims]:
            continue
        stops += 1
        grace = max(0, min(cap, seat.grace_seconds if seat.grace_seconds is not None else cap))
        obs = pool.services_on.get(seat.node, observed[0])
        try:
            gate.cluster.delete_pod(seat.namespace, seat.name, seat.uid, grace)
        except Exception as err:  # noqa: BLE001 - counted still; the next tick tries again
            gate.log.warning(f"could not stop pod {seat.namespace}/{seat.name}: {type(err).__name__}: {err}",
                             obs.policy.name)
            continue
        event(gate, obs.policy.name, obs.dep, EVENT_POOL_SQUATTER,
                    f"pod {seat.namespace}/{seat.name} held {seat.gpus} GPUs on {seat.node} with no admission by "
                    f"the gate: deleted (grace {grace} s)", warning=True)


def _offhours_job_elsewhere(gate: Any, seat: PodSeat, recorded: list[frozenset[str] | None],
                            unobserved: frozenset[str] = frozenset()) -> bool:
    """Whether the pod is one of an offhours job of a service not observed this pass, or removed but recorded.

    `unobserved`: configured services this pass did not observe (their running workflows are unknown).

    Such a job is given back by the gate's release of what it lent (stopped, with its grace and exit hook), not
    deleted here. Its workflow, by name and UID (the pod's claim), must exist and its service label must name
    a service the gate holds a record of (the gate's own memory, which that release reads) and does not
    configure: a label is the tenant's to write, and a service the gate never lent from has no release, so
    its pods would hold the pool's GPUs for ever. `recorded`: the records' services, listed once a tick.
    The pod stays counted either way.
    """
    claims = explained_by(seat)  # a pod named as Argo never names that workflow's pods is not one of its jobs
    if claims is None:
        return False
    name, uid = claims
    try:
        wf = gate.cluster.workflow(seat.namespace, name)
    except Exception:  # noqa: BLE001 - unreadable: judged a squatter (it holds GPUs nothing explains)
        return False
    meta = wf.get("metadata") if isinstance(wf, dict) else None
    if not isinstance(meta, dict) or meta.get("uid") != uid:
        return False
    labels = meta.get("labels")
    service = labels.get(LABEL_SERVICE) if isinstance(labels, dict) else None
    if not isinstance(service, str) or not service:
        return False
    if service in unobserved:
        return True  # its running workflows unknown this pass: left for a pass that observes it
    if service in {p.name for p in gate.config.services}:
        return False
    if not recorded:
        try:
            recorded.append(frozenset(gate.cluster.state_services(gate.config.namespace)))
        except Exception:  # noqa: BLE001 - unlisted: nothing is known to be released, so it is a squatter
            recorded.append(None)
    return recorded[0] is not None and service in recorded[0]
