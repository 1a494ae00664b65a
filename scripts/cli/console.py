"""`offhours console`: the web console and `/metrics`, over the read model.

Two modes, always explicit in effect: `--auth kubernetes` (every page needs a bearer token, checked
with TokenReview; what it shows is limited by SubjectAccessReview) and `--auth local` (no
authentication: an operator's own kubeconfig on a laptop, on a loopback address only). Without
`--auth`, the console is local only when it listens on loopback outside a pod; anywhere else it
authenticates: it is never silently open in a cluster.
"""

import argparse
import ipaddress
import os
import sys
from typing import Any

KUBERNETES, LOCAL = "kubernetes", "local"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_mode(requested: str | None, host: str, in_pod: bool) -> str:
    """Return the mode the console runs in; ValueError naming why a local (open) console is refused."""
    if requested == LOCAL and not _loopback(host):
        raise ValueError(f"--auth local serves without authentication: it listens on loopback only, not {host!r} "
                         "(use --auth kubernetes)")
    if requested:
        return requested
    return LOCAL if _loopback(host) and not in_pod else KUBERNETES


def _config_services(args: argparse.Namespace, reader: Any) -> list[str] | None:
    """Return the gate configuration's services: of --config, else of the installed ConfigMap; None if neither is readable."""
    from offhours.scripts.cli.jobs import _config

    config = _config(args)
    if config is not None:
        return [s.name for s in config.services]
    import yaml

    from offhours.scripts.config.loader import parse_config
    from offhours.scripts.names import GATE_CONFIG_KEY, GATE_CONFIG_MAP

    try:
        cm = reader.core.read_namespaced_config_map(GATE_CONFIG_MAP, reader.serving_namespace, _request_timeout=10)
        return [s.name for s in parse_config(yaml.safe_load((cm.data or {}).get(GATE_CONFIG_KEY) or "")).services]
    except Exception:  # noqa: BLE001 - /metrics then names the services the serving namespace shows
        return None


def _console(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.jobs import CommandError, InputError, _reader, config_gpus
    from offhours.scripts.console.app import create_app
    from offhours.scripts.console.auth import KubernetesAuth
    from offhours.scripts.console.source import PoolSource

    try:
        mode = auth_mode(args.auth, args.host, bool(os.environ.get("KUBERNETES_SERVICE_HOST")))
    except ValueError as err:
        print(f"console: {err}", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"console: --port {args.port}: expected 1 to 65535", file=sys.stderr)
        return 2
    if not 0.5 <= args.interval <= 86400:
        print(f"console: --interval {args.interval:g}: expected 0.5 to 86400 seconds", file=sys.stderr)
        return 2
    try:
        reader = _reader(args)
        gpus = config_gpus(args)
    except CommandError as err:
        print(f"console: {err}", file=sys.stderr)
        return 2 if isinstance(err, InputError) else 1
    auth = KubernetesAuth(reader.api, reader.serving_namespace, reader.research_namespace) if mode == KUBERNETES else None
    app = create_app(PoolSource(reader, interval=args.interval), gpus, _config_services(args, reader), auth)
    print(f"offhours console on http://{args.host}:{args.port}/ (serving {reader.serving_namespace}, "
          f"research {reader.research_namespace}; "
          + ("bearer tokens checked with TokenReview)" if auth else "no authentication: local use)"), file=sys.stderr)
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
    console.add_argument("--auth", choices=[KUBERNETES, LOCAL],
                         help="kubernetes: every page needs a bearer token (TokenReview) and shows what its identity "
                         "may list (SubjectAccessReview); local: no authentication, loopback only, for an operator's "
                         "own kubeconfig. Default: local on a loopback address outside a pod, else kubernetes")
    console.set_defaults(func=_console)
