"""The gate's GPU quota in the research namespace, written after each pass's serving writes (policy/quota.py)."""

from collections.abc import Mapping, Sequence
from typing import Any

from offhours.scripts.policy.quota import Lending, wanted_gpu_quota


def keep_gpu_quota(gate: Any, t: Any, observed: Sequence[Any], outcomes: Mapping[str, Any],
                   before: Mapping[str, int]) -> None:
    """Lower (a reclaim) or set (a full tick) the research namespace's GPU quota; a failure is logged, never raised.

    Called once serving's raises of the pass are written and before any research-side write, so a reclaim's
    lower quota is in place before its stops, and a lend's only after its scale-down was seen to land.
    """
    if t.dry_run or not gate.config.research.gpu_quota:
        return
    namespace = gate.config.workflow_namespace
    lendings = [Lending(obs.policy.gpus_per_replica, outcomes[obs.policy.name].baseline, before[obs.policy.name],
                        obs.current, len(obs.pods)) for obs in observed]
    complete = t.only is None and not t.reclaim_only
    try:
        current = gate.cluster.gpu_quota(namespace)
        want = wanted_gpu_quota(current, lendings, complete)
        if want is not None:
            gate.cluster.set_gpu_quota(namespace, want)
            gate.log.info(f"GPU quota of {namespace}: {current if current is not None else 'none'} -> {want}")
    except Exception as err:  # noqa: BLE001 - the gate still stops what runs beyond the loan; the next pass retries
        gate.log.warning(f"could not keep the GPU quota of {namespace}: {type(err).__name__}: {err}")
