"""`offhours trace export`: each service's per-minute trace from Prometheus, as the CSV `simulate --trace` reads."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.cli import history_source, replay_source


def _export(args: argparse.Namespace) -> int:
    from offhours.scripts.simulate.history import traces_from_history
    from offhours.scripts.simulate.trace import format_trace

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"offhours trace export: --out {out} is not a directory", file=sys.stderr)
        return 2
    read = replay_source.read_history(args, "trace export")
    if isinstance(read, int):
        return read
    _, history = read
    traces = traces_from_history(history)
    if not traces:
        print("offhours trace export: no service has all three counters in the range: nothing written", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for name, trace in traces.items():
        path = out / f"{name}.csv"
        replay_source.write_whole(path, format_trace(trace))
        print(f"{name}: {trace.minutes} minutes -> {path}")
    return 0


def register(subparsers: Any) -> None:
    """Add `trace` (with `export`) to the `offhours` command."""
    trace = subparsers.add_parser("trace", help="per-minute traffic traces from Prometheus history")
    verbs = trace.add_subparsers(dest="trace_command", required=True)
    export = verbs.add_parser("export", help="write each service's per-minute CSV (minute,requests,input_tokens,"
                              "output_tokens; requests to 0.01, tokens whole) from vLLM's counters in Prometheus")
    history_source.add_options(export)
    export.add_argument("--out", required=True, metavar="DIR", help="folder for <service>.csv")
    export.set_defaults(func=_export)
