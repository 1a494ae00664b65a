"""How long a stopped job takes to give its GPUs back, measured from its pods' status (pure: no I/O).

Argo's stop (`spec.shutdown: Stop`) signals a workflow's containers and deletes no pod, so the
release starts at the gate's stop (the tick that planned it) and ends when the last container of
every pod that held resources at the stop has terminated (`state.terminated.finishedAt`). A pod's
deletionTimestamp is no start: it is the delete request plus the pod's grace. The gate keeps a few
recent measurements per run in its record of the service, and plans each victim with a high
quantile of them, its declared grace as the prior, the service's grace cap as the bound.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from offhours.scripts.policy.plan import Job

# The record's size bound: a few recent measurements of each run, a few runs.
MAX_RELEASES = 24  # measurements kept per service, newest last
MAX_RELEASES_PER_KEY = 5  # of one run: the quantile reads these
MAX_RELEASING = 32  # stops still being measured per service (a larger reclaim measures its first ones)
RELEASE_QUANTILE = 0.9
# A stop not released after this long past the cap is not measured: its stop may have failed (the pods
# then end for some other reason), and Kubernetes kills a pod at its grace, which the admission caps.
OVERDUE_SECONDS = 300.0

Release = tuple[str, float, float]  # (run key, when measured, seconds from the stop to the last container's end)
# (workflow name, run key, when the gate stopped it, the Workflow's uid: its pods are the ones it owns)
Releasing = tuple[str, str, float, str]


@dataclass(frozen=True)
class PodExit:
    """One research pod as its status reads: when it was created, when its last container ended.

    `finished` is the latest `finishedAt` of its containers once every container has terminated;
    None while any container is waiting or running (or its status says nothing yet). `gpus`: whether
    its spec requests GPUs (a pod that does holds serving's GPUs whenever it was created).
    """

    name: str
    created: float | None
    finished: float | None
    gpus: bool = False


def release_key(job: Job) -> str:
    """Return what a job's measurements are kept under: its run (its parked copy and later runs share it)."""
    return job.run_id or job.name


def release_seconds(stopped_at: float, pods: Sequence[PodExit], now: float) -> float | None:
    """Return how long the stop at `stopped_at` took to free the workflow's pods; None while one still holds them.

    Only pods that held resources at the stop count: one whose containers had all ended before it (an
    earlier step's) is left out, and so is one created after it that requests no GPU (an exit handler's).
    A GPU pod created after the recorded stop counts: the stop is dated at the start of the tick that
    planned it and written seconds later, and Argo may start a step in between. A pod that is gone is released:
    with no pod left to read, the release is dated `now`, an upper bound (the slow side). A `finishedAt` is
    the node's clock: one past `now` is that clock running ahead, and the release is dated `now` too.
    """
    ended: list[float] = []
    for pod in pods:
        # Created after the stop without a GPU: the exit handler, not a holder of the GPUs. Creation times are
        # whole seconds, so one created in the stop's own second counts as a holder: its time is added, the slow side.
        if pod.created is not None and pod.created > stopped_at and not pod.gpus:
            continue
        if pod.finished is None:
            return None
        if pod.finished >= stopped_at:
            ended.append(pod.finished)
    end = min(max(ended), now) if ended else now
    return max(0.0, end - stopped_at)


def with_stops(releasing: Sequence[Releasing], stopped: Iterable[Job], now: float) -> tuple[Releasing, ...]:
    """Add this tick's stops to the ones being measured; a job stopped again is measured from its newest stop."""
    out: dict[str, Releasing] = {entry[0]: entry for entry in releasing}
    for job in stopped:
        out.pop(job.name, None)  # re-inserted last: the newest stop
        out[job.name] = (job.name, release_key(job), now, job.uid)
    return tuple(out.values())[-MAX_RELEASING:]


def measured(releasing: Sequence[Releasing], releases: Sequence[Release],
             pods: Mapping[str, Sequence[PodExit]], now: float,
             cap_seconds: float) -> tuple[tuple[Releasing, ...], tuple[Release, ...]]:
    """Move every stop whose pods have all ended from `releasing` into `releases`.

    `pods` holds the pods read for each workflow being measured (a workflow missing from it was not
    read this tick: it stays being measured). A stop still unreleased `OVERDUE_SECONDS` past the cap
    is dropped unmeasured, and so is a release that took longer (a gate away for a long while finds the
    pods gone and could only date it `now`): the record's reader refuses what no cap allows.
    """
    waiting: list[Releasing] = []
    done = list(releases)
    for entry in releasing:
        name, key, stopped_at, _ = entry
        if name not in pods:
            if now - stopped_at <= cap_seconds + OVERDUE_SECONDS:
                waiting.append(entry)
            continue
        seconds = release_seconds(stopped_at, pods[name], now)
        if seconds is not None:
            if seconds <= cap_seconds + OVERDUE_SECONDS:
                done.append((key, now, seconds))
        elif now - stopped_at <= cap_seconds + OVERDUE_SECONDS:
            waiting.append(entry)
    return tuple(waiting), _bounded(done)


def _bounded(releases: Sequence[Release]) -> tuple[Release, ...]:
    """Keep the newest `MAX_RELEASES_PER_KEY` of each run, the newest `MAX_RELEASES` in all."""
    kept: list[Release] = []
    per_key: dict[str, int] = {}
    for entry in reversed(releases):
        if per_key.get(entry[0], 0) < MAX_RELEASES_PER_KEY:
            per_key[entry[0]] = per_key.get(entry[0], 0) + 1
            kept.append(entry)
    return tuple(reversed(kept[:MAX_RELEASES]))


def release_estimate(samples: Sequence[float], declared: float | None, cap_seconds: float) -> float:
    """Return the seconds a stop of this job is planned to take.

    A high quantile (`RELEASE_QUANTILE`, nearest rank) of its recent measurements; without any, its
    declared grace (the prior: what it says it needs); without that, the whole cap. Never above the
    cap: the admission bounds the pods' grace by it, so what a job takes past it is not serving's wait.
    """
    if samples:
        ordered = sorted(samples)
        value = ordered[min(len(ordered) - 1, math.ceil(RELEASE_QUANTILE * len(ordered)) - 1)]
    else:
        value = cap_seconds if declared is None else declared
    return max(0.0, min(value, cap_seconds))


def with_release_estimates(jobs: Iterable[Job], releases: Sequence[Release], cap_seconds: float) -> list[Job]:
    """Return the jobs with the exit time the victim order reads: `release_estimate` of each job's run."""
    by_key: dict[str, list[float]] = {}
    for key, _, seconds in releases:
        by_key.setdefault(key, []).append(seconds)
    return [replace(j, exit_seconds=release_estimate(by_key.get(release_key(j), []), j.exit_seconds, cap_seconds))
            for j in jobs]
