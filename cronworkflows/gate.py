"""The `offhours-gate` CronWorkflow: one gate tick every few minutes, never two at once.

It runs `gate_tick` from the offhours image (fixed at render time) through Hera's runner
(`python -m hera.workflows.runner -e offhours.cronworkflows.gate:gate_tick`), with the gate
configuration mounted from the ConfigMap `offhours-gate-config`. It lives in the serving
namespace and runs as `offhours-gate`, the one ServiceAccount with rights on serving, which no
research workflow (in the research namespace) can name. `concurrencyPolicy: Forbid` and the Lease
keep ticks from overlapping; `startingDeadlineSeconds` drops a tick that could not start in time
rather than running it late.

A run lasts until `HANDOVER_SECONDS` before the next scheduled one (the shortest gap between two
firings of its schedules, `run_seconds`), counted from the run's own
creation (not its pod's start, which a slow image pull delays), reclaim checks included: so it has
ended when the next run is due (Forbid would skip that one) and the reaction time never holds a
gap longer than the hand-over plus the next pod's start.

The tick serves the return path's histograms (`offhours_return_phase_seconds`) at `/metrics` on
`METRICS_PORT`, a container port named `metrics`, and its pod carries the `prometheus.io/scrape`,
`/port` and `/path` annotations, so the common pod discovery (`kubernetes_sd_configs` role `pod`)
scrapes each run while it lives: a pod of a CronWorkflow step comes and goes, so no Service fronts it.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from hera.workflows import CronWorkflow, FieldEnv, Script, Steps, script
from hera.workflows import models as m

from offhours.scripts.names import (
    GATE_CONFIG_MAP,
    GATE_CRON_WORKFLOW,
    GATE_SERVICE_ACCOUNT,
    LABEL_MANAGED,
    LABEL_ROLE,
    OFFHOURS_IMAGE,
)

CONFIG_DIR = "/etc/offhours"
DEFAULT_SCHEDULES = ("*/5 * * * *",)
# A run ends this long before the next is due: time for Argo to see it Succeeded before the next
# schedule (Forbid skips a run while the last one is still active).
HANDOVER_SECONDS = 15
# Each run ticks once a minute (checking for a reclaim in between) until the hand-over, so decisions
# come every minute while a pod starts only every 5 minutes.
RUN_SECONDS = 300 - HANDOVER_SECONDS
# The step's pod is ended this long after its run should have (a tick still finishing).
DEADLINE_SLACK_SECONDS = 5
# The firings read to find a schedule's shortest gap (two days of a run every minute; years of a daily one).
FIRINGS_READ = 3000
# The port of the gate pod's /metrics (the return path's histograms); 0 or less: not served.
METRICS_PORT = 9464
METRICS_ANNOTATIONS = {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                       "prometheus.io/path": "/metrics"}
_FIRINGS_FROM = datetime(2026, 1, 5, tzinfo=timezone.utc)  # fixed: the same manifest whenever it is rendered


@script(
    constructor="runner",
    image=OFFHOURS_IMAGE,
    name="tick",
    labels={LABEL_ROLE: "gate"},
    annotations=METRICS_ANNOTATIONS,
    ports=[m.ContainerPort(name="metrics", container_port=METRICS_PORT, protocol="TCP")],
    service_account_name=GATE_SERVICE_ACCOUNT,
    env=[FieldEnv(name="OFFHOURS_NAMESPACE", field_path="metadata.namespace")],
    volume_mounts=[m.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True)],
    resources=m.ResourceRequirements(
        requests={"cpu": m.Quantity("100m"), "memory": m.Quantity("256Mi")},
        limits={"memory": m.Quantity("512Mi")},
    ),
    active_deadline_seconds=RUN_SECONDS + DEADLINE_SLACK_SECONDS,
)
def gate_tick(config: str = f"{CONFIG_DIR}/gate.yaml", dry_run: bool = False, seconds: int = RUN_SECONDS,
              created: str = "", metrics_port: int = METRICS_PORT) -> None:
    """Run gate ticks until `seconds` after `created` (the run's creation; now if empty): the CronWorkflow's only step.

    The return path's histograms are served at /metrics on `metrics_port` (none if it is 0 or less).
    """
    import sys

    from offhours.cronworkflows.gate import seconds_left
    from offhours.scripts.gate.loop import run_from_config

    port = int(metrics_port) if int(metrics_port) > 0 else None
    if float(seconds) <= 0:  # no end: a SIGTERM or the pod's deadline ends the run
        code = run_from_config(config, None, bool(dry_run), metrics_port=port)
    else:
        # Never longer than the run itself: a pod clock behind the API server's reads the creation as still to come.
        left = min(float(seconds), seconds_left(float(seconds), created))
        # Started past its end (a pod that waited for a node): one tick, so serving is still looked at.
        code = run_from_config(config, left, bool(dry_run), once=left <= 0, metrics_port=port)
    if code:
        sys.exit(code)


def seconds_left(seconds: float, created: str, now: datetime | None = None) -> float:
    """Seconds until `seconds` after `created` (RFC 3339, as Argo writes it); `seconds` itself if `created` is not one."""
    try:
        start = datetime.fromisoformat(created.strip().replace("Z", "+00:00"))
    except ValueError:
        return seconds
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    now = now or datetime.now(timezone.utc)
    return (start + timedelta(seconds=seconds) - now).total_seconds()


def run_seconds(schedules: Sequence[str], timezone: str = "UTC") -> int:
    """Return how long each run of `schedules` lasts: until `HANDOVER_SECONDS` before the soonest next firing.

    The shortest gap between two firings of all `schedules` together: a run never outlasts it (Forbid
    would skip the next run), and on a regular schedule the next run follows at once. A longer gap of
    an irregular schedule (nights, weekends off) is the schedule's own: no gate runs then.
    """
    from offhours.cronworkflows.cronexpr import next_firings, parse_cron, time_zone

    zone = time_zone(timezone)
    firings = sorted({f.timestamp() for s in schedules
                      for f in next_firings(parse_cron(s), zone, _FIRINGS_FROM, FIRINGS_READ)})
    gaps = [b - a for a, b in zip(firings, firings[1:])]
    if not gaps:
        return RUN_SECONDS  # fires once (or never) in the firings read: a run as long as the default one
    return int(min(gaps)) - HANDOVER_SECONDS


def gate_cron_workflow(schedules: Sequence[str] = DEFAULT_SCHEDULES, timezone: str = "UTC",
                       config: str = f"{CONFIG_DIR}/gate.yaml", image: str = OFFHOURS_IMAGE) -> CronWorkflow:
    """Build the gate CronWorkflow for `schedules` (cron lines) in `timezone`, reading `config`, running `image`.

    Each run lasts `run_seconds(schedules, timezone)`; its pod's deadline is that and `DEADLINE_SLACK_SECONDS`.
    """
    run = run_seconds(schedules, timezone)
    with CronWorkflow(
        name=GATE_CRON_WORKFLOW,
        labels={LABEL_MANAGED: "true"},
        annotations={"workflows.argoproj.io/description": "offhours gate: lend idle serving GPUs, reclaim on load."},
        schedules=list(schedules),
        timezone=timezone,
        concurrency_policy="Forbid",
        starting_deadline_seconds=60,
        successful_jobs_history_limit=3,
        failed_jobs_history_limit=5,
        entrypoint="gate",
        service_account_name=GATE_SERVICE_ACCOUNT,
        arguments={"config": config, "dry-run": "false", "run-seconds": str(run)},
        volumes=[m.Volume(name="config", config_map=m.ConfigMapVolumeSource(name=GATE_CONFIG_MAP))],
        pod_gc=m.PodGC(strategy="OnPodSuccess"),
    ) as cron:
        with Steps(name="gate"):
            gate_tick(arguments={"config": "{{workflow.parameters.config}}", "dry_run": "{{workflow.parameters.dry-run}}",
                                 "seconds": "{{workflow.parameters.run-seconds}}",
                                 "created": "{{workflow.creationTimestamp}}", "metrics_port": str(METRICS_PORT)})
    for template in cron.templates or []:
        if isinstance(template, Script):
            template.image = image
            template.active_deadline_seconds = run + DEADLINE_SLACK_SECONDS
    return cron
