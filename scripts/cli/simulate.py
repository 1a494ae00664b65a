"""`offhours simulate`: a traffic trace replayed through the gate's policy, against the fixed nightly window and an oracle."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import replay_source
from offhours.scripts.cli.argtypes import finite_non_negative
from offhours.scripts.cli.replay_source import positive_int


def _price(text: str) -> float:
    """Parse a GPU-hour price (argparse type)."""
    return finite_non_negative(text, "a price")


def _replicas(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not SERVICE=REPLICAS")
    return name, positive_int(count)


def _from_prometheus(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.history_source import load
    from offhours.scripts.simulate.fleet import FleetError, generated_jobs, load_jobs
    from offhours.scripts.simulate.report import simulate, text_table, write_json, write_plot

    mixed = replay_source.mixed_sources(args, "simulate", "replays the history")
    if mixed is not None:
        return mixed
    replicas = dict(args.replicas or ())
    _, _, names = load(args)
    # A name no replayed service has would be dropped, and the table read as the answer for it.
    unknown = sorted(set(replicas) - set(names))
    if unknown:
        print(f"offhours simulate: --replicas: {', '.join(unknown)} not among the services replayed "
              f"({', '.join(names)})", file=sys.stderr)
        return 2
    try:
        given = load_jobs(args.jobs) if args.jobs else None
    except FleetError as err:
        print(err, file=sys.stderr)
        return 2
    unknown = sorted({j.service for j in given or ()} - set(names))
    if unknown:
        print(f"jobs: service(s) {', '.join(unknown)} not among the services replayed ({', '.join(names)})",
              file=sys.stderr)
        return 2
    read = replay_source.history_fleet(args, "simulate", replicas)
    if isinstance(read, int):
        return read
    _, fleet, traces = read
    for spec in fleet.services:
        print(f"{spec.name}: {spec.baseline} replicas x {spec.policy.gpus_per_replica} GPUs, "
              f"{traces[spec.name].minutes} minutes of history")
    first = traces[fleet.services[0].name]
    jobs = generated_jobs(fleet) if given is None else [j for j in given if j.service in traces]
    result = simulate(first, fleet, jobs, modes=("gate", "reference", "oracle"), workers=args.workers, traces=traces)
    result.trace = f"Prometheus history of {len(traces)} service(s)"
    print(text_table(result, fleet.gpu_hour_price if args.price is None else args.price))
    for out in filter(None, (args.json, args.plot)):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    if args.json:
        write_json(result, Path(args.json))
    if args.plot:
        write_plot(result, Path(args.plot))
    return 0


def _simulate(args: argparse.Namespace) -> int:
    import dataclasses

    clash = replay_source.outputs_clash(args, "simulate")
    if clash is not None:
        return clash
    if replay_source.from_history(args):
        return _from_prometheus(args)
    if args.replicas:
        print("offhours simulate: --replicas is for a history replay (--config); a trace replay's replicas are "
              "its fleet file's", file=sys.stderr)
        return 2

    from offhours.scripts.simulate.fleet import FleetError
    from offhours.scripts.simulate.report import simulate, text_table, write_json, write_plot
    from offhours.scripts.simulate.trace import TraceError

    try:
        trace, fleet, jobs = replay_source.load_trace_fleet_jobs(args)
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
    replay_source.add_trace_options(
        sim, trace_help="per-minute CSV: minute,requests,input_tokens,output_tokens, or a bundled trace: m-small "
        "(the default) or m-mid",
        fleet_help="fleet file (YAML/JSON, schemas/fleet.schema.json); default: calibrated fleet",
        workers_help="processes for the services' replays (default: one per CPU for 8 services or more, else 1; "
        "the result is the same for any number)")
    sim.add_argument("--price", type=_price, help="GPU-hour price for the saving (default: the fleet's, 2.0)")
    sim.add_argument("--json", help="write the reports as JSON here")
    sim.add_argument("--plot", help="write a PNG of load, capacity in service and GPUs lent here")
    history = replay_source.add_history_options(sim, "replay your own history (instead of --trace and --fleet)")
    history.add_argument("--replicas", type=_replicas, action="append", metavar="SERVICE=N",
                         help="a service's replicas when nothing is lent (default: the most pods serving throughout a minute)")
    sim.set_defaults(func=_simulate)
