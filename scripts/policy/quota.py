"""The GPU quota the gate keeps in the research namespace: equal to the GPUs it has lent there (pure: no I/O).

A ResourceQuota evicts nothing; it refuses new pods. So it is the API server's half of the loan: a research pod
beyond what is lent (a resumed parked workflow, a pod made by hand, a retry) is refused at creation, whatever
made it. The order of writes keeps it on the safe side of serving:

- a reclaim lowers it right after serving's raise is written (serving first), before any stop: no new research
  pod takes a GPU serving is taking back;
- a lend raises it only once the scale-down has landed (serving's ready pods at or below what it was set to, as
  observed at the start of a later tick): no research pod is admitted onto GPUs serving still holds.
"""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Lending:
    """One service as a pass left it once serving's writes were made."""

    gpus_per_replica: int
    baseline: int | None  # the service's baseline (None: not known this pass: nothing counts as lent)
    before: int  # replicas (or maxReplicas) serving was at when the pass began
    at: int  # what serving is set to now, after the pass's raise (if any)
    serving_pods: int  # serving's ready pods when the pass began


def landed_gpus(lending: Lending) -> int:
    """Return the GPUs lent whose scale-down has landed: below both what serving is set to and what it runs."""
    if lending.baseline is None:
        return 0
    return lending.gpus_per_replica * max(0, lending.baseline - max(lending.at, lending.serving_pods))


def reclaimed_gpus(lending: Lending) -> int:
    """Return the GPUs the pass's raise took back from what was lent (a raise above the baseline takes none)."""
    cap = lending.baseline if lending.baseline is not None else max(lending.at, lending.before)
    return lending.gpus_per_replica * max(0, min(lending.at, cap) - min(lending.before, cap))


def wanted_gpu_quota(current: int | None, lendings: Iterable[Lending], complete: bool) -> int | None:
    """Return the quota to write after a pass's serving writes; None: leave it as it is.

    `complete`: the pass observed every configured service (a full tick): the quota is what has landed of
    them all (a service it could not observe counts nothing: the safe side). Otherwise (a reclaim check
    between ticks, over some services) the pass only lowers, by what its raises took back.
    """
    lendings = list(lendings)
    if complete:
        want = sum(landed_gpus(lending) for lending in lendings)
    else:
        want = max(0, (current if current is not None and current >= 0 else 0)
                   - sum(reclaimed_gpus(lending) for lending in lendings))
        if current is not None and current >= 0:
            want = min(want, current)
    return None if want == current else want
