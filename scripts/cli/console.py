"""`offhours console`: the web console and `/metrics`, over the read model."""

import argparse
import sys
from typing import Any


def _console(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.jobs import CommandError, _reader, config_gpus
    from offhours.scripts.console.app import create_app
    from offhours.scripts.console.source import PoolSource

    try:
        reader = _reader(args)
        gpus = config_gpus(args)
    except CommandError as err:
        print(f"console: {err}", file=sys.stderr)
        return 1
    app = create_app(PoolSource(reader, interval=args.interval), gpus)
    print(f"offhours console on http://{args.host}:{args.port}/ (serving {reader.serving_namespace}, "
          f"research {reader.research_namespace})", file=sys.stderr)
    from werkzeug.serving import run_simple

    run_simple(args.host, args.port, app, threaded=True)
    return 0


def register(subparsers: Any) -> None:
    """Add `console` to the `offhours` command."""
    from offhours.scripts.cli.jobs import _common

    console = subparsers.add_parser("console", help="web console of the pool, the queue, jobs and usage; /metrics")
    _common(console)
    console.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a pod)")
    console.add_argument("--interval", type=float, default=15.0, help="seconds between reads of the cluster (default 15)")
    console.set_defaults(func=_console)
