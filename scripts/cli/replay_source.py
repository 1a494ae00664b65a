"""What the verbs that replay traffic share: the trace, fleet and jobs options, the history's fleet, the outputs.

Not a verb itself: `simulate` and `tune` replay either a trace (`--trace`, `--fleet`, `--jobs`) or a
fleet's Prometheus history (`history_source`), and `tune`, `calibrate` and `trace export` write
what they produce whole or not at all.
"""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import history_source


def positive_int(text: str) -> int:
    """Parse a whole number of 1 or more (argparse type)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def non_negative_int(text: str) -> int:
    """Parse a whole number of 0 or more (argparse type)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is below 0")
    return value


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def add_trace_options(parser: "argparse._ActionsContainer", trace_help: str, fleet_help: str, workers_help: str) -> None:
    """Add --trace, --fleet, --jobs and --workers to a replaying verb's parser."""
    parser.add_argument("--trace", help=trace_help)
    parser.add_argument("--fleet", help=fleet_help)
    parser.add_argument("--jobs", help="research jobs file (schemas/jobs.schema.json); default: a generated queue")
    parser.add_argument("--workers", type=positive_int, help=workers_help)


def add_history_options(parser: Any, title: str) -> "argparse._ArgumentGroup":
    """Add the Prometheus history options (`history_source`) as their own group; returns it for more."""
    group = parser.add_argument_group(title)
    history_source.add_options(group, required=False)
    return group


def from_history(args: argparse.Namespace) -> bool:
    """Whether the verb replays the Prometheus history rather than a trace."""
    return bool(args.prometheus or args.config)


def mixed_sources(args: argparse.Namespace, verb: str, what: str) -> int | None:
    """Exit 2 (with the one line) when a history replay is also given a trace or fleet; None when the options agree."""
    if args.trace or args.fleet:
        print(f"offhours {verb}: --prometheus {what}: give no --trace or --fleet", file=sys.stderr)
        return 2
    return None


def load_trace_fleet_jobs(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """Return (trace, fleet, jobs) from --trace, --fleet and --jobs; TraceError or FleetError for bad input."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs, load_fleet, load_jobs
    from offhours.scripts.simulate.trace import load_trace

    trace = load_trace(args.trace)
    fleet = load_fleet(args.fleet) if args.fleet else default_fleet(trace)
    jobs = load_jobs(args.jobs) if args.jobs else generated_jobs(fleet)
    return trace, fleet, jobs


def history_fleet(args: argparse.Namespace, verb: str,
                  baselines: dict[str, int] | None = None) -> tuple[Any, Any, dict[str, Any]] | int:
    """Read the history and build the fleet it replays: (config, fleet, traces), or the exit code after its one line.

    A Prometheus that cannot answer is exit 1; a service without a complete history is a warning and
    left out, and none left is exit 1.
    """
    from offhours.scripts.simulate.history import fleet_from_history

    history_read = read_history(args, verb)
    if isinstance(history_read, int):
        return history_read
    config, history = history_read
    fleet, traces, notes = fleet_from_history(config, history, baselines)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if not fleet.services:
        print(f"offhours {verb}: no service of the gate config has a complete history in the range", file=sys.stderr)
        return 1
    return config, fleet, traces


def read_history(args: argparse.Namespace, verb: str, **options: Any) -> tuple[Any, Any] | int:
    """`history_source.read`, with a Prometheus that cannot answer as exit 1 after its one line."""
    from offhours.scripts.metrics.prometheus import PrometheusError

    try:
        return history_source.read(args, **options)
    except PrometheusError as err:
        print(f"offhours {verb}: {err}", file=sys.stderr)
        return 1


def outputs_clash(args: argparse.Namespace, verb: str) -> int | None:
    """Exit 2 (with the one line) when an output option names a folder, an input or another output; else None.

    Checked before anything is read: a verb that replays for minutes must not fail only then, and
    must never write its fragment over the gate config (or trace) it read.
    """
    outputs = [(f"--{name}", Path(value)) for name in ("out", "json", "plot")
               if isinstance(value := getattr(args, name, None), str) and value]
    inputs = [(f"--{name}", Path(value)) for name in ("config", "trace", "fleet", "jobs")
              if isinstance(value := getattr(args, name, None), str) and value and Path(value).exists()]
    for k, (option, path) in enumerate(outputs):
        if path.is_dir():
            print(f"offhours {verb}: {option} {path} is a folder, not a file", file=sys.stderr)
            return 2
        for other, source in inputs + outputs[:k]:
            if _same(path, source):
                print(f"offhours {verb}: {option} {path} is also {other}: it would be overwritten", file=sys.stderr)
                return 2
    return None


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return a.samefile(b)
    return a.resolve() == b.resolve()


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` through a sibling `.partial` file: a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)
