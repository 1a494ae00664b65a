"""The researcher's commands: `offhours jobs`, `why`, `cancel`, `usage` (and the helpers `logs` shares).

Each command reads the pool through the read model (offhours.scripts.pool.model) and prints it;
the formatting functions are pure (a `Pool` in, text out) so they are tested on fixtures, and the
`_cmd_*` wrappers do the I/O. Errors name what is wrong (no such job, no rights) and exit 1 or 2,
never with a traceback.
"""

import argparse
import csv
import dataclasses
import io
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from offhours.scripts.cli.namespaces import Namespaces, add_flags, of_args
from offhours.scripts.cli.text import printable
from offhours.scripts.cluster.access import CANCEL_JOB, READ_JOBS, AccessReviewer, Action
from offhours.scripts.cluster.resolve import Unresolved, permitted, resolve
from offhours.scripts.pool.model import WAITING, Pool, RunView, gpus_of
from offhours.scripts.pool.store_progress import STORE_READ_SECONDS, Stored, store_progress  # noqa: F401 - `why`'s, re-exported
from offhours.scripts.pool.usage import UsageRow, usage_lines
from offhours.scripts.pool.views import (
    CANCEL_ROUNDS,
    CANCEL_SETTLE_SECONDS,
    age,
    cancellable,
    checkpoint_line,
    same_run,
    select_runs,
    sentence,
    stamp,
    stop_line,
)
from offhours.scripts.runtime.provenance import describe


class CommandError(RuntimeError):
    """An expected failure: printed as one line, exit status 1."""


class InputError(CommandError):
    """A wrong argument or input file: printed as one line, exit status 2, before the cluster is asked anything."""


# -- formatting (pure) ---------------------------------------------------------------------------
def table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by three spaces, as kubectl prints them; every cell printable (one line)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def run_record(run: RunView, pool: Pool) -> dict[str, Any]:
    """One run as JSON (`-o json`)."""
    c = run.current
    return {"name": run.name, "runId": run.run_id, "namespace": run.namespace, "service": run.service,
            "state": run.state, "queuePosition": (c.position or None) if c.state == WAITING else None,
            "reason": c.reason if c.state == WAITING else None, "reasonComputed": c.reason_computed,
            "replicas": c.replicas, "gpus": gpus_of(run, pool), "submittedAt": _iso(run.submitted),
            "admittedAt": _iso(c.admitted), "lastCheckpoint": _iso(run.last_checkpoint), "preemptions": run.preemptions,
            "gpuHours": round(run.gpu_seconds / 3600, 3), "workflows": [x.name for x in run.copies]}


def _iso(at: datetime | None) -> str | None:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ") if at else None


def jobs_text(pool: Pool, runs: Sequence[RunView], output: str = "") -> str:
    """`offhours jobs` output: a table, a wide table, or JSON."""
    if output == "json":
        return json.dumps([run_record(r, pool) for r in runs], indent=2)
    head = ["NAME", "RUN", "SERVICE", "STATE", "QUEUE", "GPUS", "AGE", "PREEMPTIONS", "GPU-HOURS"]
    if output == "wide":
        head += ["LAST CHECKPOINT", "REASON"]
    rows = [head]
    for r in runs:
        c, gpus = r.current, gpus_of(r, pool)
        row = [r.name, r.run_id, r.service, r.state, str(c.position) if c.state == WAITING and c.position else "-",
               str(gpus) if gpus is not None else f"{c.replicas}r", age(r.submitted, pool.read_at), str(r.preemptions),
               f"{r.gpu_seconds / 3600:.2f}"]
        if output == "wide":
            row += [age(r.last_checkpoint, pool.read_at) + (" ago" if r.last_checkpoint else ""),
                    c.reason or "" if c.state == WAITING else ""]
        rows.append(row)
    return table(rows)


def no_jobs(where: Namespaces, service: str | None, include_finished: bool, finished: int) -> str:
    """Return `offhours jobs`' empty answer: where it looked, and whether finished jobs are hidden there."""
    of = f" of service {service}" if service else ""
    if include_finished:
        return f"no offhours jobs{of} in {where.described()}, finished or not; -n names another namespace"
    if finished:
        return (f"no unfinished offhours jobs{of} in {where.described()}; {finished} finished one(s): "
                "use --all to list them")
    return f"no offhours jobs{of} in {where.described()} (use --all to include finished ones; -n names another namespace)"


def why_text(run: RunView, pool: Pool, stored: Stored | None = None,
             provenance: tuple[Sequence[str | None], str | None] | None = None) -> str:
    """Render the sentence, the timeline, the last checkpoint (the recorded one, or the store's if newer).

    `provenance`: the records to show and a line on a store that could not be read (cli/provenance_source.py);
    by default the workflows' own records.
    """
    lines = [printable(sentence(run, pool)), "", "timeline:"]
    lines += [f"  {stamp(e.at)}  {printable(e.what)}  [{printable(e.workflow)}]" for e in run.timeline()]
    lines.append("")
    lines.append(printable(checkpoint_line(run.last_checkpoint, stored, pool.read_at)))
    lines.append(f"GPU-hours: {run.gpu_seconds / 3600:.2f} over {len(run.copies)} workflow(s)")
    texts, problem = provenance or ([c.provenance for c in run.copies], None)
    lines += ["", *(printable(line) for line in describe(run.run_id, texts))]
    lines += [printable(problem)] if problem else []
    return "\n".join(lines)


# -- usage -----------------------------------------------------------------------------------
def usage_text(lines: Sequence[UsageRow], by: str, as_csv: bool = False, where: Namespaces | None = None,
               since: str | None = None) -> str:
    """Render a table (or CSV) with a total line."""
    column = by.removeprefix("label:")
    rows = [[column, "runs", "gpu_hours_used", "gpu_hours_lost_to_preemption", "gpu_hours_lent"]]
    rows += [[x.key, str(len(x.runs)), f"{x.used:.2f}", f"{x.lost:.2f}", f"{x.lent:.2f}"] for x in lines]
    if as_csv:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([[printable(cell) for cell in row] for row in rows])
        return out.getvalue().rstrip("\n")
    if not lines:
        place = f" in {where.described()}" if where else ""
        return f"no offhours workflows{place}" + (f" since {since}" if since else "") + "; -n names another namespace"
    rows[0] = [column.upper(), "RUNS", "GPU-H USED", "GPU-H LOST TO PREEMPTION", "GPU-H LENT"]
    rows.append(["total", str(sum(len(x.runs) for x in lines)), f"{sum(x.used for x in lines):.2f}",
                 f"{sum(x.lost for x in lines):.2f}", f"{sum(x.lent for x in lines):.2f}"])
    return table(rows)


_DURATION = re.compile(r"^(\d+)([mhdw])\Z")


def parse_since(text: str, now: datetime) -> datetime:
    """`7d`, `12h`, `30m`, `2w`, or a date/time (RFC 3339, UTC if no zone)."""
    match = _DURATION.match(text.strip())
    if match:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match.group(2)]
        try:
            return now - timedelta(**{unit: int(match.group(1))})
        except OverflowError:
            raise InputError(f"--since {printable(text)!r}: too far back") from None
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--since {printable(text)!r}: expected a duration (30m, 12h, 7d, 2w) or a date "
                         "(2025-03-01)") from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


# -- I/O wrappers --------------------------------------------------------------------------------
def _config(args: argparse.Namespace) -> Any:
    """Load the gate configuration of `--config`; None without one."""
    if not args.config:
        return None
    from offhours.scripts.config.loader import load_config
    from offhours.scripts.policy.config import ConfigError

    try:
        return load_config(args.config)
    except ConfigError as err:
        raise InputError(str(err)) from None


def config_gpus(args: argparse.Namespace) -> Mapping[str, int]:
    """GPUs per replica of each service of `--config`: what usage counts where a Deployment says nothing."""
    config = _config(args)
    return {s.name: s.gpus_per_replica for s in config.services} if config is not None else {}


def _namespaces(args: argparse.Namespace) -> Namespaces:
    """Return the verb's namespaces by the one rule (offhours.scripts.cli.namespaces); a wrong --config is an InputError."""
    from offhours.scripts.policy.config import ConfigError

    try:
        return of_args(args)
    except ConfigError as err:
        raise InputError(str(err)) from None


def _reader(args: argparse.Namespace) -> Any:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.pool.reader import PoolReader

    where = _namespaces(args)  # a wrong --config is named before any cluster is looked for
    return PoolReader(where.serving, where.research, connect())


def read_pool(args: argparse.Namespace, warn: bool = True, reader: Any = None) -> Pool:
    """Read the pool (the workflows must be readable; the rest is shown with its problems, unless not `warn`)."""
    from offhours.scripts.pool.reader import PoolReadError

    try:
        pool: Pool = (reader or _reader(args)).read(require_workflows=True)
    except PoolReadError as err:
        raise CommandError(str(err)) from None
    for problem in pool.problems if warn else ():
        print(f"warning: {printable(problem)}", file=sys.stderr)
    return pool


def _access(reader: Any) -> AccessReviewer:
    """Return who asks, as the API server answers access reviews for them (the reader's own credentials)."""
    return reader.access


def find_run(pool: Pool, name: str, where: Namespaces, action: Action, access: AccessReviewer) -> RunView:
    """Return the one run named `name` the caller may do `action` on (cluster/resolve.py), or CommandError saying why not."""
    try:
        return resolve(pool.runs, name, action, access, where.described(),
                       "`offhours jobs --all` lists them; -n names another namespace")
    except Unresolved as err:
        raise CommandError(str(err)) from None


def _cmd_jobs(args: argparse.Namespace) -> int:
    reader = _reader(args)
    pool = read_pool(args, reader=reader)
    try:  # only the namespaces where the caller may list workflows: the same resolver as every verb's
        pool = dataclasses.replace(pool, runs=tuple(permitted(pool.runs, READ_JOBS, _access(reader))))
    except Unresolved as err:
        raise CommandError(str(err)) from None
    shown = select_runs(pool, args.service, args.all)
    if shown or args.output == "json":
        print(jobs_text(pool, shown, args.output or ""))
    else:
        hidden = len(select_runs(pool, args.service, True))
        print(no_jobs(_namespaces(args), args.service, args.all, hidden))
    return 0


def _cmd_why(args: argparse.Namespace) -> int:
    reader = _reader(args)
    pool = read_pool(args, reader=reader)
    run = find_run(pool, args.name, _namespaces(args), READ_JOBS, _access(reader))
    from offhours.scripts.cli.provenance_source import texts_for_why

    print(why_text(run, pool, store_progress(run), texts_for_why(run)))
    return 0


_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*\Z")


def check_by(by: str) -> None:
    """Refuse a `--by` that groups by nothing: not service, user or label:KEY with KEY a Kubernetes label key."""
    if by in ("service", "user"):
        return
    if not by.startswith("label:"):
        raise InputError(f"--by {printable(by)!r}: expected service, user or label:KEY")
    prefix, _, name = by.removeprefix("label:").rpartition("/")
    if not _LABEL_NAME.match(name) or (prefix and (len(prefix) > 253 or not _LABEL_PREFIX.match(prefix))) \
            or by.removeprefix("label:").startswith("/"):
        raise InputError(f"--by {printable(by)!r}: KEY is not a label key (name, or prefix/name, as Kubernetes "
                         "labels have them)")


def _cmd_usage(args: argparse.Namespace) -> int:
    check_by(args.by)
    if args.since:
        parse_since(args.since, datetime.now(timezone.utc))  # a wrong --since is named before the cluster is read
    pool = read_pool(args)
    since = parse_since(args.since, pool.read_at) if args.since else None
    skipped: list[str] = []
    lines = usage_lines(pool, args.by, since, config_gpus(args), skipped)
    for line in skipped:
        print(f"warning: {printable(line)}", file=sys.stderr)
    print(usage_text(lines, args.by, args.csv, _namespaces(args), args.since))
    from offhours.scripts.cli.report import lower_bound_note

    note = lower_bound_note([], len(skipped), len(pool.problems))
    if note is not None and lines:  # said on stderr with --csv: the CSV stays rows only
        print(printable(note), file=sys.stderr if args.csv else sys.stdout)
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    from offhours.scripts.cluster.errors import describe_api_error
    from offhours.scripts.cluster.parked import stop_patch
    from offhours.scripts.cluster.workflow import PLURAL
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION

    reader = _reader(args)
    pool = read_pool(args, reader=reader)
    run = find_run(pool, args.name, _namespaces(args), CANCEL_JOB, _access(reader))
    live = cancellable(run)
    if not live:
        raise CommandError(f"{printable(run.run_id)} has nothing to cancel: it is {run.state}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise CommandError("cancel needs confirmation: run it in a terminal or pass --yes")
        answer = input(f"Stop run {printable(run.run_id)} ({printable(', '.join(c.name for c in live))}) gracefully? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not cancelled")
            return 1
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stopped: set[str] = set()
    # Read again after the stops: a copy a gate tick parked meanwhile is stopped too (pool/views.py, CANCEL_ROUNDS).
    for _ in range(CANCEL_ROUNDS):
        for copy in live:
            body = stop_patch(now)
            try:
                reader.custom.patch_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, copy.namespace, PLURAL, copy.name,
                                                             body)
            except Exception as err:  # noqa: BLE001 - reported as one line naming the workflow
                raise CommandError(describe_api_error(f"stop workflow {copy.namespace}/{copy.name}", err,
                                                      write=True)) from None
            stopped.add(copy.uid or copy.name)
            print(printable(stop_line(copy)))  # GPUs go back only from a copy that held them
        time.sleep(CANCEL_SETTLE_SECONDS)
        again = same_run(read_pool(args, warn=False, reader=reader), run)  # its warnings were said once
        live = [c for c in cancellable(again) if (c.uid or c.name) not in stopped] if again else []
        if not live:
            return 0
    raise CommandError(f"{printable(run.run_id)}: still has live workflows after {CANCEL_ROUNDS} rounds of stops "
                       f"({printable(', '.join(c.name for c in live))}): run the cancel again")


def _guarded(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except CommandError as err:
            print(f"{args.command}: {printable(err)}", file=sys.stderr)
            return 2 if isinstance(err, InputError) else 1
        except KeyboardInterrupt:
            return 130
    return run


def _common(p: argparse.ArgumentParser) -> None:
    add_flags(p)
    p.add_argument("--config", help="gate configuration: its namespaces are the defaults, and its GPUs per replica "
                   "count where a Deployment says none")


def register(subparsers: Any) -> None:
    """Add `jobs`, `why`, `logs` (logs.py), `cancel`, `usage` to the `offhours` command, in this order."""
    jobs = subparsers.add_parser("jobs", help="list research jobs: state, queue position, GPUs, preemptions, GPU-hours")
    _common(jobs)
    jobs.add_argument("--service", help="only jobs that borrow from this service")
    jobs.add_argument("--all", action="store_true", help="include finished jobs")
    jobs.add_argument("-o", "--output", choices=["wide", "json"], help="wide table or JSON")
    jobs.set_defaults(func=_guarded(_cmd_jobs))

    why = subparsers.add_parser("why", help="why a job waits (or where it is), with its timeline and last checkpoint")
    _common(why)
    why.add_argument("name", help="workflow name or run id")
    why.set_defaults(func=_guarded(_cmd_why))



def register_actions(subparsers: Any) -> None:
    """Add `cancel` and `usage` (main.py adds `logs`, its own module, between `why` and these, in help order)."""
    cancel = subparsers.add_parser("cancel", help="stop a run and all its copies gracefully (exit handlers run)")
    _common(cancel)
    cancel.add_argument("name", help="workflow name or run id")
    cancel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cancel.set_defaults(func=_guarded(_cmd_cancel))

    usage = subparsers.add_parser("usage", help="GPU-hours used, lost to preemption and lent, per service, user or label")
    _common(usage)
    usage.add_argument("--by", default="service", help="service, user or label:KEY (default service)")
    usage.add_argument("--since", help="only the GPU-hours since: 30m, 12h, 7d, 2w or a date")
    usage.add_argument("--csv", action="store_true", help="CSV instead of a table")
    usage.set_defaults(func=_guarded(_cmd_usage))
