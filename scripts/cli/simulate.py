"""`offhours simulate`: a traffic trace replayed through the gate's policy, against the fixed nightly window and an oracle."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import history_source


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _replicas(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not SERVICE=REPLICAS")
    return name, _positive_int(count)


def _from_prometheus(args: argparse.Namespace) -> int:
    from offhours.scripts.metrics.prometheus import PrometheusError
    from offhours.scripts.simulate.fleet import generated_jobs
    from offhours.scripts.simulate.history import fleet_from_history
    from offhours.scripts.simulate.report import simulate, text_table, write_json

    if args.trace or args.fleet:
        print("offhours simulate: --prometheus replays the history: give no --trace or --fleet", file=sys.stderr)
        return 2
    try:
        config, history = history_source.read(args)
    except PrometheusError as err:
        print(f"offhours simulate: {err}", file=sys.stderr)
        return 1
    fleet, traces, notes = fleet_from_history(config, history, dict(args.replicas or ()))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if not fleet.services:
        print("offhours simulate: no service of the gate config has a complete history in the range", file=sys.stderr)
        return 1
    for spec in fleet.services:
        print(f"{spec.name}: {spec.baseline} replicas x {spec.policy.gpus_per_replica} GPUs, "
              f"{traces[spec.name].minutes} minutes of history")
    first = traces[fleet.services[0].name]
    result = simulate(first, fleet, generated_jobs(fleet), modes=("gate", "reference", "oracle"),
                      workers=args.workers, traces=traces)
    result.trace = f"Prometheus history of {len(traces)} service(s)"
    print(text_table(result, fleet.gpu_hour_price if args.price is None else args.price))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_json(result, Path(args.json))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    import dataclasses

    if args.prometheus or args.config:
        return _from_prometheus(args)

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
    sim.add_argument("--trace", help="per-minute CSV: minute,requests,input_tokens,output_tokens, or a bundled "
                     "trace: m-small (the default) or m-mid")
    sim.add_argument("--fleet", help="fleet file (YAML/JSON, schemas/fleet.schema.json); default: calibrated fleet")
    sim.add_argument("--jobs", help="research jobs file (schemas/jobs.schema.json); default: a generated queue")
    sim.add_argument("--price", type=float, help="GPU-hour price for the saving (default: the fleet's, 2.0)")
    sim.add_argument("--json", help="write the reports as JSON here")
    sim.add_argument("--plot", help="write a PNG of load, capacity in service and GPUs lent here")
    sim.add_argument("--workers", type=_positive_int, help="processes for the services' replays (default: one per "
                     "CPU for 8 services or more, else 1; the result is the same for any number)")
    history = sim.add_argument_group("replay your own history (instead of --trace and --fleet)")
    history_source.add_options(history, required=False)
    history.add_argument("--replicas", type=_replicas, action="append", metavar="SERVICE=N",
                         help="a service's replicas when nothing is lent (default: the most pods seen in a minute)")
    sim.set_defaults(func=_simulate)
