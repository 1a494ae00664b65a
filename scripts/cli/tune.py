"""`offhours tune`: per-service policy knobs from a trace or Prometheus history, cross-validated over rolling folds of days."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import replay_source
from offhours.scripts.cli.replay_source import non_negative_int


def _tune(args: argparse.Namespace) -> int:
    import json

    import yaml

    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.simulate.fleet import FleetError, generated_jobs, load_jobs
    from offhours.scripts.simulate.trace import TraceError
    from offhours.scripts.simulate.tune import config_fragment, text_report, tune

    clash = replay_source.outputs_clash(args, "tune")
    if clash is not None:
        return clash
    traces = None
    try:
        if replay_source.from_history(args):
            mixed = replay_source.mixed_sources(args, "tune", "tunes on the history")
            if mixed is not None:
                return mixed
            read = replay_source.history_fleet(args, "tune")
            if isinstance(read, int):
                return read
            _, fleet, traces = read
            trace = traces[fleet.services[0].name]
            jobs = load_jobs(args.jobs) if args.jobs else generated_jobs(fleet)
        else:
            trace, fleet, jobs = replay_source.load_trace_fleet_jobs(args)
        known = {s.name for s in fleet.services}
        unknown = sorted({j.service for j in jobs} - known)
        if unknown:  # their jobs would be dropped, and the services tuned on a queue the file does not hold
            print(f"offhours tune: jobs: service(s) {', '.join(unknown)} not in the fleet ({', '.join(sorted(known))})",
                  file=sys.stderr)
            return 2
        tunings = tune(trace, fleet, jobs, args.max_delay_minutes, traces=traces, workers=args.workers)
    except (TraceError, FleetError) as err:
        print(f"offhours tune: {err}", file=sys.stderr)
        return 2
    print(text_report(tunings, args.max_delay_minutes, fleet.delay_target_seconds))
    fragment = config_fragment(tunings, fleet)
    parse_config(fragment)  # what is written is a valid gate config (schemas/gate-config.schema.json)
    text = yaml.safe_dump(fragment, sort_keys=False)
    if args.out:
        replay_source.write_whole(Path(args.out), text)
        print(f"gate config fragment (services) -> {args.out}")
    else:
        print(text)
    if args.json:
        body = [{"service": t.service, "withinBudget": t.within_budget, "refused": t.refused,
                 "folds": [{"fitDays": list(f.fit), "validationDays": list(f.validation), "precedent": r}
                           for f, r in zip(t.folds, t.fit_rises)],
                 "chosen": _candidate(t.chosen), "defaults": _candidate(t.defaults), "best": _candidate(t.best),
                 "largestRise": {"ratio": t.rise.ratio, "minute": t.rise.minute,
                                 "reactionMinutes": t.rise.reaction_minutes},
                 "candidates": [_candidate(c) for c in t.candidates]} for t in tunings]
        replay_source.write_whole(Path(args.json), json.dumps(body, indent=1) + "\n")
    # Exit 1 when no setting kept a service's budget on every fold, or the best was refused as worse than the
    # defaults somewhere: either way the history did not support a change.
    return 0 if all(t.within_budget and not t.refused for t in tunings) else 1


def _candidate(c: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {"knobs": c.knobs.fragment(), "folds": [{**asdict(f), "delay_with_precedent": f.delay_with_precedent}
                                                   for f in c.folds]}


def register(subparsers: Any) -> None:
    """Add `tune` to the `offhours` command."""
    tune = subparsers.add_parser("tune", help="sweep each service's headroom, look-ahead, hysteresis and "
                                 "stabilisation in the simulator; choose the best worst fold over rolling folds "
                                 "of days (never worse than the defaults); write the gate config's services")
    replay_source.add_trace_options(
        tune, trace_help="per-minute CSV, or a bundled trace: m-small (the default) or m-mid",
        fleet_help="fleet file (schemas/fleet.schema.json); default: the calibrated fleet",
        workers_help="processes for the replays (default: one per CPU)")
    tune.add_argument("--max-delay-minutes", type=non_negative_int, default=0, metavar="N",
                      help="minutes with queueing delay above the target allowed on each fold's validation days, "
                      "outside rises without precedent in its fitting days (default 0)")
    tune.add_argument("--out", metavar="FILE", help="write the gate config fragment (services) here (default: print it)")
    tune.add_argument("--json", metavar="FILE", help="write every candidate's scores as JSON here")
    replay_source.add_history_options(tune, "tune on your own history (instead of --trace and --fleet)")
    tune.set_defaults(func=_tune)
