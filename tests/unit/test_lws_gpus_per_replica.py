"""GPUs per replica of a LeaderWorkerSet: a replica is a group of pods, and its scale selects only the leaders.

Class: serving's GPUs per replica undercounted because the pods read are only some of a replica's (an LWS's
`/scale` selector, `status.hpaPodSelector`, selects its leader pods). Mechanism: the one reading of GPUs per
replica (`scale_target.gpus_per_replica`) takes, for a LeaderWorkerSet, what its templates make one group request
(`group_gpus`: the leader's template, or the worker's without one, plus size - 1 workers, each pod as the
scheduler counts it, request or limit, the larger) as a floor, and the pods of every group (`group_selector`,
the set's name label) as the measure; every other kind keeps the rule it had.
Invariants (generated below), whatever group size, templates and replicas:
- GPUs per replica counted >= what any one group's pods request (serving never undercounted);
- with plain templates (requests equal limits, no init containers) it is exactly one group's request;
- for any other kind, the count is today's: the selected pods' GPUs over the replicas (never more replicas than
  pods: a scale's status may still count terminating ones), rounded up.
"""

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.scale_target import LWS_NAME_LABEL, gpus_per_replica, group_gpus, group_selector
from offhours.scripts.policy.target import ScaleTargetRef

LWS = ScaleTargetRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "vllm-big")
OTHERS = [ScaleTargetRef("apps/v1", "Deployment", "vllm"), ScaleTargetRef("apps/v1", "StatefulSet", "vllm"),
          ScaleTargetRef("serving.lab.io/v1", "LeaderWorkerSet", "vllm"),  # another group's kind of that name
          ScaleTargetRef("leaderworkerset.x-k8s.io/v1", "Other", "vllm")]

GPUS = st.integers(0, 8)


@st.composite
def containers(draw: Any, plain: bool) -> dict[str, Any]:
    gpus = draw(GPUS)
    if plain:
        resources = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    else:
        resources = draw(st.sampled_from([{}, {"limits": {"nvidia.com/gpu": str(gpus)}},
                                          {"requests": {"nvidia.com/gpu": str(gpus)}},
                                          {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}},
                                          {"requests": {"cpu": "1"}}]))
    return {"name": "c", "resources": resources}


@st.composite
def templates(draw: Any, plain: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": draw(st.lists(containers(plain), min_size=1, max_size=3))}
    if not plain and draw(st.booleans()):
        inits = draw(st.lists(containers(plain), min_size=1, max_size=2))
        for init in inits:
            if draw(st.booleans()):
                init["restartPolicy"] = "Always"  # a sidecar: runs beside the containers
        spec["initContainers"] = inits
    return {"metadata": {"labels": {"app": "vllm"}}, "spec": spec}


@st.composite
def sets(draw: Any, plain: bool = False) -> tuple[dict[str, Any], int]:
    """An LWS spec (its leaderWorkerTemplate) and its replicas."""
    lwt: dict[str, Any] = {"workerTemplate": draw(templates(plain))}
    size = draw(st.integers(1, 8))
    if size != 1 or draw(st.booleans()):
        lwt["size"] = size
    if draw(st.booleans()):
        lwt["leaderTemplate"] = draw(templates(plain))
    return {"replicas": draw(st.integers(1, 5)), "leaderWorkerTemplate": lwt}, draw(st.integers(1, 5))


def scheduled(template: dict[str, Any]) -> int:
    """A pod's GPUs as the scheduler counts them (KEP-753): containers and sidecars, or an init container with the
    sidecars started before it, whichever is more; the amount of each is its request, else its limit."""
    def amount(c: dict[str, Any]) -> int:
        res = c.get("resources", {})
        return int(res.get("requests", {}).get("nvidia.com/gpu", res.get("limits", {}).get("nvidia.com/gpu", 0)))
    spec = template["spec"]
    peak, sidecars = 0, 0
    for init in spec.get("initContainers", []):
        if init.get("restartPolicy") == "Always":
            sidecars += amount(init)
        else:
            peak = max(peak, amount(init) + sidecars)
    return max(peak, sum(amount(c) for c in spec["containers"]) + sidecars)


def group_pods(spec: dict[str, Any], replicas: int) -> list[list[tuple[str, int]]]:
    """The pods of each group, as (role, GPUs the scheduler counts), as the LWS controller makes them."""
    lwt = spec["leaderWorkerTemplate"]
    worker = lwt["workerTemplate"]
    leader = lwt.get("leaderTemplate", worker)
    size = lwt.get("size", 1)
    return [[("leader", scheduled(leader)), *[("worker", scheduled(worker))] * (size - 1)] for _ in range(replicas)]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(sets())
def test_a_replica_of_a_leaderworkerset_counts_at_least_what_its_whole_group_requests(world: Any) -> None:
    spec, replicas = world
    groups = group_pods(spec, replicas)
    one_group = max(sum(g for _, g in pods) for pods in groups)
    floor = group_gpus(LWS, spec)
    leaders = [g for pods in groups for role, g in pods if role == "leader"]  # what the scale's selector selects
    everyone = [g for pods in groups for _, g in pods]  # what the set's name label selects
    assert (gpus_per_replica(leaders, replicas, floor) or 0) >= one_group
    assert (gpus_per_replica(everyone, replicas, floor) or 0) >= one_group
    assert group_selector(LWS) == f"{LWS_NAME_LABEL}=vllm-big"


@settings(max_examples=200, derandomize=True, deadline=None)
@given(sets(plain=True))
def test_with_plain_templates_the_count_is_exactly_one_groups_request(world: Any) -> None:
    spec, replicas = world
    groups = group_pods(spec, replicas)
    one_group = sum(g for _, g in groups[0])
    leaders = [pods[0][1] for pods in groups]
    assert (gpus_per_replica(leaders, replicas, group_gpus(LWS, spec)) or 0) == one_group
    assert (gpus_per_replica([g for pods in groups for _, g in pods], replicas, group_gpus(LWS, spec)) or 0) == one_group


@settings(max_examples=200, derandomize=True, deadline=None)
@given(sets(), st.sampled_from(OTHERS), st.lists(GPUS, max_size=8), st.integers(0, 5))
def test_any_other_kind_keeps_todays_rule(world: Any, ref: ScaleTargetRef, pods: list[int], replicas: int) -> None:
    spec, _ = world
    assert group_gpus(ref, spec) is None and group_selector(ref) is None
    total = sum(pods)
    today = math.ceil(total / min(replicas, len(pods))) if replicas > 0 and pods and total > 0 else None
    assert gpus_per_replica(pods, replicas, group_gpus(ref, spec)) == today


def test_an_lws_without_a_leader_template_makes_its_leader_from_the_workers() -> None:
    worker = {"spec": {"containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    spec = {"leaderWorkerTemplate": {"size": 4, "workerTemplate": worker}}
    assert group_gpus(LWS, spec) == 32
    # Two groups of 4 pods: the leaders alone (16 GPUs over 2 replicas) would read 8 a replica, a quarter of it.
    assert gpus_per_replica([8, 8], 2) == 8 and gpus_per_replica([8, 8], 2, group_gpus(LWS, spec)) == 32
    assert group_gpus(LWS, {"leaderWorkerTemplate": {"size": 0, "workerTemplate": worker}}) is None  # refused by the API
