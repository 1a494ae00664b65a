"""What the gate may act on, read from a scale target's metadata and its scale: pure judgements, no I/O.

Both cluster adapters (`kube`, `memory`) and `offhours check` judge a target by these same functions, so a
target the gate refuses is the one `check` names, with the same line.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from offhours.scripts.cluster.base import ScaleTarget
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


def gpus_per_replica(pod_gpus: Sequence[int], replicas: int) -> int | None:
    """GPUs one replica holds: the target's pods' GPUs over its replicas (a multi-node replica: all its pods').

    None when it cannot be read (no replica, no pod, or pods holding no GPU). Rounded up: lending counts what
    a replica gives back, and a replica mid-rollout holding more never counts as holding less.
    """
    total = sum(g for g in pod_gpus if g > 0)
    if replicas <= 0 or not pod_gpus or total == 0:
        return None
    return math.ceil(total / replicas)


def measured_policy(policy: ServicePolicy, target: ScaleTarget) -> ServicePolicy:
    """Return `policy` with the GPUs per replica its target's pods hold, where `ready_pods` read them."""
    gpus = target.gpus_per_replica
    return policy if gpus is None or gpus == policy.gpus_per_replica else replace(policy, gpus_per_replica=gpus)


def writer_of(target: ScaleTarget) -> str:
    """Name whoever else changed the target's replicas (`another_writer`, by the GitOps marks it carries)."""
    return another_writer(gitops_tool(target.labels, target.annotations))
