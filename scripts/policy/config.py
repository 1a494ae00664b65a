"""The gate's configuration as the policy reads it: typed, validated values (no I/O here).

`offhours.scripts.config.loader` reads a YAML file into these, validated by schemas/gate-config.schema.json.
"""

from dataclasses import dataclass, field
from datetime import time as clock

from offhours.scripts.names import GPU_RESOURCE
from offhours.scripts.policy.target import ScaleTargetRef, parse_target_text

DEFAULT_ARGO_CONTROLLER = "argo/argo"
"""The ServiceAccount of Argo's workflow controller as Argo's install makes it (namespace argo, name argo)."""


class ConfigError(ValueError):
    """The gate configuration is invalid; the message names the field."""


@dataclass(frozen=True)
class Capacity:
    """What one replica serves within its latency target; None means that dimension is not modelled."""

    requests_per_second: float | None = None
    prompt_tokens_per_second: float | None = None
    generation_tokens_per_second: float | None = None


@dataclass(frozen=True)
class Schedule:
    """When lending is allowed: always (`continuous`) or in a daily window in a time zone."""

    mode: str = "continuous"
    start: clock | None = None
    end: clock | None = None
    timezone: str = "UTC"


@dataclass(frozen=True)
class ServicePolicy:
    """The scaling policy of one inference service."""

    name: str
    capacity: Capacity
    # The scale target as a record keeps it (`target.ScaleTargetRef.text`): a Deployment's bare name, or
    # `<apiVersion>/<Kind>/<name>` from `scaleTargetRef`; None: the Deployment labelled offhours.io/service=<name>.
    deployment: str | None = None
    gpus_per_replica: int = 4
    # The knobs headroom .. volatility_lookback_seconds: the point bench/bench_frontier.py's rule chose from its
    # sweep over every shipped trace and the stress traces (bench/results/frontier.json): undominated on m-small
    # and m-mid, no delay outside rises without precedent there, the best worst-trace share. The volatility term
    # widens the margin after volatile hours (up to 1.0), so the low base headroom holds on rises.
    headroom: float = 0.3
    min_replicas: int = 1
    max_waiting_per_replica: float = 5.0
    stabilization_seconds: float = 900.0
    max_lend_step: int = 2
    lend_hysteresis: int = 2
    schedule: Schedule = field(default_factory=Schedule)
    # Reaction time and look-ahead (scripts/policy/forecast.py).
    cold_start_seconds: float | None = None  # None: the fleet's (simulator) or 240 s (gate estimate)
    max_grace_seconds: float = 120.0
    trend: bool = True
    volatility_headroom_max: float = 1.0
    volatility_lookback_seconds: float = 21600.0
    time_of_day_days: int = 0

    @property
    def scale_target(self) -> ScaleTargetRef:
        """The object whose `/scale` holds this service's replicas (by default a Deployment named as the service)."""
        return parse_target_text(self.deployment or self.name)


@dataclass(frozen=True)
class MetricsConfig:
    """Where the gate reads load: Prometheus (PromQL) or the pods' /metrics directly."""

    source: str = "prometheus"
    max_age_seconds: float = 180.0
    max_sample_age_seconds: float = 300.0
    prometheus_url: str | None = None
    window: str = "1m"
    service_label: str = "service"
    extra_selector: str = ""
    prometheus_timeout_seconds: float = 10.0
    port: int = 8000
    path: str = "/metrics"
    scrape_timeout_seconds: float = 2.0
    concurrency: int = 64


DEFAULT_MAX_WORKFLOWS = 500
"""Workflows at most in the research namespace unless the configuration says otherwise (a flood's bound)."""


@dataclass(frozen=True)
class ResearchBoundary:
    """What the API server lets research pods and workflows use (rendered into the admission policies and quota)."""

    # A flood of workflows is refused at the door: the ResourceQuota on count/workflows.argoproj.io. On by default;
    # None (`maxWorkflows: null`) renders none. Until kube-controller-manager has counted the workflows (seconds
    # after the quota is created), it refuses every creation with "status unknown for quota".
    max_workflows: int | None = DEFAULT_MAX_WORKFLOWS
    # Taint keys research pods may tolerate: the inference GPU pool's (a research step's tolerations parameter).
    toleration_keys: tuple[str, ...] = (GPU_RESOURCE,)
    # RuntimeClasses research pods may name (none: the cluster's default runtime only).
    runtime_classes: tuple[str, ...] = ()
    # The gate keeps the ResourceQuota offhours-gpus equal to what it has lent (on by default; `gpuQuota: false`
    # opts out). An admitted job's pods wait for the quota until a tick has seen the lend's scale-down land.
    gpu_quota: bool = True
    # Admit only jobs whose images are named by digest: a tag could point at other code when a copy resumes.
    require_image_digests: bool = False
    # Argo's workflow controller's ServiceAccount, NAMESPACE/NAME: the only identity that may create a pod running
    # as the exit hook's ServiceAccount (whose token marks the workflow its pod is named for). Argo's own install
    # (manifests/cluster-install) runs it as argo/argo.
    argo_controller: str = DEFAULT_ARGO_CONTROLLER

    @property
    def argo_controller_user(self) -> str:
        """The username the API server gives the requests of Argo's controller (its ServiceAccount's)."""
        namespace, _, name = self.argo_controller.partition("/")
        return f"system:serviceaccount:{namespace}:{name}"


@dataclass(frozen=True)
class GateConfig:
    """The whole gate configuration."""

    namespace: str
    workflow_namespace: str
    tick_seconds: int
    metrics: MetricsConfig
    failed_ticks_before_reclaim: int
    services: tuple[ServicePolicy, ...]
    lease_ticks: int = 3  # ticks without a renewal before the backstop restores a service's baseline
    # Between full ticks (which lend, admit and write state), how often the gate checks for a reclaim; 0: never.
    reclaim_check_seconds: int = 15
    research: ResearchBoundary = ResearchBoundary()
    # The pool's nodes by label (label, value), all to match; (): the nodes serving's and research's GPU pods run on.
    pool_node_selector: tuple[tuple[str, str], ...] = ()

    def service(self, name: str) -> ServicePolicy:
        """Return the policy of service `name`."""
        for policy in self.services:
            if policy.name == name:
                return policy
        raise KeyError(name)
