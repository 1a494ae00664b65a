"""A fleet's history from Prometheus: per service and per pod, each step's work and whether requests waited.

For each of vLLM's three counters (finished requests, prompt and generation tokens; the same names on
V1 and older V0 servers, which lack the `engine` label) every series is read on one grid, at the
last sample of each step (`last_over_time` over a step less a millisecond, so a sample is in one
step only), and turned into per-step increases per series (scripts/history/counters.py): a counter
reset or a gap stays with its own series. A pod's work is the sum over its series; a service's, the
sum over its pods. `num_requests_waiting`'s smallest value in each step says whether a pod's queue
was never empty in it (saturated). Whatever could not be read exactly is a named `HistoryWarning`.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from offhours.scripts.history.counters import fill_line, increases, runs
from offhours.scripts.history.promrange import MAX_POINTS, query_range
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.metrics import vllm
from offhours.scripts.metrics.prometheus import PrometheusError

GAP, RESET, MISSING, FILLED, INVALID = "gap", "counter-reset", "missing-metric", "no-data", "invalid-sample"
COLUMNS = ("requests", "prompt_tokens", "generation_tokens")
METRICS = dict(zip(COLUMNS, vllm.COUNTERS))
POD_LABELS = ("instance", "pod")  # what tells one pod's series from another's: Prometheus' target, else the pod
NO_POD = "(no pod label)"  # the pod of series with neither label: every such series of a service, together


@dataclass(frozen=True)
class HistoryWarning:
    """Something in the history that is not read exactly: its kind, its service and what it is."""

    kind: str
    service: str
    detail: str

    def __str__(self) -> str:
        return f"warning: {self.kind}: {self.service}: {self.detail}"


@dataclass
class ServiceHistory:
    """One service's steps: work per step (service total and per pod), pods seen, saturated pod-steps."""

    name: str
    work: dict[str, np.ndarray] = field(default_factory=dict)  # column -> per-step total
    pod_work: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # pod -> column -> per-step
    pod_covered: dict[str, np.ndarray] = field(default_factory=dict)  # pod -> steps all its counters cover
    saturated: dict[str, np.ndarray] = field(default_factory=dict)  # pod -> bool per step: requests waited throughout
    pods: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # pods with samples per step
    complete: bool = False  # every column was found


@dataclass
class History:
    """Every asked service's history over `steps` steps of `step` seconds from `start` (unix seconds)."""

    start: float
    step: float
    steps: int
    services: dict[str, ServiceHistory]
    warnings: list[HistoryWarning]


def selector(label: str, services: Sequence[str], extra: str = "") -> str:
    """Return the label matchers of the asked services: each name matched literally, whatever it holds.

    The one quoting of a name into PromQL: escaped for the regex (`re.escape`, whose escapes RE2 accepts),
    then for PromQL's double-quoted string (Go's escapes: a regex's backslash doubled, a quote escaped).
    """
    alternatives = "|".join(re.escape(s) for s in sorted(services))
    quoted = alternatives.replace("\\", "\\\\").replace('"', '\\"')
    inner = f'{label}=~"{quoted}"' + (f",{extra}" if extra else "")
    return "{" + inner + "}"


def _pod(labels: dict[str, str]) -> str:
    for key in POD_LABELS:
        if labels.get(key):
            return labels[key]
    return NO_POD


def _minute_label(step: int, history_step: float) -> str:
    minutes = step * history_step / 60.0
    day, rest = divmod(minutes, 1440.0)
    return f"step {step} (day {int(day)} {int(rest // 60):02d}:{int(rest % 60):02d})"


def _span(first: int, last: int, history_step: float) -> str:
    if first == last:
        return _minute_label(first, history_step)
    return f"{_minute_label(first, history_step)} to {_minute_label(last, history_step)}"


def _grid(url: str, promql: str, start: float, step: float, points: int, timeout: float,
          max_points: int) -> dict[tuple[tuple[str, str], ...], np.ndarray]:
    """`query_range`, whose failure to get an answer at all is one short line naming Prometheus and why.

    An unreachable or silent Prometheus is the same failure for every query: its PromQL (long, and cut where
    a caller bounds the line) says nothing about it. A flawed answer keeps the query's own words.
    """
    try:
        return query_range(url, promql, start, step, points, timeout, max_points)
    except PrometheusError as err:
        cause = err.__context__  # the input layer's error, kept by `ask` under its own words
        if isinstance(cause, InputError):
            raise PrometheusError(f"Prometheus at {cause.source.removesuffix('/api/v1/query_range')} "
                                  f"{cause.problem}") from None
        raise


def read_history(url: str, label: str, services: Sequence[str], start: float, steps: int, step: float = 60.0,
                 extra: str = "", timeout: float = 30.0, saturation: bool = False,
                 max_points: int = MAX_POINTS) -> History:
    """Read `steps` steps of `step` seconds from `start` for each service; queries split at `max_points`.

    `saturation`: also read the waiting queue (for `offhours calibrate`).
    """
    sel = selector(label, services, extra)
    window = f"{max(1, round(step * 1000) - 1)}ms"
    points = steps + 1
    histories = {name: ServiceHistory(name, pods=np.zeros(steps, dtype=np.int64)) for name in services}
    warnings: list[HistoryWarning] = []
    seen_pods: dict[str, dict[str, np.ndarray]] = {name: {} for name in services}  # pod -> steps with any sample
    for column, metric in METRICS.items():
        grid = _grid(url, f"last_over_time({metric}{sel}[{window}])", start, step, points, timeout, max_points)
        per_service: dict[str, dict[str, list[np.ndarray]]] = {}
        covered_pod: dict[str, dict[str, np.ndarray]] = {}
        for key, values in sorted(grid.items()):
            labels = dict(key)
            name, pod = labels.get(label), _pod(labels)
            if name not in histories:
                continue
            inc = increases(values)
            series = ",".join(f"{k}={v}" for k, v in key if k not in ("__name__",))
            for at in inc.resets:
                warnings.append(HistoryWarning(RESET, name, f"{metric}{{{series}}} fell in {_minute_label(at, step)}: "
                                        "counted from zero there (the process restarted)"))
            if inc.invalid:
                warnings.append(HistoryWarning(INVALID, name, f"{metric}{{{series}}} is below zero at "
                                        f"{len(inc.invalid)} point(s), first at {_minute_label(inc.invalid[0], step)}: "
                                        "no counter is, so those values are read as no sample"))
            for first, last in inc.gaps:
                warnings.append(HistoryWarning(GAP, name, f"{metric}{{{series}}} has no sample in "
                                        f"{_span(first + 1, last, step)}: its increase across the gap is "
                                        f"spread evenly over {_span(first, last, step)}"))
            per_service.setdefault(name, {}).setdefault(pod, []).append(inc.values)
            mask = covered_pod.setdefault(name, {}).setdefault(pod, np.zeros(steps, dtype=np.bool_))
            mask |= inc.covered
            sampled = seen_pods[name].setdefault(pod, np.zeros(steps, dtype=np.bool_))
            sampled |= np.isfinite(values[1:])
        for name, history in histories.items():
            pods = per_service.get(name)
            if not pods:
                warnings.append(HistoryWarning(MISSING, name, f"no {metric} series: the service is left out "
                                        "(no number is made up for it)"))
                continue
            for pod, rows in pods.items():
                history.pod_work.setdefault(pod, {})[column] = np.sum(rows, axis=0)
                old = history.pod_covered.get(pod)
                mask = covered_pod[name][pod]
                history.pod_covered[pod] = mask if old is None else old & mask
            history.work[column] = np.sum([history.pod_work[p][column] for p in pods], axis=0)
    for name, history in histories.items():
        history.complete = all(c in history.work for c in COLUMNS)
        if not history.complete:
            continue
        history.pods = np.sum(list(seen_pods[name].values()), axis=0).astype(np.int64) if seen_pods[name] \
            else np.zeros(steps, dtype=np.int64)
        # Steps no pod's counters cover: nothing is known there (Prometheus held no sample of any pod).
        known = np.zeros(steps, dtype=np.bool_)
        for mask in history.pod_covered.values():
            known |= mask
        if not known.all():
            for first, last in runs(~known):
                warnings.append(HistoryWarning(FILLED, name, f"no pod has samples around {_span(first, last, step)}: "
                                        "filled by a straight line between the nearest steps with data"))
            history.work = {c: fill_line(v, known) for c, v in history.work.items()}
    if saturation:
        grid = _grid(url, f"min_over_time({vllm.WAITING}{sel}[{window}])", start, step, points, timeout, max_points)
        waiting: dict[str, dict[str, np.ndarray]] = {}
        for key, values in grid.items():
            labels = dict(key)
            name = labels.get(label)
            if name not in histories:
                continue
            row = waiting.setdefault(name, {}).setdefault(_pod(labels), np.zeros(steps))
            row += np.nan_to_num(values[1:], nan=0.0)
        for name, history in histories.items():
            if history.pod_work and name not in waiting:
                # Without the gauge no step can show saturation: say so, or it reads as "never saturated".
                warnings.append(HistoryWarning(MISSING, name, f"no {vllm.WAITING} series: no step can show its "
                                        "replicas saturated (the configured capacity stands)"))
            history.saturated = {pod: waiting.get(name, {}).get(pod, np.zeros(steps)) > 0 for pod in history.pod_work}
    return History(start, step, steps, histories, warnings)
