"""`offhours report`: what offhours harvested on a real cluster, from its workflows' history.

Reads every offhours-labelled workflow (Kubernetes API) and sums, per service and per month:
jobs run (distinct run ids), workflows, preemptions, GPU-hours used (Argo's
`status.resourcesDuration["nvidia.com/gpu"]`), GPU-hours lent (replicas borrowed x GPUs per
replica x time from admission to the end), the equivalent number of GPUs running 24 hours a day,
and the estimated saving at a GPU-hour price: the shape of the original operations report.
"""

import calendar
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.cluster.base import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_PREEMPTED_AT,
    LABEL_REPLICAS,
    LABEL_SERVICE,
    LABEL_STATE,
    STATE_PREEMPTED,
)


@dataclass
class UsageRow:
    """One service in one month."""

    service: str
    month: str
    run_ids: set[str] = field(default_factory=set)
    workflows: int = 0
    preemptions: int = 0
    gpu_hours_used: float = 0.0
    gpu_hours_lent: float = 0.0

    def equivalent_gpus(self) -> float:
        """GPUs that would give the same GPU-hours running all month, 24 hours a day."""
        year, month = (int(x) for x in self.month.split("-"))
        hours = calendar.monthrange(year, month)[1] * 24
        return self.gpu_hours_used / hours


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def usage(workflows: Iterable[Mapping[str, Any]], gpus_per_replica: Mapping[str, int],
          now: datetime | None = None) -> list[UsageRow]:
    """Sum the usage of offhours workflows per (service, month of their start)."""
    now = now or datetime.now(timezone.utc)
    rows: dict[tuple[str, str], UsageRow] = {}
    for wf in workflows:
        meta = wf.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        service = labels.get(LABEL_SERVICE)
        status = wf.get("status") or {}
        started = _time(status.get("startedAt")) or _time(meta.get("creationTimestamp"))
        if not service or started is None:
            continue
        key = (service, f"{started.year:04d}-{started.month:02d}")
        row = rows.setdefault(key, UsageRow(*key))
        row.workflows += 1
        row.run_ids.add(labels.get("offhours.io/run-id") or meta.get("name", ""))
        if labels.get(LABEL_STATE) == STATE_PREEMPTED or annotations.get(ANNOTATION_PREEMPTED_AT):
            row.preemptions += 1
        gpu_seconds = (status.get("resourcesDuration") or {}).get("nvidia.com/gpu")
        if gpu_seconds is not None:
            row.gpu_hours_used += float(gpu_seconds) / 3600.0
        admitted = _time(annotations.get(ANNOTATION_ADMITTED_AT))
        if admitted is not None:
            end = _time(status.get("finishedAt")) or now
            replicas = int(labels.get(LABEL_REPLICAS, "0") or 0)
            hours = max(0.0, (end - admitted).total_seconds()) / 3600.0
            row.gpu_hours_lent += hours * replicas * gpus_per_replica.get(service, 4)
    return sorted(rows.values(), key=lambda r: (r.month, r.service))


def render_table(rows: list[UsageRow], price: float) -> str:
    """Render the usage as a text table with a total line."""
    head = f"{'month':<8} {'service':<20} {'jobs':>5} {'runs':>5} {'preempt':>7} {'GPU-h used':>11} " \
           f"{'GPU-h lent':>11} {'equiv GPUs':>10} {'saving':>10}"
    lines = [head, "-" * len(head)]
    total = UsageRow("all", "")
    for r in rows:
        lines.append(f"{r.month:<8} {r.service:<20} {len(r.run_ids):>5} {r.workflows:>5} {r.preemptions:>7} "
                     f"{r.gpu_hours_used:>11,.1f} {r.gpu_hours_lent:>11,.1f} {r.equivalent_gpus():>10,.1f} "
                     f"{r.gpu_hours_used * price:>10,.0f}")
        total.run_ids |= {f"{r.service}/{x}" for x in r.run_ids}
        total.workflows += r.workflows
        total.preemptions += r.preemptions
        total.gpu_hours_used += r.gpu_hours_used
        total.gpu_hours_lent += r.gpu_hours_lent
    lines.append("-" * len(head))
    lines.append(f"{'total':<8} {'':<20} {len(total.run_ids):>5} {total.workflows:>5} {total.preemptions:>7} "
                 f"{total.gpu_hours_used:>11,.1f} {total.gpu_hours_lent:>11,.1f} {'':>10} "
                 f"{total.gpu_hours_used * price:>10,.0f}")
    return "\n".join(lines)
