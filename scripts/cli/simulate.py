"""`offhours simulate`: a traffic trace replayed through the gate's policy, against the fixed nightly window and an oracle."""

import argparse
import sys
from pathlib import Path
from typing import Any


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _simulate(args: argparse.Namespace) -> int:
    import dataclasses

    from offhours.scripts.simulate.fleet import FleetError, default_fleet, generated_jobs, load_fleet, load_jobs
    from offhours.scripts.simulate.report import simulate, text_table, write_json, write_plot
    from offhours.scripts.simulate.trace import TraceError, load_trace

    try:
        trace = load_trace(args.trace)
        fleet = load_fleet(args.fleet) if args.fleet else default_fleet(trace)
        jobs = load_jobs(args.jobs) if args.jobs else generated_jobs(fleet)
    except (TraceError, FleetError) as err:
        print(err, file=sys.stderr)
        return 2
    known = {s.name for s in fleet.services}
    unknown = sorted({j.service for j in jobs} - known)
    if unknown:
        print(f"jobs: service(s) {', '.join(unknown)} not in the fleet ({', '.join(sorted(known))})", file=sys.stderr)
        return 2
    if args.price is not None:
        fleet = dataclasses.replace(fleet, gpu_hour_price=args.price)
    for out in filter(None, (args.json, args.plot)):  # e.g. build/, which git ignores
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    result = simulate(trace, fleet, jobs, workers=args.workers)
    print(text_table(result, fleet.gpu_hour_price))
    if args.json:
        write_json(result, Path(args.json))
    if args.plot:
        write_plot(result, Path(args.plot))
    return 0


def register(subparsers: Any) -> None:
    """Add `simulate` to the `offhours` command."""
    sim = subparsers.add_parser("simulate", help="replay a traffic trace through the gate's policy; compare with the "
                                "fixed nightly window and an oracle (default: the bundled 14-day trace)")
    sim.add_argument("--trace", help="per-minute CSV: minute,requests,input_tokens,output_tokens (default: bundled)")
    sim.add_argument("--fleet", help="fleet file (YAML/JSON, schemas/fleet.schema.json); default: calibrated fleet")
    sim.add_argument("--jobs", help="research jobs file (schemas/jobs.schema.json); default: a generated queue")
    sim.add_argument("--price", type=float, help="GPU-hour price for the saving (default: the fleet's, 2.0)")
    sim.add_argument("--json", help="write the reports as JSON here")
    sim.add_argument("--plot", help="write a PNG of load, capacity in service and GPUs lent here")
    sim.add_argument("--workers", type=_positive_int, help="processes for the services' replays (default: one per "
                     "CPU for 8 services or more, else 1; the result is the same for any number)")
    sim.set_defaults(func=_simulate)
