"""`offhours report`: what offhours harvested on a real cluster, per month and service, from its workflows' history.

Reads the pool (every offhours workflow, finished ones included, and the services' Deployments for
their GPUs per replica) and prints the monthly sums of offhours.scripts.pool.usage, the computation
`offhours usage` and the console use too: runs (distinct run ids, as `usage` counts them), workflows (Argo
Workflows: a run's original and its parked copies), preemptions (of jobs that held lent GPUs only), GPU-hours
used and lent, the equivalent number of GPUs running 24 hours a day, and the saving at a GPU-hour price:
the shape of the original operations report.

With `--prometheus URL` it adds the return path as the gate timed it (offhours_return_phase_seconds, read back
over `--since`): per service and phase, the served reclaims and their p50 and p95.
"""

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli.namespaces import add_flags
from offhours.scripts.cli.replay_source import positive_int
from offhours.scripts.cli.text import printable
from offhours.scripts.policy.partial import Missing, partial_note
from offhours.scripts.pool.usage import UsageRow, render_table, unknown_gpus, usage_by_month


def records(rows: list[UsageRow], price: float) -> list[dict[str, Any]]:
    """Return the rows as `--json` writes them."""
    return [{"service": r.service, "month": r.month, "runs": len(r.runs), "workflows": len(r.workflows),
             "preemptions": r.preemptions, "gpuHoursUsed": r.used, "gpuHoursLent": r.lent,
             "gpuMinutesLentUnused": r.unused * 60,
             "equivalentGpus": r.equivalent_gpus(), "saving": r.used * price} for r in rows]


def lower_bound_note(unknown: list[str], skipped: int, unread: int) -> str | None:
    """Return the line under the table when its figures were made without part of their inputs; None when complete.

    A figure made without an input it needs (a Deployment the caller may not read, a workflow that could not be
    counted) is not the figure: the table's sums are then at least what it shows, and it says so.
    """
    missing = []
    if unknown:
        missing.append(Missing(f"the GPU-hours lent of {', '.join(unknown)} are not counted (GPUs per replica unknown)"))
    if skipped:
        missing.append(Missing(f"{skipped} workflow(s) could not be counted"))
    if unread:
        missing.append(Missing(f"{unread} read(s) failed (see the warnings)"))
    return partial_note(missing)  # the one wording (policy/partial.py), the console's estimate's too


def _namespaces(args: argparse.Namespace, config: Any) -> Any:
    from offhours.scripts.cli.connect import kubeconfig_path
    from offhours.scripts.cli.namespaces import gate_config, resolve

    return resolve(args.namespace, args.serving_namespace, config or gate_config(None), kubeconfig_path())


def _reader(args: argparse.Namespace, config: Any) -> Any:
    from offhours.scripts.cli.connect import connect
    from offhours.scripts.pool.reader import PoolReader

    where = _namespaces(args, config)
    return PoolReader(where.serving, where.research, connect())


def return_path_lines(url: str, services: list[str], seconds: float, end: float) -> list[str]:
    """Return the report's return-path section: per service and phase, the reclaims served, their p50 and p95."""
    from offhours.scripts.history.return_path import return_rows
    from offhours.scripts.policy.return_table import seconds_text

    lines = [f"return path, as the gate timed it (last {seconds / 86400:g} days; seconds):",
             f"{'service':16} {'phase':13} {'reclaims':>8} {'p50':>8} {'p95':>8}"]
    for row in return_rows(url, services, end, seconds):
        lines.append(f"{printable(row.service):16} {row.phase:13} {row.served:>8} "
                     f"{seconds_text(row.p50):>8} {seconds_text(row.p95):>8}")
    return lines


def _report(args: argparse.Namespace) -> int:
    from offhours.scripts.config.loader import load_config
    from offhours.scripts.policy.config import ConfigError
    from offhours.scripts.pool.reader import PoolReadError

    if not math.isfinite(args.price) or args.price < 0:
        print(f"report: --price {args.price:g}: expected a GPU-hour price of 0 or more", file=sys.stderr)
        return 2
    if args.json and (Path(args.json).is_dir() or not Path(args.json).parent.is_dir()):
        print(f"report: --json {args.json}: " + ("is a folder" if Path(args.json).is_dir() else
                                                  "its folder does not exist"), file=sys.stderr)
        return 2
    config = None
    if args.config:
        try:
            config = load_config(args.config)
        except ConfigError as err:
            print(err, file=sys.stderr)
            return 2
    gpus = {s.name: s.gpus_per_replica for s in config.services} if config is not None else {}
    try:
        pool = _reader(args, config).read(require_workflows=True)
    except PoolReadError as err:
        print(f"report: {err}", file=sys.stderr)
        return 1
    for problem in pool.problems:
        print(f"warning: {printable(problem)}", file=sys.stderr)
    for service in unknown_gpus(pool, gpus):
        print(f"warning: GPUs per replica of {printable(service)} unknown (no GPU limit read from its Deployment, and --config "
              "does not name it): its GPU-hours lent are not counted", file=sys.stderr)
    skipped: list[str] = []
    rows = usage_by_month(pool, gpus, skipped)
    for line in skipped:
        print(f"warning: {printable(line)}", file=sys.stderr)
    if not rows:
        print(f"no offhours workflows in {_namespaces(args, config).described()}; -n names another namespace")
    else:
        print(render_table([dataclasses.replace(r, key=printable(r.key)) for r in rows], args.price))
        note = lower_bound_note(unknown_gpus(pool, gpus), len(skipped), len(pool.problems))
        if note is not None:
            print(printable(note))
    if args.prometheus:
        import time

        from offhours.scripts.metrics.prometheus import PrometheusError

        services = sorted(gpus) or sorted({r.service for r in rows})
        try:
            print("\n".join(["", *return_path_lines(args.prometheus, services, args.since * 86400.0, time.time())]))
        except PrometheusError as err:
            print(f"report: --prometheus: {err}", file=sys.stderr)
            return 1
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(records(rows, args.price), indent=2))
        except OSError as err:
            print(f"report: cannot write --json {args.json}: {err.strerror}", file=sys.stderr)
            return 2
    return 0


def register(subparsers: Any) -> None:
    """Add `report` to the `offhours` command."""
    rep = subparsers.add_parser("report", help="GPU-hours lent and used, jobs, preemptions and saving, per service and "
                                "month, from the cluster's offhours workflows")
    add_flags(rep)
    rep.add_argument("--config", help="gate configuration (for the namespaces, and GPUs per replica where a "
                     "Deployment says none)")
    rep.add_argument("--price", type=float, default=2.0, help="GPU-hour price for the saving (default 2.0)")
    rep.add_argument("--json", help="write the rows as JSON here")
    rep.add_argument("--prometheus", metavar="URL", help="also show the return path as the gate timed it "
                     "(offhours_return_phase_seconds scraped from the gate's --metrics-port): per service and phase")
    rep.add_argument("--since", type=positive_int, default=7, metavar="DAYS",
                     help="with --prometheus: the days of history to read (default 7)")
    rep.set_defaults(func=_report)
