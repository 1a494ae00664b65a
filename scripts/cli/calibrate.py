"""`offhours calibrate`: each service's capacity per replica, measured in the minutes its replicas were saturated.

With `--gpu-check FILE` (bench/gpu/gpu_check.py's JSON) it writes the fleet file's return-path times instead:
the cold start, the level-1 wake and the victim job's grace, measured on a GPU machine. With `--return-path`
it reads the gate's own return-path histograms (offhours_return_phase_seconds) from Prometheus and writes
the fleet's measured victim exit and cold start into the fleet file, so `simulate` and `tune` model them.
"""

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import history_source, replay_source
from offhours.scripts.cli.replay_source import positive_int

_STEP = re.compile(r"([1-9][0-9]{0,3})(s|m)")
KEYS = {"requests": "requestsPerSecond", "prompt_tokens": "promptTokensPerSecond",
        "generation_tokens": "generationTokensPerSecond"}


def _step(text: str) -> float:
    match = _STEP.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a step such as 60s or 1m")
    return float(match.group(1)) * (60.0 if match.group(2) == "m" else 1.0)


def _from_gpu_check(args: argparse.Namespace) -> int:
    """Write the fleet file with the start, wake and grace times the GPU check measured; one line for bad input."""
    from offhours.scripts.inputs.errors import InputError
    from offhours.scripts.inputs.jsondoc import load_json
    from offhours.scripts.inputs.limits import FLEET_BYTES
    from offhours.scripts.inputs.text import read_bytes
    from offhours.scripts.inputs.yamldoc import read_yaml
    from offhours.scripts.simulate.fleet import FleetError, parse_fleet
    from offhours.scripts.simulate.gpu_times import GpuCheckError, return_times

    if not args.fleet:
        print("offhours calibrate: --gpu-check: give --fleet FILE, the fleet file to write the times into",
              file=sys.stderr)
        return 2
    try:
        doc = load_json(read_bytes(args.gpu_check, FLEET_BYTES), f"--gpu-check {args.gpu_check}")
    except OSError as err:
        print(f"offhours calibrate: --gpu-check {args.gpu_check}: cannot read: {err.strerror}", file=sys.stderr)
        return 2
    except InputError as err:
        print(f"offhours calibrate: {err}", file=sys.stderr)
        return 2
    try:
        raw = read_yaml(args.fleet, FLEET_BYTES)
        parse_fleet(raw, f"fleet {args.fleet}")
        times = return_times(doc, args.model_gib)
    except OSError as err:
        print(f"offhours calibrate: --fleet {args.fleet}: cannot read: {err.strerror}", file=sys.stderr)
        return 2
    except (InputError, FleetError) as err:
        print(f"offhours calibrate: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except GpuCheckError as err:
        print(f"offhours calibrate: --gpu-check {args.gpu_check}: {err}", file=sys.stderr)
        return 2
    try:
        return _write_fleet(args, raw, times)
    except FleetError as err:
        print(f"offhours calibrate: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except GpuCheckError as err:
        print(f"offhours calibrate: --gpu-check {args.gpu_check}: {err}", file=sys.stderr)
        return 2


def _write_fleet(args: argparse.Namespace, raw: dict[str, Any], times: Any) -> int:
    """Print what changed and write the fleet file (or print it); the document is checked before it is written."""
    import yaml

    from offhours.scripts.simulate.fleet import parse_fleet
    from offhours.scripts.simulate.gpu_times import fleet_document

    updated = fleet_document(raw, times)
    parse_fleet(updated, "the fleet written")  # what is written is a valid fleet file
    for key in ("coldStartMinutes", "wakeMinutes", "graceMinutes"):
        before, after = raw.get(key), updated.get(key)
        shown = "-" if after is None else f"{after:g}"
        print(f"{key:17} {shown:>8}  (was {'default' if before is None else format(before, 'g')}): {times.notes[key]}")
    text = yaml.safe_dump(updated, sort_keys=False)
    if args.out:
        replay_source.write_whole(Path(args.out), text)
        print(f"fleet file with the measured return path -> {args.out}")
    else:
        print(text, end="")
    return 0


def _from_return_path(args: argparse.Namespace) -> int:
    """Write the fleet file with the victim exit and cold start the gate measured (its histograms in Prometheus)."""
    from offhours.scripts.history.return_path import phase_buckets
    from offhours.scripts.inputs.errors import InputError
    from offhours.scripts.inputs.limits import FLEET_BYTES
    from offhours.scripts.inputs.yamldoc import read_yaml
    from offhours.scripts.metrics.prometheus import PrometheusError
    from offhours.scripts.policy.config import ConfigError
    from offhours.scripts.simulate.fleet import FleetError, parse_fleet
    from offhours.scripts.simulate.gpu_times import GpuCheckError
    from offhours.scripts.simulate.return_measured import measured_return

    if not args.fleet:
        print("offhours calibrate: --return-path: give --fleet FILE, the fleet file to write the times into",
              file=sys.stderr)
        return 2
    try:
        _, url, names = history_source.load(args)
        span = history_source.time_range(args, step=1.0)  # whole seconds: the gate's reclaims are not minutes
        raw = read_yaml(args.fleet, FLEET_BYTES)
        parse_fleet(raw, f"fleet {args.fleet}")
    except OSError as err:
        print(f"offhours calibrate: --fleet {args.fleet}: cannot read: {err.strerror}", file=sys.stderr)
        return 2
    except (ConfigError, InputError, FleetError) as err:
        print(f"offhours calibrate: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    end = span.start + span.steps * span.step
    try:
        phases = phase_buckets(url, names, end, end - span.start)
    except PrometheusError as err:
        print(f"offhours calibrate: {err}", file=sys.stderr)
        return 1
    try:
        times = measured_return(phases, args.quantile / 100.0, args.min_reclaims)
        return _write_fleet(args, raw, times)
    except GpuCheckError as err:
        print(f"offhours calibrate: --return-path: {err}", file=sys.stderr)
        return 1
    except FleetError as err:
        print(f"offhours calibrate: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2


def _calibrate(args: argparse.Namespace) -> int:
    import yaml

    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.history.calibrate import estimate

    clash = replay_source.outputs_clash(args, "calibrate")
    if clash is not None:
        return clash
    if args.gpu_check and args.return_path:
        print("offhours calibrate: --gpu-check and --return-path: give one of them", file=sys.stderr)
        return 2
    if args.gpu_check:
        return _from_gpu_check(args)
    if args.return_path:
        return _from_return_path(args)
    read = replay_source.read_history(args, "calibrate", saturation=True, step=args.step)
    if isinstance(read, int):
        return read
    config, history = read
    services: dict[str, Any] = {}
    print(f"{'service':16} {'requests/s':>11} {'prompt tok/s':>13} {'gen tok/s':>11}  evidence")
    for policy in config.services:
        if policy.name not in history.services:
            continue
        est = estimate(history.services[policy.name], history.step, args.min_steps)
        cap = policy.capacity
        configured = {"requests": cap.requests_per_second, "prompt_tokens": cap.prompt_tokens_per_second,
                      "generation_tokens": cap.generation_tokens_per_second}
        if est.rates is None:
            cells = [f"{'(' + format(v, '.4g') + ')' if v else '-':>11}" for v in configured.values()]
            chosen = {KEYS[k]: v for k, v in configured.items() if v}
        else:
            cells = [f"{est.rates[k]:>11.4g}" for k in KEYS]
            chosen = {KEYS[k]: round(v, 4) for k, v in est.rates.items() if v > 0}
        print(f"{policy.name:16} {cells[0]} {cells[1]:>13} {cells[2]}  {est.note}")
        services[policy.name] = {"capacity": chosen, "gpusPerReplica": policy.gpus_per_replica}
    if not services:
        print("offhours calibrate: no service of the gate config in the history", file=sys.stderr)
        return 1
    fragment = {"services": services}
    parse_config(fragment)  # what is written is a valid gate config (schemas/gate-config.schema.json)
    print("(n): configured value, kept for want of evidence; capacity per replica while requests waited")
    if args.out:
        replay_source.write_whole(Path(args.out), yaml.safe_dump(fragment, sort_keys=False))
        print(f"gate config fragment (services' capacity) -> {args.out}")
    return 0


def register(subparsers: Any) -> None:
    """Add `calibrate` to the `offhours` command."""
    cal = subparsers.add_parser("calibrate", help="measure each service's capacity per replica from its history: "
                                "the throughput of a replica in the minutes requests waited for it; or, with "
                                "--gpu-check, write a GPU check's start, wake and grace times into a fleet file")
    history_source.add_options(cal, required=False)  # --config: required unless --gpu-check (checked when read)
    cal.add_argument("--step", type=_step, default=60.0, help="the history's step (default 60s)")
    cal.add_argument("--min-steps", type=positive_int, default=10, metavar="N",
                     help="saturated pod-steps needed for an estimate (default 10); fewer: the configured value stands")
    cal.add_argument("--out", metavar="FILE", help="write the gate config fragment (services' capacity) here; with "
                     "--gpu-check, the fleet file")
    cal.add_argument("--gpu-check", metavar="FILE", help="bench/gpu/gpu_check.py's JSON: write its measured cold start, "
                     "level-1 wake and job grace into --fleet's file (no Prometheus read)")
    cal.add_argument("--fleet", metavar="FILE", help="with --gpu-check or --return-path: the fleet file "
                     "(schemas/fleet.schema.json) to write the times into")
    cal.add_argument("--return-path", action="store_true", help="read the gate's return-path histograms "
                     "(offhours_return_phase_seconds, its --metrics-port) from Prometheus over the range and write "
                     "the measured victim exit (graceMinutes) and cold start (coldStartMinutes) into --fleet's file")
    cal.add_argument("--quantile", type=float, default=95.0, metavar="P", choices=[50.0, 90.0, 95.0, 99.0],
                     help="with --return-path: the percentile written (50, 90, 95 or 99; default 95)")
    cal.add_argument("--min-reclaims", type=positive_int, default=5, metavar="N", help="with --return-path: "
                     "served reclaims needed in the range (default 5); fewer: the configured times stand")
    cal.add_argument("--model-gib", type=float, metavar="GIB", help="with --gpu-check: the served model's weights "
                     "in GiB (default: the size the check loaded)")
    cal.set_defaults(func=_calibrate)
