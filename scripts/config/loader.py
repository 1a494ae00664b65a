"""The gate configuration file: YAML, validated by schemas/gate-config.schema.json, read into the policy's types.

One clear error (`ConfigError`) names what is wrong, with the path of the value in the file; nothing
partial is returned.
"""

import json
from datetime import time as clock
from functools import cache
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jsonschema

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import CONFIG_BYTES
from offhours.scripts.inputs.text import package_text, read_text
from offhours.scripts.inputs.yamldoc import load_yaml
from offhours.scripts.policy import forecast
from offhours.scripts.policy.config import (
    Capacity,
    ConfigError,
    GateConfig,
    MetricsConfig,
    ResearchBoundary,
    Schedule,
    ServicePolicy,
)
from offhours.scripts.policy.record import MAX_EXACT_NEEDS
from offhours.scripts.policy.target import ScaleTargetRef, parse_target_text, target_problem

# A rise is seen within this long between two full ticks (bounded by tickSeconds for shorter ticks).
DEFAULT_RECLAIM_CHECK_SECONDS = 15


@cache
def schema() -> dict[str, Any]:
    """Return the JSON Schema of the gate configuration."""
    return dict(json.loads(package_text("offhours.schemas", "gate-config.schema.json")))


def _path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) or "(top level)"


def _capacity(raw: dict[str, Any]) -> Capacity:
    return Capacity(raw.get("requestsPerSecond"), raw.get("promptTokensPerSecond"), raw.get("generationTokensPerSecond"))


def _target_text(name: str, raw: dict[str, Any]) -> str | None:
    """Return the scale target's text (`ScaleTargetRef.text`) from `deployment` or `scaleTargetRef`; None: by label."""
    ref = raw.get("scaleTargetRef")
    if ref is None:
        deployment = raw.get("deployment")
        if deployment is not None and (problem := target_problem("apps/v1", "Deployment", deployment)):
            raise ConfigError(f"gate config: services.{name}.deployment: {problem.partition(': ')[2]}")
        return deployment
    if "deployment" in raw:
        raise ConfigError(f"gate config: services.{name}: both deployment and scaleTargetRef name a target; keep one")
    problem = target_problem(ref["apiVersion"], ref["kind"], ref["name"])
    if problem:
        raise ConfigError(f"gate config: services.{name}.scaleTargetRef.{problem}")
    return ScaleTargetRef(ref["apiVersion"], ref["kind"], ref["name"]).text


def service_policy(name: str, raw: dict[str, Any], schedule: "Schedule | None" = None) -> ServicePolicy:
    """Build a service's policy from its (schema-validated) camelCase settings; unset ones take the defaults."""
    kwargs = {py: raw[key] for key, py in _POLICY_KEYS.items() if key in raw}
    return ServicePolicy(
        name=name,
        capacity=_capacity(raw["capacity"]),
        deployment=_target_text(name, raw),
        gpus_per_replica=raw.get("gpusPerReplica", 4),
        schedule=schedule or Schedule(),
        **kwargs,
    )


def policy_settings(policy: ServicePolicy) -> dict[str, Any]:
    """Return a service's settings as the gate config spells them: `service_policy` reads them back as `policy`.

    The capacity and the GPUs per replica always; every other setting where it differs from the default.
    """
    cap = policy.capacity
    raw: dict[str, Any] = {"capacity": {k: v for k, v in (("requestsPerSecond", cap.requests_per_second),
                                                          ("promptTokensPerSecond", cap.prompt_tokens_per_second),
                                                          ("generationTokensPerSecond",
                                                           cap.generation_tokens_per_second)) if v is not None},
                           "gpusPerReplica": policy.gpus_per_replica}
    if policy.deployment is not None:
        ref = parse_target_text(policy.deployment)
        if ref.is_deployment:
            raw["deployment"] = ref.name
        else:
            raw["scaleTargetRef"] = {"apiVersion": ref.api_version, "kind": ref.kind, "name": ref.name}
    default = ServicePolicy(policy.name, cap)
    raw.update({key: getattr(policy, py) for key, py in _POLICY_KEYS.items() if getattr(policy, py) != getattr(default, py)})
    sched = policy.schedule
    if sched != Schedule():
        raw["schedule"] = {"mode": sched.mode, "timezone": sched.timezone}
        if sched.mode == "window":
            assert sched.start is not None and sched.end is not None
            raw["schedule"].update(start=sched.start.strftime("%H:%M"), end=sched.end.strftime("%H:%M"))
    return raw


def _schedule(raw: dict[str, Any] | None, where: str) -> Schedule:
    if not raw:
        return Schedule()
    tz = raw.get("timezone", "UTC")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"gate config: {where}.timezone: unknown time zone {tz!r}") from None
    if raw["mode"] == "continuous":
        return Schedule(timezone=tz)
    start, end = (clock.fromisoformat(raw[k]) for k in ("start", "end"))
    if start == end:
        raise ConfigError(f"gate config: {where}: start and end are equal; use mode continuous")
    return Schedule("window", start, end, tz)


_POLICY_KEYS = {
    "headroom": "headroom",
    "minReplicas": "min_replicas",
    "maxWaitingPerReplica": "max_waiting_per_replica",
    "stabilizationSeconds": "stabilization_seconds",
    "maxLendStep": "max_lend_step",
    "lendHysteresis": "lend_hysteresis",
    "coldStartSeconds": "cold_start_seconds",
    "maxGraceSeconds": "max_grace_seconds",
    "trend": "trend",
    "volatilityHeadroomMax": "volatility_headroom_max",
    "volatilityLookbackSeconds": "volatility_lookback_seconds",
    "timeOfDayDays": "time_of_day_days",
}


def parse_config(raw: Any) -> GateConfig:
    """Validate a decoded YAML document against the schema and build the configuration."""
    errors = sorted(jsonschema.Draft7Validator(schema()).iter_errors(raw), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        raise ConfigError(f"gate config: {_path(first)}: {first.message}")
    defaults = raw.get("defaults", {})
    default_schedule = _schedule(raw.get("schedule"), "schedule")
    services = []
    for name, svc in raw["services"].items():
        merged = {**defaults, **svc}
        if "capacity" not in merged:
            raise ConfigError(f"gate config: services.{name}.capacity: required (here or in defaults)")
        schedule = _schedule(svc["schedule"], f"services.{name}.schedule") if "schedule" in svc else default_schedule
        services.append(service_policy(name, merged, schedule))
    _refuse_shared_deployments(services)
    _refuse_unstorable_history(services, raw.get("tickSeconds", 60))
    metrics = raw.get("metrics", {})
    prom, direct = metrics.get("prometheus", {}), metrics.get("direct", {})
    source = metrics.get("source", "prometheus" if prom else "direct")
    if source == "prometheus" and not prom.get("url"):
        raise ConfigError("gate config: metrics.prometheus.url: required when metrics.source is prometheus")
    tick, sample_age = raw.get("tickSeconds", 60), metrics.get("maxSampleAgeSeconds", 300.0)
    if source == "direct" and tick > sample_age:
        raise ConfigError(f"gate config: metrics.maxSampleAgeSeconds: {sample_age} is shorter than tickSeconds {tick}: "
                          "the last tick's counter samples would always be too old to give a rate")
    check = raw.get("reclaimCheckSeconds", min(DEFAULT_RECLAIM_CHECK_SECONDS, tick))
    if check > tick:
        raise ConfigError(f"gate config: reclaimCheckSeconds: {check} is longer than tickSeconds {tick}: "
                          "a full tick already checks for a reclaim every tickSeconds")
    namespace = raw.get("namespace", "default")
    return GateConfig(
        namespace=namespace,
        workflow_namespace=raw.get("workflowNamespace", namespace),
        tick_seconds=raw.get("tickSeconds", 60),
        metrics=MetricsConfig(
            source=source,
            max_age_seconds=metrics.get("maxAgeSeconds", 180.0),
            max_sample_age_seconds=metrics.get("maxSampleAgeSeconds", 300.0),
            prometheus_url=prom.get("url"),
            window=prom.get("window", "1m"),
            service_label=prom.get("serviceLabel", "service"),
            extra_selector=prom.get("extraSelector", ""),
            prometheus_timeout_seconds=prom.get("timeoutSeconds", 10.0),
            port=direct.get("port", 8000),
            path=direct.get("path", "/metrics"),
            scrape_timeout_seconds=direct.get("timeoutSeconds", 2.0),
            concurrency=direct.get("concurrency", 64),
        ),
        failed_ticks_before_reclaim=raw.get("failSafe", {}).get("failedTicksBeforeReclaim", 3),
        services=tuple(services),
        lease_ticks=raw.get("failSafe", {}).get("leaseTicks", 3),
        reclaim_check_seconds=check,
        research=_research(raw.get("research", {})),
        pool_node_selector=tuple(sorted(raw.get("pool", {}).get("nodeSelector", {}).items())),
    )


def _research(raw: dict[str, Any]) -> ResearchBoundary:
    default = ResearchBoundary()
    return ResearchBoundary(
        max_workflows=raw.get("maxWorkflows", default.max_workflows),
        toleration_keys=tuple(raw.get("tolerationKeys", default.toleration_keys)),
        runtime_classes=tuple(raw.get("runtimeClassNames", default.runtime_classes)),
        gpu_quota=raw.get("gpuQuota", default.gpu_quota),
        require_image_digests=raw.get("requireImageDigests", default.require_image_digests),
        argo_controller=raw.get("argoController", default.argo_controller),
    )


def _refuse_unstorable_history(services: list[ServicePolicy], tick: float) -> None:
    """Refuse a look-ahead whose exact history (trend, volatility) the state ConfigMap (1 MiB at most) cannot hold."""
    for policy in services:
        exact = forecast.exact_ticks(policy, tick, forecast.reaction_seconds(policy, tick))
        if exact > MAX_EXACT_NEEDS:
            raise ConfigError(
                f"gate config: services.{policy.name}.volatilityLookbackSeconds: "
                f"{policy.volatility_lookback_seconds:.0f} s at tickSeconds {tick:.0f} is {exact} ticks of history, more "
                f"than the {MAX_EXACT_NEEDS} the service's state record can keep: shorten it or tick less often")


def _refuse_shared_deployments(services: list[ServicePolicy]) -> None:
    """Two services naming one scale target would flip it between their two targets every tick."""
    seen: dict[tuple[str, str, str], str] = {}
    for policy in services:
        ref = policy.scale_target
        key = (ref.group, ref.kind, ref.name)
        if key in seen:
            raise ConfigError(f"gate config: services {seen[key]} and {policy.name} both name {ref.kind} "
                              f"{ref.name}: one service per scale target")
        seen[key] = policy.name


CONFIG_LIMIT_BYTES = CONFIG_BYTES


def parse_config_text(text: str, source: str) -> GateConfig:
    """Parse (bounded YAML, duplicate keys refused) and validate a gate configuration's text; ConfigError names `source`."""
    try:
        raw = load_yaml(text, source)
    except InputError as err:
        raise ConfigError(f"gate config: {err}") from None
    return parse_config(raw)


def load_config(path: str | Path) -> GateConfig:
    """Read and validate a gate configuration file."""
    try:
        text = read_text(path, CONFIG_LIMIT_BYTES)
    except OSError as err:
        raise ConfigError(f"gate config: cannot read {path}: {err.strerror}") from None
    except InputError as err:
        raise ConfigError(f"gate config: {err}") from None
    return parse_config_text(text, str(path))
