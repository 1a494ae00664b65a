"""`offhours gate`: the gate's run loop (scripts/gate/loop.py), the same one the gate CronWorkflow's step runs."""

import argparse
from typing import Any

from offhours.scripts.cli.argtypes import finite_non_negative


def _seconds(text: str) -> float:
    """Parse a run's length in seconds (0: no end) (argparse type)."""
    return finite_non_negative(text, "a number of seconds")


def port(text: str) -> int:
    """Parse a TCP port, 1 to 65535 (argparse type)."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1 to 65535)")
    return int(text)


def _gate(args: argparse.Namespace) -> int:
    from offhours.scripts.gate.loop import run_from_config

    return run_from_config(args.config, args.for_seconds, args.dry_run, once=args.once, metrics_port=args.metrics_port)


def register(subparsers: Any) -> None:
    """Add `gate` to the `offhours` command."""
    gate = subparsers.add_parser("gate", help="lend idle serving replicas to parked research jobs; reclaim them on load")
    gate.add_argument("--config", required=True, help="gate configuration (YAML, schemas/gate-config.schema.json)")
    gate.add_argument("--once", action="store_true", help="run one tick and exit")
    gate.add_argument("--for", dest="for_seconds", type=_seconds, metavar="SECONDS",
                      help="tick every tickSeconds until SECONDS have passed, then exit (what each CronWorkflow run does; "
                           "0: no end)")
    gate.add_argument("--dry-run", action="store_true", help="print the plan of one tick; change nothing")
    gate.add_argument("--metrics-port", type=port, metavar="PORT", help="serve the return path's histograms "
                      "(offhours_return_phase_seconds) at /metrics on this port while the gate runs")
    gate.set_defaults(func=_gate)
