"""`offhours submit`: a research workflow from a WorkflowTemplate, parked until the gate admits it."""

import argparse
import sys
from typing import Any

from offhours.scripts.names import LABEL_REPLICAS, LABEL_SERVICE


def _submit(args: argparse.Namespace) -> int:
    from offhours.scripts.cli.errors import default_namespace
    from offhours.scripts.cli.schedule import MAX_PRIORITY
    from offhours.scripts.cluster.kube import KubeCluster, load_client_config
    from offhours.scripts.cluster.parked import SubmitError, parked_workflow, parse_params
    from offhours.scripts.config.loader import load_config
    from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION
    from offhours.scripts.policy.config import ConfigError

    try:
        if abs(args.priority) > MAX_PRIORITY:
            raise SubmitError(f"--priority {args.priority}: expected -{MAX_PRIORITY} to {MAX_PRIORITY}")
        params = parse_params(args.param or [])
        services = {s.name for s in load_config(args.config).services} if args.config else None
        load_client_config()
        args.namespace = args.namespace or default_namespace()
        cluster = KubeCluster()
        template = cluster.custom.get_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "workflowtemplates",
                                                               args.template)
        body = parked_workflow(template, params, args.namespace, args.priority, services)
    except (SubmitError, ConfigError) as err:
        print(f"submit: {err}", file=sys.stderr)
        return 2
    created = cluster.custom.create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, args.namespace, "workflows", body)
    from offhours.scripts.cli.text import printable

    print(f"{created['metadata']['name']} parked: the gate admits it when "
          f"{printable(body['metadata']['labels'][LABEL_SERVICE])}"
          f" can lend {body['metadata']['labels'][LABEL_REPLICAS]} replica(s)")
    return 0


def register(subparsers: Any) -> None:
    """Add `submit` to the `offhours` command."""
    submit = subparsers.add_parser("submit", help="create a research workflow from a template, parked until the gate "
                                   "admits it")
    submit.add_argument("template", help="WorkflowTemplate name, e.g. offhours-llm-pipeline or offhours-job")
    submit.add_argument("-p", "--param", action="append", help="workflow parameter name=value (repeatable)")
    submit.add_argument("-n", "--namespace", help="workflow namespace (default: the kubeconfig context's, else the "
                        "gate config's research namespace)")
    submit.add_argument("--priority", type=int, default=0, help="admission priority (higher first)")
    submit.add_argument("--config", help="gate configuration: the service must be one of its services")
    submit.set_defaults(func=_submit)
