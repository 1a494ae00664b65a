"""Expected errors of the `offhours` command line, each turned into one line and an exit code.

A missing object (404), missing rights (403), no kubeconfig, an API server that cannot be
reached, a bad configuration or an unreadable file is something a user does or meets, not a
bug: it gets one line naming what is wrong, never a traceback. Exit 2 for what the user must fix
locally (configuration, kubeconfig, files), 1 for what the cluster answered. Anything else is a
bug and keeps its traceback.
"""

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from kubernetes import config as kube_config
from kubernetes.config.config_exception import ConfigException

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.errors import explain_api_error
from offhours.scripts.policy.config import ConfigError

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def explain(err: BaseException) -> tuple[str, int] | None:
    """Return (one line, exit code) for an expected error, None for a bug."""
    api = explain_api_error(err)  # an API answer or an unreachable API server: what the cluster said
    if api is not None:
        return api, 1
    if isinstance(err, ConfigException):
        return (f"no Kubernetes configuration: {err} (set KUBECONFIG, or write ~/.kube/config)", 2)
    if isinstance(err, ConfigError):
        return str(err), 2
    if isinstance(err, ClusterError):
        return str(err), 1
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}", 2
    return None


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; print an expected error as one line on stderr and return its exit code."""
    # The client retries a refused connection and logs each retry through the root logger's last
    # resort handler: the one line below says it once.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - re-raised unless it is an expected error
        explained = explain(err)
        if explained is None:
            raise
        message, code = explained
        print(f"offhours {args.command}: {message}", file=sys.stderr)
        return code


def default_namespace(gate_config: str | None = None, kubeconfig: str | None = None) -> str:
    """Return the kubeconfig context's namespace, else this pod's, else the gate config's research one.

    `gate_config` is a gate configuration file (without one: the bundled example's); `kubeconfig`
    a kubeconfig file (without one: $KUBECONFIG, else ~/.kube/config).
    """
    try:
        _, active = kube_config.list_kube_config_contexts(config_file=kubeconfig)
        namespace = (active or {}).get("context", {}).get("namespace")
        if namespace:
            return str(namespace)
    except ConfigException:
        pass
    if IN_CLUSTER_NAMESPACE.exists():
        return IN_CLUSTER_NAMESPACE.read_text().strip()
    if gate_config:
        from offhours.scripts.policy.config import load_config

        return load_config(gate_config).workflow_namespace
    from offhours.workflows.render import example_gate_config

    return example_gate_config().workflow_namespace
