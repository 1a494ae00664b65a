"""What the gate may act on, read from a scale target's metadata and its scale: pure judgements, no I/O.

Both cluster adapters (`kube`, `memory`) and `offhours check` judge a target by these same functions, so a
target the gate refuses is the one `check` names, with the same line.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from offhours.scripts.cluster.base import ScaleTarget
from offhours.scripts.names import GPU_RESOURCE
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.policy.target import ScaleTargetRef

ARGOCD_INSTANCE_LABEL = "argocd.argoproj.io/instance"
ARGOCD_TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
FLUX_KUSTOMIZE_LABEL = "kustomize.toolkit.fluxcd.io/name"
FLUX_HELM_LABEL = "helm.toolkit.fluxcd.io/name"


def target_refusal(ref: ScaleTargetRef, has_scale: bool, selector: str | None,
                   controller: tuple[str, str] | None) -> str | None:
    """Return why the gate must not scale `ref` (one line naming it and what to configure instead), or None.

    - a kind without a scale subresource: there is no replicas field the gate could write conditionally;
    - an empty selector: the gate could not find the pods it serves with (nor read their load or GPUs);
    - a controller owner (`controller`: its kind and name): that controller writes the replicas back.
    """
    if not has_scale:
        return (f"{ref}: kind {ref.kind} has no scale subresource: configure the object that holds the replicas "
                "(one an HPA could scale)")
    if controller is not None:
        kind, name = controller
        return (f"{ref} is controlled by {kind} {name}, which would revert its scale: configure that top-level "
                f"object as the service's scaleTargetRef instead")
    if not (selector or "").strip():
        return f"{ref}: its scale has an empty status.selector: the gate cannot tell its pods from others"
    return None


def controller_owner(owner_references: Sequence[Mapping[str, object]]) -> tuple[str, str] | None:
    """Return (kind, name) of the owner reference marked `controller: true`, if any (at most one may be)."""
    for ref in owner_references:
        if ref.get("controller") is True:
            return str(ref.get("kind") or "?"), str(ref.get("name") or "?")
    return None


def gitops_tool(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """Return the GitOps tool whose marks the target carries ("Argo CD", "Flux"), or None."""
    if ARGOCD_INSTANCE_LABEL in labels or ARGOCD_TRACKING_ANNOTATION in annotations:
        return "Argo CD"
    if FLUX_KUSTOMIZE_LABEL in labels or FLUX_HELM_LABEL in labels:
        return "Flux"
    return None


def gitops_advice(tool: str, ref: ScaleTargetRef) -> str:
    """Say what to add so `tool`'s sync leaves the target's replicas to the gate."""
    if tool == "Argo CD":
        group = ref.group or '""'
        return (f"add to the Argo CD Application an ignoreDifferences entry (group {group}, kind "
                f"{ref.kind}, name {ref.name}, jsonPointers [/spec/replicas]) with syncOptions "
                "RespectIgnoreDifferences=true, or leave replicas out of the manifests")
    return f"leave spec.replicas out of the {ref.kind} {ref.name} manifest Flux applies (or the HelmRelease's values)"


def another_writer(tool: str | None) -> str:
    """Name the writer of a replicas value the gate did not write: a GitOps sync when the target carries its marks."""
    return f"another writer ({tool}'s sync, most likely)" if tool else "another writer"


def gpus_per_replica(pod_gpus: Sequence[int], replicas: int, group: int | None = None) -> int | None:
    """GPUs one replica holds: the target's pods' GPUs over its replicas (a multi-node replica: all its pods').

    None when it cannot be read (no replica, no pod, or pods holding no GPU). Rounded up: lending counts what
    a replica gives back, and a replica mid-rollout holding more never counts as holding less. `group`: what one
    replica's whole group of pods requests by its kind's templates (`group_gpus`), for a kind whose scale
    selects only some of a replica's pods: the count is then never below it. The pods are divided among at most as
    many replicas as there are pods: a scale's status read a moment before still counts replicas whose pods are
    already terminating (not read), and a replica of fewer pods than counted would read as holding less.
    """
    total = sum(g for g in pod_gpus if g > 0)
    among = min(replicas, len(pod_gpus))
    measured = math.ceil(total / among) if replicas > 0 and pod_gpus and total > 0 else None
    if group is None or group <= 0:
        return measured
    return max(group, measured or 0)


# A LeaderWorkerSet's replica is a group of `size` pods (one leader, size - 1 workers), but its scale's selector
# (status.hpaPodSelector) selects the leaders only: the leaders' GPUs alone would read a group as holding less.
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_KIND = "LeaderWorkerSet"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
"""The label the LWS controller puts on every pod of a set, leaders and workers."""


def group_selector(ref: ScaleTargetRef) -> str | None:
    """Return the label selector of every pod of every group of `ref`, for a kind whose scale selects fewer; else None."""
    return f"{LWS_NAME_LABEL}={ref.name}" if (ref.group, ref.kind) == (LWS_GROUP, LWS_KIND) else None


def group_gpus(ref: ScaleTargetRef, spec: Mapping[str, Any]) -> int | None:
    """GPUs one replica's group of pods requests by its templates, for a LeaderWorkerSet; None for any other kind.

    `spec.leaderWorkerTemplate`: `size` pods a group (default 1), the leader made from `leaderTemplate` (or, without
    one, from `workerTemplate`), the size - 1 others from `workerTemplate`.
    """
    if group_selector(ref) is None:
        return None
    lwt = _map(spec.get("leaderWorkerTemplate"))
    size = lwt.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return None  # the API server refuses such a size: no reading, the measured count stands
    worker = _map(lwt.get("workerTemplate"))
    leader = _map(lwt.get("leaderTemplate")) or worker
    return template_gpus(leader) + (size - 1) * template_gpus(worker)


def template_gpus(template: Mapping[str, Any]) -> int:
    """GPUs a pod made from `template` requests, as the scheduler counts it, or more, never less.

    Its containers and sidecars (init containers that keep running), or its largest other init container beside
    the sidecars if that is more; of each, the larger of request and limit.
    """
    spec = _map(template.get("spec"))
    inits = _list(spec.get("initContainers"))
    sidecars = sum(_container_gpus(c) for c in inits if _map(c).get("restartPolicy") == "Always")
    main = sum(_container_gpus(c) for c in _list(spec.get("containers"))) + sidecars
    return max([main, *(_container_gpus(c) + sidecars for c in inits if _map(c).get("restartPolicy") != "Always")])


def _container_gpus(container: Any) -> int:
    resources = _map(_map(container).get("resources"))
    amounts = [_map(resources.get(k)).get(GPU_RESOURCE) for k in ("requests", "limits")]
    return max([int(str(a).strip()) for a in amounts if str(a).strip().isdigit()] or [0])


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def measured_policy(policy: ServicePolicy, target: ScaleTarget) -> ServicePolicy:
    """Return `policy` with the GPUs per replica its target's pods hold, where `ready_pods` read them."""
    gpus = target.gpus_per_replica
    return policy if gpus is None or gpus == policy.gpus_per_replica else replace(policy, gpus_per_replica=gpus)


def writer_of(target: ScaleTarget) -> str:
    """Name whoever else changed the target's replicas (`another_writer`, by the GitOps marks it carries)."""
    return another_writer(gitops_tool(target.labels, target.annotations))
