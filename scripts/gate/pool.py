"""The gate's read of what holds the serving pool's GPUs, and its stop of squatters (decisions in policy/holding.py).

Once per tick the pods of the serving and research namespaces are read as the scheduler counts them. Each service
decides with lent at least what the other pods on its nodes hold: a pod that nothing admitted (a parked workflow
resumed by hand, a pod made directly) takes GPUs serving cannot use, whatever its workflow's labels or status say.
Such a research pod is a squatter: after every serving write it is deleted (within the service's grace cap) and
an Event on the service's Deployment names it. A read that fails changes nothing (the gate decides as before).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from offhours.scripts.names import EVENT_POOL_SQUATTER
from offhours.scripts.policy.decide import Decision
from offhours.scripts.policy.holding import PodSeat, for_plan, lent_floor, pool_holding, pool_nodes, squatters
from offhours.scripts.policy.plan import PARKED

SQUATTER_GRACE_SECONDS = 30
"""A squatter's deletion grace when no service caps it lower (its own grace may be anything: a tenant wrote it)."""


@dataclass(frozen=True)
class PoolRead:
    """One tick's pods of the serving and research namespaces."""

    seats: tuple[PodSeat, ...]


def read_pool(gate: Any, t: Any) -> PoolRead | None:
    """Read the pods once a tick; None (logged) when they cannot be read: nothing is then counted from them."""
    if getattr(t, "pool", None) is not None:
        return t.pool  # type: ignore[no-any-return]
    namespaces = (gate.config.namespace, gate.config.workflow_namespace)
    try:
        return PoolRead(tuple(gate.cluster.pool_seats(namespaces)))
    except Exception as err:  # noqa: BLE001 - a failed read only leaves the count at what the gate admitted
        gate.log.warning(f"could not count the pool's pods: {type(err).__name__}: {err}")
        return None


def _service_pool(pool: PoolRead, gate: Any, obs: Any) -> Any:
    names = {p.name for p in obs.pods}
    serving = [s for s in pool.seats if s.namespace == gate.config.namespace and s.name in names]
    return pool_holding(pool.seats, pool_nodes(serving), gate.config.namespace)


def counting_pool(decide_on: Callable[..., Decision], lent: int, gate: Any, t: Any,
                  obs: Any) -> Callable[..., Decision]:
    """Return `decide_on` deciding with lent at least what the pool's other pods hold, planned over the jobs."""
    pool = getattr(t, "pool", None)
    if pool is None:
        return decide_on
    floor = lent_floor(_service_pool(pool, gate, obs), obs.policy.gpus_per_replica)

    def decide(**kw: Any) -> Decision:
        return for_plan(decide_on(lent=max(lent, floor), **kw), lent)
    return decide


def stop_squatters(gate: Any, t: Any, observed: Sequence[Any]) -> None:
    """Delete the research pods on a service's nodes that no running workflow explains, naming each in an Event."""
    pool = getattr(t, "pool", None)
    if pool is None or t.dry_run:
        return
    running = {(j.name, j.uid) for obs in observed for j in obs.jobs if j.state != PARKED and j.uid}
    seen: set[tuple[str, str]] = set()
    for obs in observed:
        held = _service_pool(pool, gate, obs)
        cap = int(min(SQUATTER_GRACE_SECONDS, obs.policy.max_grace_seconds))
        for seat in squatters(held, gate.config.workflow_namespace, running):
            if (seat.name, seat.uid) in seen:
                continue
            seen.add((seat.name, seat.uid))
            grace = max(0, min(cap, seat.grace_seconds if seat.grace_seconds is not None else cap))
            try:
                gate.cluster.delete_pod(seat.namespace, seat.name, seat.uid, grace)
            except Exception as err:  # noqa: BLE001 - counted still; the next tick tries again
                gate.log.warning(f"could not stop pod {seat.namespace}/{seat.name}: {type(err).__name__}: {err}",
                                 obs.policy.name)
                continue
            gate._event(obs.policy.name, obs.dep, EVENT_POOL_SQUATTER,
                        f"pod {seat.namespace}/{seat.name} held {seat.gpus} GPUs on {seat.node} (a node of "
                        f"{obs.policy.name}) with no admission by the gate: deleted (grace {grace} s)", warning=True)
