"""Any serving workload with a scale subresource: the reference, the configuration, the refusals, RBAC.

Class: a serving target the gate cannot scale safely (a kind without /scale, a selector that finds no pods, an
object another controller writes back) or a configuration that names a target ambiguously. Mechanism: one
reference type (`policy.target.ScaleTargetRef`, one text form the record keeps), one judgement
(`cluster.scale_target.target_refusal`) both adapters and `check` call, RBAC rendered from the configured kinds.
Invariants (generated): a reference's text reads back as the same reference; a refusal happens exactly when one
of the three conditions holds and names the object; rendered rights never include a write of a target object
itself, only of its /scale and only for the configured names; GPUs per replica is what each replica's pods hold.
"""

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.cronworkflows.rbac import gate_serving_rules
from offhours.scripts.backstop.manifests import backstop_rules
from offhours.scripts.cluster.base import ClusterError, ScaleTarget, ServingWrite
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.scale_target import (
    another_writer,
    controller_owner,
    gitops_advice,
    gitops_tool,
    gpus_per_replica,
    measured_policy,
    target_refusal,
)
from offhours.scripts.config.loader import parse_config, policy_settings, service_policy
from offhours.scripts.policy.config import Capacity, ConfigError, ServicePolicy
from offhours.scripts.policy.target import ScaleTargetRef, guessed_resource, parse_target_text

names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
kinds = st.from_regex(r"[A-Z][A-Za-z0-9]{0,15}", fullmatch=True)
versions = st.from_regex(r"v[1-9][0-9]?(alpha[1-9]|beta[1-9])?", fullmatch=True)
groups = st.one_of(st.just(""), st.from_regex(r"[a-z]([a-z0-9]{0,8}\.){0,2}[a-z]{2,5}", fullmatch=True))
refs = st.builds(lambda g, v, k, n: ScaleTargetRef(f"{g}/{v}" if g else v, k, n), groups, versions, kinds, names)

BASE: dict[str, Any] = {"namespace": "serving", "workflowNamespace": "research", "metrics": {"source": "direct"},
                        "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}}


def config_with(**service: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["services"]["chat"].update(service)
    return raw


@given(refs)
def test_a_references_text_reads_back_as_the_same_reference(ref: ScaleTargetRef) -> None:
    assert parse_target_text(ref.text) == ref
    assert ("/" in ref.text) == (not ref.is_deployment)  # a Deployment's text is its bare name (old records)


@pytest.mark.parametrize(("service", "error"), [
    ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet"}},
     "gate config: services.chat.scaleTargetRef: 'name' is a required property"),
    ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "statefulset", "name": "chat"}},
     "gate config: services.chat.scaleTargetRef.kind: 'statefulset' is not a kind (a CamelCase name such as StatefulSet)"),
    ({"scaleTargetRef": {"apiVersion": "apps", "kind": "StatefulSet", "name": "chat"}},
     "gate config: services.chat.scaleTargetRef.apiVersion: 'apps' is not an API version"),
    ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "Chat_1"}},
     "gate config: services.chat.scaleTargetRef.name: 'Chat_1' is not an object name"),
    ({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "chat", "replicas": 3}},
     "gate config: services.chat.scaleTargetRef: Additional properties are not allowed"),
    ({"deployment": "chat", "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "chat"}},
     "gate config: services.chat: both deployment and scaleTargetRef name a target; keep one"),
])
def test_a_bad_target_is_one_error_naming_the_field(service: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(config_with(**service))
    assert str(raised.value).startswith(error)


def test_two_services_naming_one_object_are_refused_but_the_same_name_in_two_kinds_is_two_objects() -> None:
    raw = config_with(scaleTargetRef={"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm"})
    raw["services"]["other"] = {"capacity": {"requestsPerSecond": 1}, "deployment": "llm"}
    assert [s.scale_target.kind for s in parse_config(raw).services] == ["StatefulSet", "Deployment"]
    raw["services"]["other"] = {"capacity": {"requestsPerSecond": 1},
                                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm"}}
    with pytest.raises(ConfigError, match="services chat and other both name StatefulSet llm"):
        parse_config(raw)


@given(refs)
def test_a_policys_settings_read_back_as_the_same_target(ref: ScaleTargetRef) -> None:
    policy = ServicePolicy("chat", Capacity(requests_per_second=1.0), deployment=ref.text)
    assert service_policy("chat", policy_settings(policy)).scale_target == ref


@given(refs, st.booleans(), st.sampled_from(["", " ", "app=chat"]), st.one_of(st.none(), st.tuples(kinds, names)))
def test_a_target_is_refused_exactly_when_it_cannot_be_scaled_safely_and_the_line_names_it(
        ref: ScaleTargetRef, has_scale: bool, selector: str, controller: tuple[str, str] | None) -> None:
    refusal = target_refusal(ref, has_scale, selector, controller)
    assert (refusal is not None) == (not has_scale or controller is not None or not selector.strip())
    if refusal is not None:
        assert refusal.startswith(str(ref)) and "\n" not in refusal
        if has_scale and controller is not None:
            assert f"controlled by {controller[0]} {controller[1]}" in refusal and "scaleTargetRef" in refusal


def test_only_the_controller_owner_reference_counts() -> None:
    owners = [{"kind": "Workload", "name": "w"}, {"kind": "InferenceService", "name": "llama", "controller": True}]
    assert controller_owner(owners) == ("InferenceService", "llama")
    assert controller_owner([{"kind": "Workload", "name": "w", "controller": False}]) is None


@given(st.integers(1, 16), st.integers(1, 8), st.integers(1, 8))
def test_a_replica_holds_the_gpus_of_all_its_pods(replicas: int, pods_per_replica: int, gpus_per_pod: int) -> None:
    """A LeaderWorkerSet's replica is a group of pods: the GPUs it gives back when lent are all of theirs."""
    pods = [gpus_per_pod] * (replicas * pods_per_replica)
    assert gpus_per_replica(pods, replicas) == pods_per_replica * gpus_per_pod
    assert gpus_per_replica([], replicas) is None and gpus_per_replica(pods, 0) is None


def test_the_gpus_read_from_the_pods_replace_the_configured_ones() -> None:
    policy = ServicePolicy("chat", Capacity(), gpus_per_replica=4)
    target = ScaleTarget("serving", "chat", "chat", 2, gpus_per_replica=16)
    assert measured_policy(policy, target).gpus_per_replica == 16
    target.gpus_per_replica = None
    assert measured_policy(policy, target) is policy


@pytest.mark.parametrize(("labels", "annotations", "tool"), [
    ({"argocd.argoproj.io/instance": "serving"}, {}, "Argo CD"),
    ({}, {"argocd.argoproj.io/tracking-id": "serving:apps/StatefulSet:serving/chat"}, "Argo CD"),
    ({"kustomize.toolkit.fluxcd.io/name": "serving"}, {}, "Flux"),
    ({"helm.toolkit.fluxcd.io/name": "vllm"}, {}, "Flux"),
    ({"app": "chat"}, {}, None),
])
def test_gitops_marks_are_recognised_and_the_advice_names_what_to_add(
        labels: dict[str, str], annotations: dict[str, str], tool: str | None) -> None:
    assert gitops_tool(labels, annotations) == tool
    assert another_writer(tool) == (f"another writer ({tool}'s sync, most likely)" if tool else "another writer")
    if tool == "Argo CD":
        advice = gitops_advice(tool, ScaleTargetRef("apps/v1", "StatefulSet", "chat"))
        assert "ignoreDifferences" in advice and "/spec/replicas" in advice and "RespectIgnoreDifferences" in advice


@given(st.lists(refs, min_size=1, max_size=4, unique_by=lambda r: (r.group, r.kind, r.name)))
def test_rendered_rights_write_only_the_configured_targets_scale_never_the_objects(targets: list[ScaleTargetRef]) -> None:
    raw = copy.deepcopy(BASE)
    raw["services"] = {f"s{i}": {"capacity": {"requestsPerSecond": 1},
                                 "scaleTargetRef": {"apiVersion": r.api_version, "kind": r.kind, "name": r.name}}
                       for i, r in enumerate(targets)}
    config = parse_config(raw)
    for rules in (gate_serving_rules(config), backstop_rules(config)):
        for ref in targets:
            resource = guessed_resource(ref.kind)
            scale = [r for r in rules if r["apiGroups"] == [ref.group] and r["resources"] == [f"{resource}/scale"]]
            assert scale and all("patch" in r["verbs"] for r in scale)
            assert {ref.name} <= set().union(*(r["resourceNames"] for r in scale))
            objects = [r for r in rules if r["apiGroups"] == [ref.group] and r["resources"] == [resource]]
            assert objects and not any({"patch", "update", "create", "delete"} & set(r["verbs"]) for r in objects)
        scale_names = {n for r in rules if any(x.endswith("/scale") for x in r["resources"]) for n in r["resourceNames"]}
        assert scale_names == {r.name for r in targets}


def test_the_memory_cluster_refuses_as_the_gate_is_told_and_an_autoscaler_must_match_the_kind() -> None:
    cluster = MemoryCluster()
    ref = ScaleTargetRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llama")
    cluster.add_deployment("serving", "llama", 2, ref=ref)
    cluster.pod_gpus[("serving", "llama")] = [8, 8, 8, 8]  # two replicas of a leader and a worker, 8 GPUs each
    target = cluster.deployment("serving", "llama", ref.text)
    cluster.ready_pods(target)
    assert (target.kind, target.gpus_per_replica) == ("LeaderWorkerSet", 16)
    assert cluster.lower_serving(target, 2, 1) == ServingWrite(1)
    from offhours.scripts.cluster.base import Autoscaler

    cluster.autoscalers[("serving", "llama")] = Autoscaler("HorizontalPodAutoscaler", "serving", "llama", 1, 4)
    assert cluster.autoscaler(target) is None  # that HPA scales a Deployment named llama
    cluster.autoscaled_kinds[("serving", "llama")] = "LeaderWorkerSet"
    assert cluster.autoscaler(target) is not None
    cluster.controllers[("serving", "llama")] = ("InferenceService", "llama")
    with pytest.raises(ClusterError, match="controlled by InferenceService llama"):
        cluster.deployment("serving", "llama", ref.text)


def test_a_gitops_revert_inside_a_lower_is_adopted_as_another_writers_and_named() -> None:
    """Argo CD syncs chat back to 12 between the gate's read (8) and its lower: nothing is written, the value is
    adopted as the owner's (never fought), and what the gate reports names the sync."""
    from offhours.scripts.cluster.base import Serving
    from tests.support.campaign import CLEAN, NS, World

    w = World((CLEAN,))
    w.cluster.deployments[(NS, CLEAN)].labels = {"argocd.argoproj.io/instance": "serving"}
    w.cluster.add_workflow(NS, "chat-job1", CLEAN, 2, created=w.cluster.clock)
    w.submitted["chat-job1"] = 2
    w.source.demand[CLEAN] = 5.0
    landed: list[int] = []

    def sync(target: Serving) -> None:
        if not landed and int(w.cluster.calls[-1].split(" ")[-1]) < w.dep(CLEAN).replicas:
            landed.append(w.dep(CLEAN).replicas)
            w.dep(CLEAN).replicas = 12

    w.cluster.serving_writer = sync
    for _ in range(6):
        outcomes = {o.service: o for o in w.gate.tick()}
        w.cluster.clock += 60
        if landed:
            break
    o = outcomes[CLEAN]
    assert landed == [8] and o.error is None, w.log.getvalue()
    assert "replicas set to 12 by another writer (Argo CD's sync, most likely) after the gate read 8" in (o.adopted or "")
    assert o.baseline == 12


def test_the_gate_refuses_a_target_another_controller_owns_naming_it_and_writes_nothing() -> None:
    from tests.support.campaign import CLEAN, NS, World

    w = World((CLEAN,))
    w.cluster.add_workflow(NS, "chat-job1", CLEAN, 2, created=w.cluster.clock)
    w.source.demand[CLEAN] = 5.0
    w.cluster.controllers[(NS, CLEAN)] = ("InferenceService", "llama")
    before = w.dep(CLEAN).replicas
    outcomes = []
    for _ in range(4):
        outcomes = [o for o in w.gate.tick() if o.service == CLEAN]
        w.cluster.clock += 60
    assert outcomes and "is controlled by InferenceService llama" in (outcomes[0].error or ""), w.log.getvalue()
    assert "scaleTargetRef" in (outcomes[0].error or "")
    assert w.dep(CLEAN).replicas == before and not any(c.startswith("scale") for c in w.cluster.calls)


@given(st.integers(1, 16), st.integers(0, 15), st.integers(1, 8))
def test_a_scale_status_that_lags_the_pods_never_undercounts_a_replica(replicas: int, gone: int, gpus: int) -> None:
    """One pod a replica (a Deployment): the scale's status.replicas still counts pods already terminating (the gate's
    own lowering a moment before, read on the next tick); the pods read are fewer. A replica still holds its GPUs:
    counted lower, one lend would lower serving by more replicas than the GPUs it needs."""
    live = [gpus] * max(1, replicas - gone)
    assert gpus_per_replica(live, replicas) == gpus
