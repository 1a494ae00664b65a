"""The simulated fleet and research-job queue: specs, file loaders, the calibrated default, a generator."""

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

from offhours.scripts.config.loader import service_policy
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import FLEET_BYTES
from offhours.scripts.inputs.text import package_text
from offhours.scripts.inputs.yamldoc import read_yaml
from offhours.scripts.policy.config import Capacity, ServicePolicy
from offhours.scripts.simulate.trace import Trace


class FleetError(ValueError):
    """A fleet or jobs file is invalid; names the field."""


@dataclass(frozen=True)
class ServiceSpec:
    """One simulated inference service: its share of the trace, its replicas and its policy."""

    policy: ServicePolicy
    baseline: int
    share: float
    shift_minutes: int = 0

    @property
    def name(self) -> str:
        """The service's name."""
        return self.policy.name


@dataclass(frozen=True)
class JobSpec:
    """A research job: replicas it borrows, work in hours at that size, checkpoint interval."""

    name: str
    service: str
    replicas: int
    work_hours: float
    checkpoint_minutes: float = 30.0
    priority: int = 0
    submit_minute: int = 0
    checkpoint_seconds: float | None = None  # SIGTERM checkpoint time; None: the fleet's grace


@dataclass(frozen=True)
class Fleet:
    """Services, timing of the fleet and the reference practice's settings."""

    services: tuple[ServiceSpec, ...]
    tick_minutes: int = 1
    cold_start_minutes: float = 4.0
    # A stopped job's exit: what the reference job takes with asynchronous checkpoints (README, checkpoints).
    grace_minutes: float = 0.5
    # The gate's reclaim check between ticks (its default reclaimCheckSeconds); 0: a rise waits for a tick.
    reclaim_check_seconds: float = 15.0
    gpu_hour_price: float = 2.0
    fixed_window_start_hour: int = 20
    fixed_window_end_hour: int = 8
    fixed_window_replicas: dict[str, int] = field(default_factory=dict)
    reference_headroom: float = 0.2
    delay_target_seconds: float = 30.0
    # Unix time of minute 0 (a history's start); None: minute 0 is a midnight in each service's schedule time zone.
    start_time: float | None = None
    # A replica's wake from vLLM's level-1 sleep (offhours calibrate --gpu-check): recorded, not yet replayed.
    wake_minutes: float | None = None


@cache
def _schema(name: str) -> dict[str, Any]:
    return dict(json.loads(package_text("offhours.schemas", name)))


def _validate(raw: Any, schema: str, what: str) -> None:
    errors = sorted(jsonschema.Draft7Validator(_schema(schema)).iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        path = ".".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise FleetError(f"{what}: {path}: {errors[0].message}")


def _read(path: str | Path, what: str) -> Any:
    try:
        return read_yaml(str(path), FLEET_BYTES)
    except OSError as err:
        raise FleetError(f"{what} {path}: cannot read: {err.strerror}") from None
    except InputError as err:
        raise FleetError(f"{what} {err}") from None


def parse_fleet(raw: Any, what: str = "fleet") -> Fleet:
    """Validate a decoded fleet document (schemas/fleet.schema.json) and build the fleet."""
    _validate(raw, "fleet.schema.json", what)
    services = []
    for name, svc in raw["services"].items():
        services.append(ServiceSpec(service_policy(name, svc), svc["baseline"], svc.get("share", 1.0),
                                    svc.get("shiftMinutes", 0)))
    fixed = raw.get("fixedWindow", {})
    return Fleet(
        services=tuple(services),
        tick_minutes=raw.get("tickMinutes", 1),
        cold_start_minutes=raw.get("coldStartMinutes", 4.0),
        grace_minutes=raw.get("graceMinutes", 0.5),
        reclaim_check_seconds=raw.get("reclaimCheckSeconds", 15.0),
        gpu_hour_price=raw.get("gpuHourPrice", 2.0),
        fixed_window_start_hour=fixed.get("startHour", 20),
        fixed_window_end_hour=fixed.get("endHour", 8),
        fixed_window_replicas=dict(fixed.get("replicas", {})),
        reference_headroom=raw.get("referenceHeadroom", 0.2),
        delay_target_seconds=raw.get("delayTargetSeconds", 30.0),
        wake_minutes=raw.get("wakeMinutes"),
    )


def load_fleet(path: str | Path) -> Fleet:
    """Read a fleet file (YAML or JSON)."""
    return parse_fleet(_read(path, "fleet"), f"fleet {path}")


def parse_jobs(raw: Any, what: str = "jobs") -> list[JobSpec]:
    """Validate a decoded jobs document (schemas/jobs.schema.json) and build the jobs."""
    _validate(raw, "jobs.schema.json", what)
    return [JobSpec(j.get("name", f"job-{i}"), j["service"], j["replicas"], j["workHours"],
                    j.get("checkpointMinutes", 30.0), j.get("priority", 0), j.get("submitMinute", 0),
                    j.get("checkpointSeconds"))
            for i, j in enumerate(raw["jobs"])]


def load_jobs(path: str | Path) -> list[JobSpec]:
    """Read a jobs file (YAML or JSON)."""
    return parse_jobs(_read(path, "jobs"), f"jobs {path}")


# The default fleet: four services sharing the bundled trace, 4-GPU replicas, each sized so its
# peak minute needs 90% of its baseline; the original practice lends 13 replicas (52 GPUs) a night.
DEFAULT_SERVICES = (("chat", 0.40, 40, 0, 4), ("code", 0.30, 30, 20, 4), ("assist", 0.20, 20, -15, 3),
                    ("embed", 0.10, 10, 40, 2))


def default_fleet(trace: Trace, services: int = 0, replicas_per_service: int = 0) -> Fleet:
    """Build the default fleet for `trace`, or a synthetic one of `services` x `replicas_per_service`."""
    peak_rps = float(np.max(trace.requests)) / 60.0
    peak_tokens = float(np.max(trace.output_tokens)) / 60.0
    specs = []
    rows = DEFAULT_SERVICES if not services else tuple(
        (f"svc-{i:02d}", 1.0 / services, replicas_per_service, (i * 7) % 60 - 30, 0) for i in range(services))
    for name, share, baseline, shift, _ in rows:
        per_replica = 0.9 * baseline
        policy = ServicePolicy(
            name=name,
            capacity=Capacity(requests_per_second=peak_rps * share / per_replica,
                              generation_tokens_per_second=peak_tokens * share / per_replica),
            gpus_per_replica=4,
        )
        specs.append(ServiceSpec(policy, baseline, share, shift))
    fixed = {name: lend for name, _, _, _, lend in rows} if not services else {}
    return Fleet(services=tuple(specs), fixed_window_replicas=fixed)


def generated_jobs(fleet: Fleet, per_service: int = 400, seed: int = 7) -> list[JobSpec]:
    """Generate a queue deep enough never to run dry: sizes 1-4 replicas, 1-12 hours, 30-min checkpoints."""
    rng = np.random.default_rng(seed)
    jobs = []
    for svc in fleet.services:
        for i in range(per_service):
            replicas = int(rng.choice([1, 1, 2, 2, 4]))
            jobs.append(JobSpec(f"{svc.name}-job-{i:04d}", svc.name, min(replicas, max(1, svc.baseline // 4)),
                                float(math.ceil(rng.uniform(1, 12))), 30.0, int(rng.integers(0, 3)), 0))
    return jobs
