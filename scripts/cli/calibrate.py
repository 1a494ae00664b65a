"""`offhours calibrate`: each service's capacity per replica, measured in the minutes its replicas were saturated."""

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


def _calibrate(args: argparse.Namespace) -> int:
    import yaml

    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.history.calibrate import estimate

    clash = replay_source.outputs_clash(args, "calibrate")
    if clash is not None:
        return clash
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
                                "the throughput of a replica in the minutes requests waited for it")
    history_source.add_options(cal)
    cal.add_argument("--step", type=_step, default=60.0, help="the history's step (default 60s)")
    cal.add_argument("--min-steps", type=positive_int, default=10, metavar="N",
                     help="saturated pod-steps needed for an estimate (default 10); fewer: the configured value stands")
    cal.add_argument("--out", metavar="FILE", help="write the gate config fragment (services' capacity) here")
    cal.set_defaults(func=_calibrate)
