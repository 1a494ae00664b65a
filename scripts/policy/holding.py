"""What holds the serving pool's GPUs, counted as the scheduler counts it (pure: no I/O).

A Workflow has no status subresource: its phase, labels and annotations are the tenant's to write, and so is the
join from a pod to its workflow (labels, owner references). What the scheduler charges a node with is not: every
non-terminal pod bound (spec.nodeName) or nominated (status.nominatedNodeName) to it, a terminating one until it is
deleted, each at its effective request. A running pod's requests of an extended resource cannot change. So the
count here reads only those fields, and the tenant-writable ones (`claims`) may explain a pod, never lower a count.

- `effective_request`: the larger of the init containers (each with the sidecars started before it) and the sum
  of the containers and the restartable init containers (sidecars), plus the pod's overhead.
- `pool_holding`: on the pool's nodes (the nodes serving's pods run on, and those research's GPU pods run on: the
  research namespace holds GPUs only by the gate's loans), the GPUs serving's pods hold (its namespace, which no
  tenant writes to) and the GPUs everything else holds.
- `unexplained_gpus` / `lent_floor` / `for_plan`: what the other pods hold beyond all the gate lent (by its own
  record) is squatted; each service decides with it counted as lent (none lends onto a squatter's GPUs), and plans
  its admissions and stops over its own admissions only.
- `squatters`: GPU-holding research pods that no listed, running workflow explains: stopped, each with an Event.

Not counted: DRA allocations (ResourceClaims) and pod-level resources (which do not take extended resources).
"""

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from offhours.scripts.names import ARGO_WORKFLOW_LABEL
from offhours.scripts.policy.decide import Decision

ARGO_POD_PREFIX_MAX = 253 - 10 - 1
"""Argo's pod names: `<workflow>-<template>` cut to this length, '-', a hash (or the workflow's name, for a pod
that is the workflow's root; or `<workflow>-<hash>`, POD_NAMES=v1): every one starts with this much of
`<workflow>-`."""
MAX_GPUS = 1 << 20
"""A request larger than this is read as this (a bound: a tenant's quantity cannot overflow a sum)."""
_QUANTITY = re.compile(r"^\+?([0-9]+)(\.[0-9]+)?([numkMGTPE]|[KMGTPE]i|e[0-9]+)?\Z")
_SCALE = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
          "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
TERMINAL_PHASES = ("Succeeded", "Failed")


def quantity_units(value: Any) -> int:
    """Return a resource quantity in whole units, rounded up (a fraction of a device holds the device); bad: 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return min(max(value, 0), MAX_GPUS)
    match = _QUANTITY.match(str(value).strip()) if isinstance(value, str | float) else None
    if match is None:
        return 0
    whole, fraction, suffix = match.group(1), match.group(2) or "", match.group(3) or ""
    scale = 10.0 ** int(suffix[1:]) if suffix.startswith("e") else _SCALE[suffix]
    number = float(whole + fraction) * scale
    return MAX_GPUS if number >= MAX_GPUS else max(0, math.ceil(number - 1e-9))


def container_request(container: Any, resource: str) -> int:
    """Return what one container requests of `resource` (its limit stands for an unset request, as defaulting does)."""
    if not isinstance(container, Mapping):
        return 0
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return 0
    for part in ("requests", "limits"):
        values = resources.get(part)
        if isinstance(values, Mapping) and resource in values:
            return quantity_units(values[resource])
    return 0


def _sidecar(container: Any) -> bool:
    return isinstance(container, Mapping) and container.get("restartPolicy") == "Always"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def effective_request(spec: Mapping[str, Any], resource: str) -> int:
    """Return the pod's effective request of `resource`, as the scheduler charges the node with it."""
    sidecars = init_peak = 0
    for container in _list(spec.get("initContainers")):
        if _sidecar(container):
            sidecars += container_request(container, resource)  # starts, and runs on beside what follows
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, container_request(container, resource) + sidecars)
    running = sum(container_request(c, resource) for c in _list(spec.get("containers"))) + sidecars
    overhead = spec.get("overhead")
    extra = quantity_units(overhead.get(resource, 0)) if isinstance(overhead, Mapping) else 0
    return min(max(running, init_peak) + extra, MAX_GPUS)


@dataclass(frozen=True)
class PodSeat:
    """A pod as the scheduler counts it: where it sits and what it holds; `claims` are the tenant's words."""

    namespace: str
    name: str
    uid: str
    node: str  # bound, else nominated; '' for neither
    terminal: bool
    terminating: bool
    gpus: int
    grace_seconds: int | None
    claims: tuple[str, str] = ("", "")  # (workflow named by its label, uid of its controller owner): explain only


def pod_seat(pod: Mapping[str, Any], resource: str) -> PodSeat:
    """Parse a pod (the API's JSON form) once, at the boundary, into what is counted."""
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    assert isinstance(meta, Mapping) and isinstance(spec, Mapping) and isinstance(status, Mapping)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)
    owner = next((o.get("uid", "") for o in _list(meta.get("ownerReferences"))
                  if isinstance(o, Mapping) and o.get("controller") is True), "")
    grace = spec.get("terminationGracePeriodSeconds")
    return PodSeat(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        node=str(spec.get("nodeName") or status.get("nominatedNodeName") or ""),
        terminal=status.get("phase") in TERMINAL_PHASES, terminating=meta.get("deletionTimestamp") is not None,
        gpus=effective_request(spec, resource),
        grace_seconds=grace if isinstance(grace, int) and not isinstance(grace, bool) else None,
        claims=(str(labels.get(ARGO_WORKFLOW_LABEL, "")), str(owner)))


def holds(seat: PodSeat) -> bool:
    """Whether the scheduler charges a node with this pod: bound or nominated, and not terminal."""
    return bool(seat.node) and not seat.terminal and seat.gpus > 0


def argo_pod_name_of(pod: str, workflow: str) -> bool:
    """Whether Argo's controller could have given a pod of `workflow` this name (its names start with the workflow's)."""
    return bool(workflow) and (pod == workflow or pod.startswith(f"{workflow}-"[:ARGO_POD_PREFIX_MAX]))


def explained_by(seat: PodSeat) -> tuple[str, str] | None:
    """Return the (workflow, uid) a pod's claims name, or None: no claim, or a name Argo never gives that workflow."""
    workflow, uid = seat.claims
    if not workflow or not uid or not argo_pod_name_of(seat.name, workflow):
        return None
    return seat.claims


@dataclass(frozen=True)
class PoolHolding:
    """The GPUs held on one pool's nodes: serving's pods, and everything else's (each such pod listed).

    `whole`: every pod that can hold a pool node was read. When not (a read cut short, or failed), the count is
    what was read, a floor: the GPUs of what was not read are unknown, so nothing new is lent on it (`for_plan`).
    """

    nodes: frozenset[str]
    serving_gpus: int
    other_gpus: int
    others: tuple[PodSeat, ...]
    whole: bool = True


def pool_nodes(serving_pods: Iterable[PodSeat], selected: Collection[str] = ()) -> frozenset[str]:
    """Return the pool: the nodes serving's pods are bound or nominated to, and the nodes a selector picked."""
    return frozenset({s.node for s in serving_pods if s.node and not s.terminal} | set(selected))


def pool_holding(seats: Iterable[PodSeat], nodes: Collection[str], serving_namespace: str,
                 whole: bool = True) -> PoolHolding:
    """Count what holds the pool's GPUs: serving's namespace on one side, every other pod on the other.

    `whole`: whether `seats` are every pod that can hold a pool node (False: a partial read's floor).
    """
    serving = other = 0
    others: list[PodSeat] = []
    for seat in seats:
        if not holds(seat) or seat.node not in nodes:
            continue
        if seat.namespace == serving_namespace:
            serving += seat.gpus
        else:
            other += seat.gpus
            others.append(seat)
    return PoolHolding(frozenset(nodes), serving, other, tuple(others), whole)


def unexplained_gpus(holding: PoolHolding, loans: Mapping[tuple[str, str], int]) -> int:
    """Return the GPUs the pool's other pods hold beyond what each admission was lent: squatted.

    `loans`: (workflow, uid) of each admission the gate holds (by its own record) -> the GPUs it was lent. An
    admission explains its pods' GPUs up to its loan and no further: pods copying its claims beyond it are
    squatted, and an admission not using all of its loan yet leaves no room for another's extra pods (its own
    pods come to claim it).
    """
    claimed: dict[tuple[str, str], int] = {}
    for seat in holding.others:
        claims = explained_by(seat)
        if claims is not None and claims in loans:
            claimed[claims] = claimed.get(claims, 0) + seat.gpus
    explained = sum(min(gpus, max(0, loans[claims])) for claims, gpus in claimed.items())
    return max(0, holding.other_gpus - explained)


def lent_floor(lent: int, unexplained: int, gpus_per_replica: int) -> int:
    """Return the replicas a service decides with: its own lent, and every squatted GPU as if taken from it.

    Where a squatter sits is the tenant's choice (any node of the pool): each service counts it as its own loss,
    so none lends onto it and each judges its serving capacity without it.
    """
    return lent + math.ceil(max(0, unexplained) / max(1, gpus_per_replica))


def for_plan(decision: Decision, jobs_lent: int, whole: bool = True) -> Decision:
    """Return a decision made with lent at least `lent_floor` in the terms of the gate's own admissions.

    Decided on what the pool holds (`decision.lent`, at least `jobs_lent`), the plan admits and stops the gate's
    jobs: a lend gives them only the step the decision took (nothing on a squatter's GPUs), a hold or a reclaim
    never admits, and a reclaim stops at most down to the decision's target. Decided on a partial read of the
    pool (`whole` false), a lend holds instead: what was not read may hold the GPUs it would lend (a reclaim stands).
    """
    if not whole and decision.target_lent > decision.lent:
        decision = replace(decision, action="hold", target_lent=decision.lent,
                           reason=f"{decision.reason}; the pool's pods were not all read: nothing more is lent "
                                  "until they are")
    excess = max(0, decision.lent - jobs_lent)
    if excess == 0:
        return decision
    if decision.target_lent > decision.lent:
        target = jobs_lent + decision.target_lent - decision.lent
    else:
        target = min(decision.target_lent, jobs_lent)
    return replace(decision, lent=jobs_lent, target_lent=target,
                   ceiling=max(target, decision.ceiling - excess))


def squatters(holding: PoolHolding, research_namespace: str, running: Collection[tuple[str, str]]) -> list[PodSeat]:
    """Return the research pods holding pool GPUs that no running workflow explains (its name and uid both).

    `running`: (name, uid) of the workflows listed and not parked (the gate stops one that runs unadmitted, and
    its pods end with it). A pod already terminating is on its way out; its GPUs stay counted until it is gone.
    """
    return [s for s in holding.others
            if s.namespace == research_namespace and not s.terminating and explained_by(s) not in running]
