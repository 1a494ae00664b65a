"""`offhours gate`: the gate's run loop (scripts/gate/loop.py), the same one the gate CronWorkflow's step runs."""

import argparse
import math
from typing import Any


def _seconds(text: str) -> float:
    """Parse a run's length: a finite number of seconds, 0 or more (0: no end) (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    # NaN compares false with any deadline and inf never comes: either ran for ever; below 0 is no length.
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds of 0 or more")
    return value


def _gate(args: argparse.Namespace) -> int:
    from offhours.scripts.gate.loop import run_from_config

    return run_from_config(args.config, args.for_seconds, args.dry_run, once=args.once)


def register(subparsers: Any) -> None:
    """Add `gate` to the `offhours` command."""
    gate = subparsers.add_parser("gate", help="lend idle serving replicas to parked research jobs; reclaim them on load")
    gate.add_argument("--config", required=True, help="gate configuration (YAML, schemas/gate-config.schema.json)")
    gate.add_argument("--once", action="store_true", help="run one tick and exit")
    gate.add_argument("--for", dest="for_seconds", type=_seconds, metavar="SECONDS",
                      help="tick every tickSeconds until SECONDS have passed, then exit (what each CronWorkflow run does; "
                           "0: no end)")
    gate.add_argument("--dry-run", action="store_true", help="print the plan of one tick; change nothing")
    gate.set_defaults(func=_gate)
