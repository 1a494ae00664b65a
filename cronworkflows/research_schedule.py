"""Research CronWorkflows: run an offhours WorkflowTemplate on a schedule, each run parked for the gate.

A research schedule is an Argo v4 CronWorkflow whose `workflowSpec` references the template by
`workflowTemplateRef` and is created suspended (`suspend: true`) with the labels and the priority
annotation `offhours submit` gives a parked run, so the gate admits each night's run when its
service can lend, exactly like a submitted one. Parameters are checked against the template by
`offhours.scripts.cluster.parked.parked_workflow` before anything is built.

The run id of each run is `<prefix>-<YYYYMMDD>-<HHMM>`, the firing's time as Argo records it
(UTC in Argo v4.0.5, whatever the schedule's zone), derived by Argo from `workflow.scheduledTime`
(read from the annotation `workflows.argoproj.io/scheduled-time` the controller puts on every run
it creates), twice: in the `run-id` argument the steps read, and in the `offhours.io/run-id` label
the gate reads. The label is computed from `workflow.scheduledTime` itself, not from the argument:
Argo v4.0.5 evaluates `labelsFrom` with `workflow.parameters.*` as written in the spec, before any
`{{=...}}` in them is resolved, so a label read from the argument would be the unresolved text
(an invalid label value: the workflow ends in Error). Checkpoints and outputs of different nights
never collide, and a parked copy of a preempted run (the gate copies spec and annotations)
resolves the same run id: it continues its own night's checkpoint.

What happens when a firing comes while an earlier run is still parked or running is decided here,
not left to chance (see README "Nightly runs"): `Forbid` (the default) skips the firing, because
Argo counts a suspended workflow as Running and so as active; `Allow` queues another run behind
it (the gate admits by priority, then age: the older night first). `Replace` is refused: Argo
replaces by *terminating* the earlier run, which skips its exit hook (offhours stops, never
terminates).
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

from offhours.cronworkflows.cronexpr import CronError, parse_cron, time_zone
from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.cluster.workflow import NIGHT_EXPRESSION
from offhours.scripts.names import (
    ANNOTATION_PROVENANCE,
    ARGO_GROUP,
    ARGO_VERSION,
    LABEL_MANAGED,
    LABEL_RUN_ID,
    LABEL_SCHEDULE,
)

CONCURRENCY_POLICIES = ("Forbid", "Allow")
# Argo refuses CronWorkflow names above 52 characters: its runs are named <name>-<10-digit Unix time>.
NAME_MAX = 52
# What the run id adds to its prefix: "-YYYYMMDD-HHMM". A label value holds at most 63 characters.
RUN_ID_SUFFIX_LENGTH = 14
PREFIX_MAX = 63 - RUN_ID_SUFFIX_LENGTH
DEFAULT_STARTING_DEADLINE_SECONDS = 3600
DEFAULT_KEEP = 3
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")

# `workflow.scheduledTime` is RFC 3339 (Argo v4.0.5 writes UTC: "2025-01-13T12:00:00Z" for a 21:00
# Asia/Seoul firing): its first 16 characters are the date and minute, made DNS-safe: "20250113-1200".
# The workflow codec reads the same argument back (the gate resolves it as Argo will), so it is defined there.


class ScheduleError(ValueError):
    """The schedule is invalid (name, cron, time zone, policy or a parameter); the message names it."""


def night_run_id(prefix: str) -> str:
    """Return the run-id argument of a scheduled run: `<prefix>-` and the firing's date and minute (UTC)."""
    return f"{prefix}-{{{{={NIGHT_EXPRESSION}}}}}"


def night_label_expression(prefix: str) -> str:
    """Return the `labelsFrom` expression of a scheduled run's run-id label: the same value as `night_run_id`.

    `prefix` is a DNS label (checked by `parked_workflow`), so it needs no escaping in the quotes.
    """
    return f"'{prefix}-' + {NIGHT_EXPRESSION}"


def check_schedule(
    name: str,
    schedules: str | Sequence[str],
    *,
    timezone: str = "UTC",
    concurrency: str = "Forbid",
    keep: int = DEFAULT_KEEP,
    starting_deadline_seconds: int = DEFAULT_STARTING_DEADLINE_SECONDS,
) -> list[str]:
    """Check what a schedule needs no template for; return its cron lines or raise ScheduleError."""
    if not _NAME.match(name) or len(name) > NAME_MAX:
        raise ScheduleError(f"schedule name must be a DNS label of at most {NAME_MAX} characters, got {name!r}")
    lines = [schedules] if isinstance(schedules, str) else list(schedules)
    if not lines:
        raise ScheduleError("a schedule needs at least one cron expression")
    try:
        for line in lines:
            parse_cron(line)
        time_zone(timezone)
    except CronError as err:
        raise ScheduleError(str(err)) from None
    if concurrency == "Replace":
        raise ScheduleError("concurrency Replace is refused: Argo replaces by terminating the earlier run, which skips "
                            "its exit hook; use Forbid (skip the firing) or Allow (queue behind it)")
    if concurrency not in CONCURRENCY_POLICIES:
        raise ScheduleError(f"concurrency must be one of {', '.join(CONCURRENCY_POLICIES)}, got {concurrency!r}")
    if keep < 0:
        raise ScheduleError(f"keep must be 0 or more, got {keep}")
    if starting_deadline_seconds < 0:
        raise ScheduleError(f"starting deadline must be 0 or more seconds, got {starting_deadline_seconds}")
    return lines


def research_cron_workflow(
    name: str,
    template: Mapping[str, Any],
    schedules: str | Sequence[str],
    params: Mapping[str, str],
    namespace: str,
    *,
    timezone: str = "UTC",
    priority: int = 0,
    concurrency: str = "Forbid",
    keep: int = DEFAULT_KEEP,
    starting_deadline_seconds: int = DEFAULT_STARTING_DEADLINE_SECONDS,
) -> dict[str, Any]:
    """Build the CronWorkflow `name` that runs WorkflowTemplate `template` parked on `schedules`.

    `params` are the template's workflow parameters; `run-id`, if given, is the prefix of each
    run's id (default: `name`). `keep` finished runs of each outcome are kept. Raise
    ScheduleError naming the first thing that is wrong; nothing is built then.
    """
    lines = check_schedule(name, schedules, timezone=timezone, concurrency=concurrency, keep=keep,
                           starting_deadline_seconds=starting_deadline_seconds)
    prefix = params.get("run-id") or name
    if len(prefix) > PREFIX_MAX:
        raise ScheduleError(f"run-id prefix {prefix!r} is longer than {PREFIX_MAX} characters (each run adds "
                            f"{RUN_ID_SUFFIX_LENGTH})")
    try:
        run = parked_workflow(dict(template), {**params, "run-id": prefix}, namespace, priority)
    except SubmitError as err:
        raise ScheduleError(str(err)) from None

    arguments = [{"name": p["name"], "value": night_run_id(prefix) if p["name"] == "run-id" else p["value"]}
                 for p in run["spec"]["arguments"]["parameters"]]
    template_name = run["spec"]["workflowTemplateRef"]["name"]
    return {
        "apiVersion": f"{ARGO_GROUP}/{ARGO_VERSION}",
        "kind": "CronWorkflow",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LABEL_MANAGED: "true", LABEL_SCHEDULE: name},
            "annotations": {"workflows.argoproj.io/description":
                            f"offhours schedule: {template_name} on {'; '.join(lines)} ({timezone}), runs parked for "
                            "the gate"},
        },
        "spec": {
            "schedules": lines,
            "timezone": timezone,
            "concurrencyPolicy": concurrency,
            "startingDeadlineSeconds": starting_deadline_seconds,
            "successfulJobsHistoryLimit": keep,
            "failedJobsHistoryLimit": keep,
            # What every run carries from its creation: what the gate reads (the run id until the
            # controller sets the night's, below) and the schedule it belongs to.
            "workflowMetadata": {
                "labels": {**run["metadata"]["labels"], LABEL_SCHEDULE: name},
                # A record names one run; each scheduled run has its own id: no record is copied onto them.
                "annotations": {k: v for k, v in run["metadata"]["annotations"].items() if k != ANNOTATION_PROVENANCE},
            },
            "workflowSpec": {
                "workflowTemplateRef": {"name": template_name},
                "arguments": {"parameters": arguments},
                "suspend": True,
                # From the scheduled time, not from the run-id argument: labelsFrom sees arguments
                # unresolved (see the module docstring).
                "workflowMetadata": {
                    "labelsFrom": {LABEL_RUN_ID: {"expression": night_label_expression(prefix)}},
                },
            },
        },
    }


def installed_template(name: str, namespace: str, api: Any = None) -> dict[str, Any]:
    """Read WorkflowTemplate `name` from `namespace`; ScheduleError if it is not there.

    `api` is a kubernetes CustomObjectsApi (default: one from the in-cluster config or kubeconfig).
    """
    from offhours.scripts.cluster.handles import ApiError as ApiException

    if api is None:
        from offhours.scripts.cluster.handles import handles
        from offhours.scripts.cluster.kube import load_client_config

        load_client_config()
        api = handles().custom
    try:
        found: dict[str, Any] = api.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, "workflowtemplates", name)
    except ApiException as err:
        if err.status == 404:
            raise ScheduleError(f"WorkflowTemplate {name!r} not found in namespace {namespace!r}") from None
        raise
    return found
