"""`offhours tune`: per-service policy knobs from a trace or Prometheus history, fit on some days, checked on the rest."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import history_source


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def _tune(args: argparse.Namespace) -> int:
    import json

    import yaml

    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.metrics.prometheus import PrometheusError
    from offhours.scripts.simulate.fleet import FleetError, default_fleet, generated_jobs, load_fleet, load_jobs
    from offhours.scripts.simulate.history import fleet_from_history
    from offhours.scripts.simulate.trace import TraceError, load_trace
    from offhours.scripts.simulate.tune import config_fragment, text_report, tune

    traces = None
    try:
        if args.prometheus or args.config:
            if args.trace or args.fleet:
                print("offhours tune: --prometheus tunes on the history: give no --trace or --fleet", file=sys.stderr)
                return 2
            config, history = history_source.read(args)
            fleet, traces, notes = fleet_from_history(config, history)
            for note in notes:
                print(f"warning: {note}", file=sys.stderr)
            if not fleet.services:
                print("offhours tune: no service of the gate config has a complete history in the range", file=sys.stderr)
                return 1
            trace = traces[fleet.services[0].name]
        else:
            trace = load_trace(args.trace)
            fleet = load_fleet(args.fleet) if args.fleet else default_fleet(trace)
        jobs = load_jobs(args.jobs) if args.jobs else generated_jobs(fleet)
        tunings = tune(trace, fleet, jobs, args.max_delay_minutes, traces=traces, workers=args.workers)
    except (TraceError, FleetError) as err:
        print(f"offhours tune: {err}", file=sys.stderr)
        return 2
    except PrometheusError as err:
        print(f"offhours tune: {err}", file=sys.stderr)
        return 1
    print(text_report(tunings, args.max_delay_minutes, fleet.delay_target_seconds))
    fragment = config_fragment(tunings, fleet)
    parse_config(fragment)  # what is written is a valid gate config (schemas/gate-config.schema.json)
    text = yaml.safe_dump(fragment, sort_keys=False)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        partial.write_text(text)
        partial.replace(out)
        print(f"gate config fragment (services) -> {out}")
    else:
        print(text)
    if args.json:
        body = [{"service": t.service, "withinBudget": t.within_budget, "fitDays": t.fit_days,
                 "validationDays": t.validation_days, "chosen": _candidate(t.chosen),
                 "largestRise": {"ratio": t.rise.ratio, "minute": t.rise.minute,
                                 "reactionMinutes": t.rise.reaction_minutes},
                 "candidates": [_candidate(c) for c in t.candidates]} for t in tunings]
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(body, indent=1) + "\n")
    # Exit 1 when a service's validation days went over the budget: the history did not support the choice.
    return 0 if all(t.chosen.validation.delay_minutes <= args.max_delay_minutes for t in tunings) else 1


def _candidate(c: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {"knobs": c.knobs.fragment(), "fit": asdict(c.fit), "validation": asdict(c.validation)}


def register(subparsers: Any) -> None:
    """Add `tune` to the `offhours` command."""
    from offhours.scripts.cli.simulate import _positive_int

    tune = subparsers.add_parser("tune", help="sweep each service's headroom, look-ahead, hysteresis and "
                                 "stabilisation in the simulator; choose on the first two thirds of the days, "
                                 "check on the last third; write the gate config's services")
    tune.add_argument("--trace", help="per-minute CSV, or a bundled trace: m-small (the default) or m-mid")
    tune.add_argument("--fleet", help="fleet file (schemas/fleet.schema.json); default: the calibrated fleet")
    tune.add_argument("--jobs", help="research jobs file (schemas/jobs.schema.json); default: a generated queue")
    tune.add_argument("--max-delay-minutes", type=_non_negative, default=0, metavar="N",
                      help="minutes with queueing delay above the target allowed on the fitting days (default 0)")
    tune.add_argument("--out", metavar="FILE", help="write the gate config fragment (services) here (default: print it)")
    tune.add_argument("--json", metavar="FILE", help="write every candidate's scores as JSON here")
    tune.add_argument("--workers", type=_positive_int, help="processes for the replays (default: one per CPU)")
    history = tune.add_argument_group("tune on your own history (instead of --trace and --fleet)")
    history_source.add_options(history, required=False)
    tune.set_defaults(func=_tune)
