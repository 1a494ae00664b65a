"""`offhours backstop`: the backstop CronJob's command (scripts/backstop/restore.py): restore expired lending."""

import argparse
import sys
from typing import Any


def _backstop(args: argparse.Namespace) -> int:
    import os

    from offhours.scripts.backstop.restore import run_backstop
    from offhours.scripts.cluster.errors import run_explained
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config

    namespace = args.namespace or os.environ.get("OFFHOURS_NAMESPACE")
    if not namespace:
        print("backstop: --namespace (or $OFFHOURS_NAMESPACE) is required", file=sys.stderr)
        return 2

    def run() -> int:
        load_client_config()
        research = args.research_namespace or os.environ.get("OFFHOURS_RESEARCH_NAMESPACE") or None
        done = run_backstop(KubeCluster(), namespace, research_namespace=research)
        return 1 if any(r.error for r in done) else 0

    return run_explained("backstop", run)


def register(subparsers: Any) -> None:
    """Add `backstop` to the `offhours` command."""
    cmd = subparsers.add_parser("backstop", help="give serving its baseline back where lending expired (no tick "
                                "renewed it in time): the backstop CronJob's command, without Argo")
    cmd.add_argument("--namespace", "-n", help="the serving namespace (default: $OFFHOURS_NAMESPACE)")
    cmd.add_argument("--research-namespace", help="where to set the GPU quota to 0 once serving is restored "
                     "(default: $OFFHOURS_RESEARCH_NAMESPACE; none: the quota is left)")
    cmd.set_defaults(func=_backstop)
