"""The options every verb that reads Prometheus history shares: where, which services, which time range.

Not a verb itself: `trace export`, `simulate --prometheus`, `calibrate` and `tune --prometheus` add these
options and read the history through `read`. The services and their label come from the gate config.
"""

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.policy.config import ConfigError, GateConfig

DAY = 86400.0
_SPAN = re.compile(r"([1-9][0-9]{0,4})([dhm])")
_UNIT = {"d": DAY, "h": 3600.0, "m": 60.0}
MAX_DAYS = 92  # a quarter: the history of one service at a minute's step stays a few MB
MAX_STEPS = 200_000  # about 19 weeks at a minute: beyond it a history is many range queries per counter


def add_options(parser: "argparse._ActionsContainer", required: bool = True) -> None:
    """Add --prometheus, --config, --since / --start / --end and --service to a verb's parser."""
    parser.add_argument("--prometheus", metavar="URL", required=False,
                        help="Prometheus to read vLLM's counters from (default: the gate config's metrics.prometheus.url)")
    parser.add_argument("--config", metavar="FILE", required=required,
                        help="gate config: the services (and their Prometheus label and selector) to read")
    parser.add_argument("--since", metavar="SPAN", help="how far back, e.g. 14d, 36h (default 14d); the range "
                        "starts at the first UTC midnight in it, so minute 0 is a midnight")
    parser.add_argument("--start", metavar="TIME", help="range start, ISO 8601 (e.g. 2026-11-01T00:00Z), a whole step")
    parser.add_argument("--end", metavar="TIME", help="range end, ISO 8601, a whole step (default: now)")
    parser.add_argument("--service", action="append", metavar="NAME", help="only this service (repeatable)")


@dataclass(frozen=True)
class Range:
    """A time range on a grid of whole minutes."""

    start: float
    steps: int
    step: float = 60.0


def _instant(text: str, what: str, step: float = 60.0) -> float:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--{what}: {text!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    t = moment.timestamp()
    if t % step:
        raise ConfigError(f"--{what}: {text} is not a whole {'minute' if step == 60 else f'step of {step:g} s'}")
    return t


def time_range(args: argparse.Namespace, now: float | None = None, step: float = 60.0) -> Range:
    """Resolve --since / --start / --end into a grid; one clear error for a range that cannot be read."""
    now = time.time() if now is None else now
    end = _instant(args.end, "end", step) if args.end else math.floor(now / step) * step
    if args.start and args.since:
        raise ConfigError("--start and --since: give one of them")
    if args.start:
        start = _instant(args.start, "start", step)
    else:
        match = _SPAN.fullmatch(args.since or "14d")
        if not match:
            raise ConfigError(f"--since: {args.since!r} is not a span such as 14d, 36h or 90m")
        start = math.ceil((end - int(match.group(1)) * _UNIT[match.group(2)]) / DAY) * DAY
    if end > now + 60:
        raise ConfigError("--end: the range ends in the future")
    if end - start < step:
        raise ConfigError("the range holds no whole step (with --since, no UTC midnight falls inside it: ask for "
                          "more, or give --start)")
    if end - start > MAX_DAYS * DAY:
        raise ConfigError(f"the range is longer than {MAX_DAYS} days")
    steps = int((end - start) // step)
    if steps > MAX_STEPS:
        raise ConfigError(f"the range holds {steps:,} steps of {step:g} s, more than {MAX_STEPS:,}: "
                          "ask for less or a longer --step")
    return Range(start, steps, step)


def load(args: argparse.Namespace) -> tuple[GateConfig, str, list[str]]:
    """Return the gate config, the Prometheus URL and the services asked for (all the config's by default)."""
    from offhours.scripts.config.loader import load_config

    if not args.config:
        raise ConfigError("--config: required (the gate config names the services to read)")
    config = load_config(args.config)
    url = args.prometheus or config.metrics.prometheus_url
    if not url:
        raise ConfigError("--prometheus: required (the gate config names no metrics.prometheus.url)")
    known = [p.name for p in config.services]
    names = args.service or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(f"--service: {', '.join(unknown)} not in the gate config ({', '.join(known)})")
    return config, url, list(dict.fromkeys(names))


def read(args: argparse.Namespace, saturation: bool = False, step: float = 60.0) -> tuple[GateConfig, Any]:
    """Read the asked services' history; print each warning on stderr. Returns (config, History)."""
    from offhours.scripts.history.read import read_history

    config, url, names = load(args)
    span = time_range(args, step=step)
    history = read_history(url, config.metrics.service_label, names, span.start, span.steps, span.step,
                           config.metrics.extra_selector, timeout=max(30.0, config.metrics.prometheus_timeout_seconds),
                           saturation=saturation)
    from offhours.scripts.cli.text import printable

    for warning in history.warnings:
        print(printable(warning), file=sys.stderr)  # it names series by labels any scraped target can set
    return config, history
