"""`offhours schedule`: nightly (or any cron) runs of an offhours template, each parked for the gate.

    offhours schedule NAME --template T --cron "0 21 * * *" [--timezone Z] [-p k=v ...] [--priority P]
                      [--concurrency Forbid|Allow] [--keep N] [--starting-deadline S] [--dry-run] [-n NS]
    offhours schedule list [-n NS]
    offhours schedule suspend|resume|delete NAME [-n NS]

`list`, `suspend`, `resume` and `delete` are the verbs; a schedule cannot take one as its name.
Everything is checked before anything is created; bad input is one line naming it (exit 2).
"""

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from urllib3.exceptions import MaxRetryError

from offhours.cronworkflows.cronexpr import CronError, next_firings, parse_cron, time_zone
from offhours.cronworkflows.research_schedule import (
    DEFAULT_KEEP,
    DEFAULT_STARTING_DEADLINE_SECONDS,
    ScheduleError,
    check_schedule,
    installed_template,
    research_cron_workflow,
)
from offhours.scripts.cli.text import printable
from offhours.scripts.cluster.parked import SubmitError, parse_params
from offhours.scripts.names import (
    ARGO_GROUP,
    ARGO_SCHEDULED_TIME_ANNOTATION,
    ARGO_SHUTDOWN_STRATEGIES,
    ARGO_VERSION,
    FINISHED_PHASES,
    LABEL_RUN_ID,
    LABEL_SCHEDULE,
    STATE_PARKED,
)

VERBS = ("list", "suspend", "resume", "delete")
LAST_RUNS = 3


MAX_KEEP = 1000  # finished runs kept per outcome: more is an etcd burden, not a history
MAX_STARTING_DEADLINE_SECONDS = 7 * 86400  # a firing missed by more than a week is not that night's run
MAX_PRIORITY = 1_000_000  # admission priorities compare; beyond this a number is a typo, not an order


# -- pure: what `list` shows ---------------------------------------------------------------
def next_firing(cron: dict[str, Any], now: datetime) -> datetime | None:
    """Return the CronWorkflow's next firing after `now` (None if suspended or it never fires)."""
    spec = cron.get("spec") or {}
    if spec.get("suspend"):
        return None
    zone = time_zone(spec.get("timezone") or "UTC")
    firings = [f for line in spec.get("schedules") or [] for f in next_firings(parse_cron(line), zone, now)]
    return min(firings, default=None)


def run_state(wf: dict[str, Any]) -> str:
    """Return a run's state as a researcher reads it: parked, running, stopping, or Argo's final phase."""
    phase = (wf.get("status") or {}).get("phase")
    if phase in FINISHED_PHASES:
        return str(phase)
    spec = wf.get("spec") or {}
    if spec.get("shutdown") in ARGO_SHUTDOWN_STRATEGIES:  # Argo runs pods under any other value
        return "stopping"
    if spec.get("suspend"):
        return STATE_PARKED
    return "running"


def _run_key(wf: dict[str, Any]) -> str:
    meta = wf.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(ARGO_SCHEDULED_TIME_ANNOTATION) or meta.get("creationTimestamp") or "")


@dataclass(frozen=True)
class ScheduleRow:
    """One line of `offhours schedule list`."""

    name: str
    template: str
    cron: str
    next: str
    policy: str
    runs: list[tuple[str, str, str]]  # (workflow, run id, state), newest first


def _name_of(obj: Any) -> str:
    """Return the object's name however malformed it is (never raises)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else "(unnamed)"


def _readable_runs(runs: list[dict[str, Any]]) -> list[tuple[str, str, tuple[str, str, str]]]:
    """(schedule, sort key, (workflow, run id, state)) of every run that can be read; a malformed one is skipped."""
    out = []
    for w in runs:
        try:
            meta = w["metadata"]
            labels = meta.get("labels") or {}
            name = meta["name"]
            out.append((str(labels.get(LABEL_SCHEDULE)), _run_key(w),
                        (str(name), str(labels.get(LABEL_RUN_ID, "")), run_state(w))))
        except (KeyError, TypeError, AttributeError):  # a tenant's malformed workflow never hides the others
            continue
    return out


def _row(cron: dict[str, Any], runs: list[tuple[str, str, tuple[str, str, str]]], now: datetime) -> ScheduleRow:
    name = cron["metadata"]["name"]
    spec = cron.get("spec") or {}
    zone = spec.get("timezone") or "UTC"
    try:
        upcoming = next_firing(cron, now)
        nxt = "suspended" if spec.get("suspend") else (upcoming.strftime("%Y-%m-%d %H:%M ") + zone if upcoming
                                                         else "never")
    except CronError as err:
        nxt = f"invalid: {err}"
    mine = sorted((r for r in runs if r[0] == name), key=lambda r: r[1], reverse=True)[:LAST_RUNS]
    return ScheduleRow(
        name=name,
        template=str(((spec.get("workflowSpec") or {}).get("workflowTemplateRef") or {}).get("name", "?")),
        cron="; ".join(spec.get("schedules") or []),
        next=nxt,
        policy=str(spec.get("concurrencyPolicy") or "Allow"),
        runs=[r[2] for r in mine],
    )


def schedule_rows(crons: list[dict[str, Any]], runs: list[dict[str, Any]], now: datetime) -> list[ScheduleRow]:
    """Return a row per schedule: its next firing in its time zone and its last runs (parked copies included).

    A CronWorkflow in a shape the minimal Argo CRD lets through is one row saying so, never a
    traceback that hides every other schedule of the namespace.
    """
    readable = _readable_runs(runs)
    rows = []
    for cron in sorted(crons, key=_name_of):
        try:
            rows.append(_row(cron, readable, now))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            rows.append(ScheduleRow(name=_name_of(cron), template="?", cron="?",
                                    next=f"unreadable ({type(err).__name__})", policy="?", runs=[]))
    return rows


def render_rows(rows: list[ScheduleRow], namespace: str = "") -> str:
    """Render `list` as a table, the last runs indented under each schedule (empty: where it looked)."""
    if not rows:
        return f"no schedules in namespace {namespace}; -n names another namespace" if namespace else "no schedules"
    header = ("NAME", "TEMPLATE", "CRON", "NEXT", "POLICY")
    table = [header, *(tuple(printable(c) for c in (r.name, r.template, r.cron, r.next, r.policy)) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(table[0], widths)).rstrip()]
    for row, line in zip(rows, table[1:]):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
        out.extend(f"    {printable(wf)}  {printable(run_id)}  {printable(state)}" for wf, run_id, state in row.runs)
    return "\n".join(out)


# -- I/O: the cluster ----------------------------------------------------------------------
def _custom_api() -> Any:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.cluster.handles import handles

    return handles(connect()).custom


def library_template(name: str, namespace: str) -> dict[str, Any] | None:
    """Return the library's own WorkflowTemplate `name`, as `offhours render` installs it; None if it has none so named."""
    from offhours.workflows.render import manifests

    for doc in manifests().values():
        if doc.get("kind") == "WorkflowTemplate" and doc["metadata"]["name"] == name:
            return {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    return None


def dry_run(name: str, namespace: str, build: Callable[[dict[str, Any]], dict[str, Any]], api: Any = None) -> dict[str, Any]:
    """Build the CronWorkflow without creating it, with no cluster needed.

    The parameters are checked against the library's own template of that name, and also against
    the installed one when a cluster answers (one that does not is a note on stderr, not a failure).
    """
    from offhours.scripts.cli.connect import KubeconfigError, NoCluster
    from offhours.scripts.cluster.handles import ApiError as ApiException

    library = library_template(name, namespace)
    body = build(library) if library is not None else None
    try:
        installed: dict[str, Any] | None = installed_template(name, namespace, api or _custom_api())
    except ScheduleError:
        if library is None:
            raise
        print(f"schedule: note: {name} is not installed in namespace {namespace!r}: checked against the "
              "library's own template", file=sys.stderr)
        installed = None
    except (NoCluster, KubeconfigError, OSError, ApiException, MaxRetryError) as err:
        if library is None:
            why = str(err) if isinstance(err, NoCluster) else f"no cluster answers to read it ({type(err).__name__})"
            raise ScheduleError(f"{name!r} is not a template of the library, and {why}") from None
        print(f"schedule: note: no cluster to read {name} from: checked against the library's own template",
              file=sys.stderr)
        installed = None
    if installed is not None:
        body = build(installed)  # what the cluster will run: its parameters decide
    assert body is not None
    return body


def create(args: argparse.Namespace, api: Any = None) -> int:
    """Build (and unless --dry-run, create) the schedule; print it or what was created."""
    from offhours.scripts.cluster.handles import ApiError as ApiException
    from offhours.workflows.render import to_yaml

    if not args.template or not args.cron:
        raise ScheduleError("a new schedule needs --template and --cron")
    # Everything that needs no cluster is checked before the cluster is asked for anything.
    if args.keep > MAX_KEEP:
        raise ScheduleError(f"--keep {args.keep}: at most {MAX_KEEP}")
    if args.starting_deadline > MAX_STARTING_DEADLINE_SECONDS:
        raise ScheduleError(f"--starting-deadline {args.starting_deadline}: at most {MAX_STARTING_DEADLINE_SECONDS} "
                            "seconds (a week)")
    if abs(args.priority) > MAX_PRIORITY:
        raise ScheduleError(f"--priority {args.priority}: expected -{MAX_PRIORITY} to {MAX_PRIORITY}")
    check_schedule(args.name, args.cron, timezone=args.timezone, concurrency=args.concurrency, keep=args.keep,
                   starting_deadline_seconds=args.starting_deadline)
    params = parse_params(args.param or [])

    def build(template: dict[str, Any]) -> dict[str, Any]:
        return research_cron_workflow(args.name, template, args.cron, params, args.namespace, timezone=args.timezone,
                                      priority=args.priority, concurrency=args.concurrency, keep=args.keep,
                                      starting_deadline_seconds=args.starting_deadline)

    if args.dry_run:
        print(to_yaml(dry_run(args.template, args.namespace, build, api)), end="")
        return 0
    api = api or _custom_api()
    _refuse_a_namespace_the_gate_does_not_admit_from(args, api)
    body = build(installed_template(args.template, args.namespace, api))
    try:
        api.create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "cronworkflows", body)
    except ApiException as err:
        if err.status == 409:
            raise ScheduleError(f"schedule {args.name!r} exists in namespace {args.namespace!r}; delete it first") from None
        raise
    upcoming = next_firing(body, datetime.now(timezone.utc))
    when = upcoming.strftime("%Y-%m-%d %H:%M") if upcoming else "never"
    print(f"{args.name} created: next run {when} {args.timezone}, parked until the gate admits it")
    return 0


def _refuse_a_namespace_the_gate_does_not_admit_from(args: argparse.Namespace, api: Any) -> None:
    """Raise ScheduleError when the installed gate configuration admits from another namespace than the schedule's.

    The gate admits its configuration's workflowNamespace only: a schedule elsewhere parks runs no gate admits.
    Advisory like `submit`'s check: with no configuration readable (or no client to read it with), it goes ahead.
    """
    from offhours.scripts.cli.installed_config import installed_gate_config
    from offhours.scripts.cli.namespaces import of_args
    from offhours.scripts.cluster.handles import handles
    from offhours.scripts.cluster.parked import misplaced_namespace
    from offhours.scripts.names import GATE_CONFIG_MAP

    api_client = getattr(api, "api_client", None)
    if api_client is None:
        return
    serving = of_args(args).serving
    installed, _ = installed_gate_config(handles(api_client).core, serving)
    if installed is None:
        return
    misplaced = misplaced_namespace(f"namespace {args.namespace}", args.namespace, installed.workflow_namespace,
                                    f"the installed configuration (ConfigMap {serving}/{GATE_CONFIG_MAP})", "schedule")
    if misplaced is not None:
        raise ScheduleError(misplaced)


def _named(args: argparse.Namespace) -> str:
    if not args.target:
        raise ScheduleError(f"offhours schedule {args.name} needs the schedule's name")
    return str(args.target)


def act(args: argparse.Namespace, api: Any) -> int:
    """Run one of the verbs list, suspend, resume, delete."""
    from offhours.scripts.cluster.handles import ApiError as ApiException
    from offhours.scripts.cluster.handles import delete_if_uid

    if args.name == "list":
        crons = api.list_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "cronworkflows",
                                                  label_selector=LABEL_SCHEDULE)["items"]
        runs = api.list_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "workflows",
                                                 label_selector=LABEL_SCHEDULE)["items"]
        print(render_rows(schedule_rows(crons, runs, datetime.now(timezone.utc)), args.namespace))
        return 0
    name = _named(args)
    try:
        cron = api.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "cronworkflows", name)
        meta = cron.get("metadata") or {}
        # Only a schedule `list` shows: any other CronWorkflow of the namespace (the gate's own, where research
        # shares the serving namespace) is refused by name. The write is conditional on the object read.
        if (meta.get("labels") or {}).get(LABEL_SCHEDULE) != name:
            raise ScheduleError(f"{printable(name)!r} is not an offhours schedule of namespace {args.namespace!r} "
                                "(`offhours schedule list` lists them): left as it is")
        if args.name == "delete":
            # Orphan: a run that is admitted finishes (and returns its GPUs through its exit hook)
            # instead of being deleted under the gate with the CronWorkflow that owns it. Both in the body:
            # the API server reads a delete's query parameters only when it has no body.
            api.delete_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "cronworkflows", name,
                                                body=delete_if_uid(meta.get("uid"), propagation_policy="Orphan"))
            print(f"{name} deleted; its runs are kept")
        else:
            api.patch_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "cronworkflows", name,
                                               {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                                                "spec": {"suspend": args.name == "suspend"}})
            print(f"{name} {'suspended: it creates no runs' if args.name == 'suspend' else 'resumed'}")
    except ApiException as err:
        if err.status == 404:
            raise ScheduleError(f"no schedule {name!r} in namespace {args.namespace!r}") from None
        if err.status == 409:
            raise ScheduleError(f"schedule {name!r} changed while it was read; nothing was done: run it again") from None
        raise
    return 0


def run(args: argparse.Namespace, api: Any = None) -> int:
    """Run `offhours schedule` with parsed `args`; `api` is a CustomObjectsApi (default: from kubeconfig)."""
    from offhours.scripts.cli.connect import KubeconfigError
    from offhours.scripts.cli.namespaces import of_args

    args.namespace = of_args(args).research
    try:
        if args.name in VERBS:
            if args.template or args.cron:
                raise ScheduleError(f"{args.name!r} is a verb of offhours schedule, not a schedule name")
            if args.name != "list":
                _named(args)
            return act(args, api or _custom_api())
        if args.target:
            raise ScheduleError(f"unexpected argument {args.target!r}")
        return create(args, api)
    except (ScheduleError, SubmitError, CronError) as err:
        print(f"schedule: {err}", file=sys.stderr)
        return 2
    except KubeconfigError as err:
        print(f"schedule: no cluster to talk to: {err}", file=sys.stderr)
        return 2


def register(subparsers: Any) -> None:
    """Add `offhours schedule` to the CLI's subparsers."""
    sched = subparsers.add_parser(
        "schedule", help="run a template on a cron schedule, each run parked for the gate; list|suspend|resume|delete",
        description="Create a CronWorkflow whose runs wait parked for the gate, or list|suspend|resume|delete them.")
    sched.add_argument("name", help="new schedule's name, or a verb: list, suspend, resume, delete")
    sched.add_argument("target", nargs="?", help="the schedule a verb acts on")
    sched.add_argument("--template", help="WorkflowTemplate to run, e.g. offhours-llm-pipeline")
    sched.add_argument("--cron", action="append", help='cron line, e.g. "0 21 * * *" (repeatable)')
    sched.add_argument("--timezone", default="UTC", help="IANA time zone of the cron lines (default UTC)")
    sched.add_argument("-p", "--param", action="append", help="workflow parameter name=value (repeatable); "
                       "run-id is the prefix of each night's run id (default: the schedule's name)")
    sched.add_argument("--priority", type=int, default=0, help="admission priority of every run (higher first)")
    sched.add_argument("--concurrency", default="Forbid", help="a firing while an earlier run is parked or running: "
                       "Forbid skips it (default), Allow queues another run")
    sched.add_argument("--keep", type=int, default=DEFAULT_KEEP, help="finished runs kept per outcome (default 3)")
    sched.add_argument("--starting-deadline", type=int, default=DEFAULT_STARTING_DEADLINE_SECONDS,
                       help="seconds after a missed firing (controller down) it may still create its run (default 3600)")
    sched.add_argument("--dry-run", action="store_true", help="print the CronWorkflow; create nothing")
    sched.add_argument("-n", "--namespace", help="namespace of the template, the schedule and its runs (default: the "
                       "kubeconfig context's, else the gate configuration's workflowNamespace)")
    sched.set_defaults(func=run)
