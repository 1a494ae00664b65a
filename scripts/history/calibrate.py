"""Capacity per replica measured from a service's own history, in the steps its replicas were saturated.

A replica is saturated in a step when its `num_requests_waiting` never fell to zero in it: it was
serving as fast as it could, so its throughput then is what one replica sustains (for the mix of
prompt and generation lengths it was serving). The estimate per dimension (finished requests,
prompt tokens, generation tokens per second) is the work of all saturated pod-steps over their
time: a pooled mean, so a step with a sampling jitter weighs no more than its share. Fewer than
`min_steps` saturated pod-steps is not enough evidence, and then the configured value stands. Series
with neither an `instance` nor a `pod` label cannot be told apart by pod and give no evidence.
"""

from dataclasses import dataclass

import numpy as np

from offhours.scripts.history.read import COLUMNS, NO_POD, ServiceHistory

MIN_STEPS = 10


@dataclass(frozen=True)
class Estimate:
    """What one replica sustains, per second, while saturated; None without enough evidence."""

    service: str
    rates: dict[str, float] | None  # column -> per second
    saturated_steps: int  # pod-steps with requests waiting throughout
    pods: int  # pods that were saturated at least once
    spread: dict[str, tuple[float, float]]  # column -> (p10, p90) of the per-step rates
    note: str


def estimate(history: ServiceHistory, step: float, min_steps: int = MIN_STEPS) -> Estimate:
    """Estimate one replica's capacity from the service's saturated pod-steps."""
    totals = dict.fromkeys(COLUMNS, 0.0)
    per_step: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}
    count, pods, unlabelled = 0, 0, False
    for pod, work in history.pod_work.items():
        if set(work) != set(COLUMNS):
            continue
        if pod == NO_POD:  # every replica's series in one: their sum is no replica's throughput
            unlabelled = True
            continue
        mask = history.saturated.get(pod, np.zeros(0, dtype=np.bool_))
        covered = history.pod_covered.get(pod)
        if mask.shape[0] == 0 or covered is None:
            continue
        mask = mask & covered
        n = int(mask.sum())
        if n == 0:
            continue
        count += n
        pods += 1
        for column in COLUMNS:
            totals[column] += float(work[column][mask].sum())
            per_step[column].append(work[column][mask] / step)
    if count < max(1, min_steps):  # no saturated step is no evidence, whatever was asked for
        why = ("its series carry neither an instance nor a pod label, so no pod's throughput can be told apart"
               if unlabelled and count == 0 else
               f"not enough evidence: {count} saturated pod-step(s), fewer than {min_steps}")
        return Estimate(history.name, None, count, pods, {}, f"{why}; the configured capacity stands")
    rates = {c: totals[c] / (count * step) for c in COLUMNS}
    if not any(rates.values()):
        # Requests waited throughout and none was served: wedged replicas, not a capacity of zero.
        return Estimate(history.name, None, count, pods, {},
                        f"{count} saturated pod-step(s) finished nothing (replicas stuck?); "
                        "the configured capacity stands")
    spread = {}
    for c in COLUMNS:
        values = np.concatenate(per_step[c])
        spread[c] = (float(np.percentile(values, 10)), float(np.percentile(values, 90)))
    return Estimate(history.name, rates, count, pods, spread,
                    f"{count} saturated pod-step(s) of {step:g} s on {pods} pod(s)")
