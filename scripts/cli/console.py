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


def _gate_config(args: argparse.Namespace, reader: Any) -> Any:
    """Return the gate configuration: of --config, else the installed ConfigMap; None if neither is readable."""
    from offhours.scripts.cli.jobs import _config

    config = _config(args)
    if config is not None:
        return config
    from offhours.scripts.config.loader import parse_config_text
    from offhours.scripts.names import GATE_CONFIG_KEY, GATE_CONFIG_MAP

    try:
        cm = reader.core.read_namespaced_config_map(GATE_CONFIG_MAP, reader.serving_namespace, _request_timeout=10)
        return parse_config_text((cm.data or {}).get(GATE_CONFIG_KEY) or "", f"ConfigMap {GATE_CONFIG_MAP}")
    except Exception:  # noqa: BLE001 - /metrics then names the services the serving namespace shows
        return None


def admission_namespace(args: argparse.Namespace, config: Any, serving: str) -> tuple[str, str] | None:
    """Return the namespace the gate admits from and which configuration says so; None without a configuration."""
    from offhours.scripts.names import GATE_CONFIG_MAP

    if config is None:
        return None
    said = f"--config {args.config}" if args.config else f"the installed configuration, ConfigMap {serving}/{GATE_CONFIG_MAP}"
    return str(config.workflow_namespace), said


def console_namespaces(args: argparse.Namespace) -> tuple[str, str, str]:
    """Return (research, serving, where they came from), by the rule every cluster verb follows (cli/namespaces.py)."""
    from offhours.scripts.cli.namespaces import of_args

    chosen = of_args(args)
    serving_from = "--serving-namespace" if args.serving_namespace else "the gate configuration's"
    return chosen.research, chosen.serving, (f"serving namespace {chosen.serving} ({serving_from}), research "
                                             f"{chosen.described()}")


def _estimator(args: argparse.Namespace, config: Any) -> Any:
    """Return the estimator of a request's start (None without a gate configuration or a history to replay)."""
    if config is None:
        return None
    from offhours.scripts.simulate.estimate import HistoryEstimator, prometheus_history, trace_history

    if args.history_sandbox:
        from offhours.scripts.cli.demo import DEMO_DIR
        from offhours.scripts.cli.jobs import InputError
        from offhours.scripts.cli.sandbox_history import sandbox_estimator
        from offhours.scripts.inputs.errors import InputError as Unreadable

        try:
            return sandbox_estimator(DEMO_DIR, config)
        except Unreadable as err:
            raise InputError(f"--history-sandbox: {err}") from None
    if args.history_trace:
        from offhours.scripts.simulate.trace import load_trace

        trace = load_trace(args.history_trace)
        return HistoryEstimator(config, trace_history(trace), f"the trace {args.history_trace} as every service's load")
    url = config.metrics.prometheus_url
    if not url:
        return None
    return HistoryEstimator(config, prometheus_history(config, url), f"the last 14 days of vLLM's counters in {url}")


def _return_path(config: Any) -> Any:
    """Return where the console reads the gate's return-path histograms: the configuration's Prometheus (None: none)."""
    from offhours.scripts.console.return_path_page import ReturnPathReader

    url = config.metrics.prometheus_url if config is not None else ""
    return ReturnPathReader(url) if url else None


def _console(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.jobs import CommandError, InputError, config_gpus
    from offhours.scripts.console.app import create_app
    from offhours.scripts.console.asperson import PersonApi, whoami
    from offhours.scripts.console.auth import KubernetesAuth
    from offhours.scripts.console.source import PoolSource
    from offhours.scripts.policy.config import ConfigError

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
        research, serving, looked = console_namespaces(args)
        args.namespace, args.serving_namespace = research, serving
        reader = _reader(args)
        gpus = config_gpus(args)
        config = _gate_config(args, reader)
        estimator = _estimator(args, config)
    except CommandError as err:
        print(f"console: {err}", file=sys.stderr)
        return 2 if isinstance(err, InputError) else 1
    except (ConfigError, ValueError) as err:
        print(f"console: {err}", file=sys.stderr)
        return 2
    auth = KubernetesAuth(reader.api, reader.serving_namespace, reader.research_namespace) if mode == KUBERNETES else None
    source = PoolSource(reader, interval=args.interval)
    app = create_app(source, gpus, [s.name for s in config.services] if config is not None else None, auth,
                     person_api=PersonApi(reader.api, reader.research_namespace), estimator=estimator,
                     local_user=whoami(reader.api) if auth is None else "", looked=looked,
                     admits_from=admission_namespace(args, config, reader.serving_namespace), gate_config=config,
                     return_path=_return_path(config))
    source.start_sampling()  # the 24 h chart is read on the interval, whether or not a page is open
    print(f"offhours console on http://{args.host}:{args.port}/ ({looked}; "
          + ("bearer tokens checked with TokenReview)" if auth else "no authentication: local use)"), file=sys.stderr)
    from werkzeug.serving import run_simple

    run_simple(args.host, args.port, app, threaded=True)
    return 0


def _reader(args: argparse.Namespace) -> Any:
    from offhours.scripts.cli.jobs import _reader as reader

    return reader(args)


def register(subparsers: Any) -> None:
    """Add `console` to the `offhours` command."""
    from offhours.scripts.cli.jobs import _common

    console = subparsers.add_parser("console", help="web console of the pool, the queue, jobs and usage; /metrics")
    _common(console)
    console.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a pod)")
    console.add_argument("--interval", type=float, default=15.0, help="seconds between reads of the cluster, whether "
                         "or not a page is open: the 24 h chart's points (default 15)")
    console.add_argument("--history-trace", metavar="NAME|FILE",
                         help="estimate a request's start by replaying this per-minute trace (a bundled trace's name "
                         "or a file of `offhours trace export`) as the service's load, instead of the last 14 days "
                         "in the gate configuration's Prometheus")
    console.add_argument("--history-sandbox", action="store_true",
                         help="estimate a request's start by replaying the load the running sandbox (`make sandbox`) "
                         "serves, at its speed, answering in wall time")
    console.add_argument("--auth", choices=[KUBERNETES, LOCAL],
                         help="kubernetes: every page needs a bearer token (TokenReview) and shows what its identity "
                         "may list (SubjectAccessReview); local: no authentication, loopback only, for an operator's "
                         "own kubeconfig. Default: local on a loopback address outside a pod, else kubernetes")
    console.set_defaults(func=_console)
