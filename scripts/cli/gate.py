"""`offhours gate`: the gate's run loop (scripts/gate/loop.py), the same one the gate CronWorkflow's step runs."""

import argparse
from typing import Any


def _gate(args: argparse.Namespace) -> int:
    from offhours.scripts.gate.loop import run_from_config

    return run_from_config(args.config, args.for_seconds, args.dry_run, once=args.once)


def register(subparsers: Any) -> None:
    """Add `gate` to the `offhours` command."""
    gate = subparsers.add_parser("gate", help="lend idle serving replicas to parked research jobs; reclaim them on load")
    gate.add_argument("--config", required=True, help="gate configuration (YAML, schemas/gate-config.schema.json)")
    gate.add_argument("--once", action="store_true", help="run one tick and exit")
    gate.add_argument("--for", dest="for_seconds", type=float, metavar="SECONDS",
                      help="tick every tickSeconds until SECONDS have passed, then exit (what each CronWorkflow run does)")
    gate.add_argument("--dry-run", action="store_true", help="print the plan of one tick; change nothing")
    gate.set_defaults(func=_gate)
