"""`offhours return-gpus`: the exit hook's command (scripts/gate/exit_hook.py), run by every offhours workflow's exit handler."""

import argparse
import sys
from typing import Any


def _return_gpus(args: argparse.Namespace) -> int:
    import os

    from offhours.scripts.cluster.base import ClusterError
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.gate.exit_hook import return_gpus

    namespace = args.namespace or os.environ.get("OFFHOURS_NAMESPACE")
    if not namespace:
        print("return-gpus: --namespace (or $OFFHOURS_NAMESPACE) is required", file=sys.stderr)
        return 2
    load_client_config()
    try:
        return_gpus(KubeCluster(), workflow_namespace=namespace, workflow_name=args.workflow_name,
                    status=args.status, failures=args.failures)
    except ClusterError as err:
        print(f"return-gpus: {err}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add `return-gpus` to the `offhours` command."""
    ret = subparsers.add_parser("return-gpus", help="exit hook: mark a finished workflow as having returned its replicas "
                                "(the gate scales serving back)")
    ret.add_argument("--workflow", "--workflow-name", dest="workflow_name", required=True)
    ret.add_argument("--status", required=True, help="{{workflow.status}}")
    ret.add_argument("--failures", default="[]", help="{{workflow.failures}}")
    ret.add_argument("--namespace", help="namespace of the workflow (default: $OFFHOURS_NAMESPACE)")
    ret.set_defaults(func=_return_gpus)
