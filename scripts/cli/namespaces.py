"""Which namespaces a cluster verb reads: one rule for every verb, the one kubectl and argo users know.

The research (workflow) namespace is the `-n/--namespace` flag, else the kubeconfig context's
namespace, else this pod's (in a pod), else the gate configuration's research namespace (`--config`'s,
else the bundled example's). The serving namespace is `--serving-namespace`, else the gate
configuration's. `Namespaces.where` says which of them chose, so an empty answer can name where it
looked and why there.
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

from offhours.scripts.cluster.connection import context_namespace
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import SMALL_FILE_BYTES
from offhours.scripts.inputs.text import read_text
from offhours.scripts.policy.config import GateConfig

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FROM_FLAG, FROM_CONTEXT, FROM_POD, FROM_CONFIG = ("from -n", "the kubeconfig context's", "this pod's",
                                                  "the gate configuration's")


@dataclass(frozen=True)
class Namespaces:
    """The research and serving namespaces of one verb, and which rule chose the research one."""

    research: str
    serving: str
    where: str  # one of FROM_*

    def described(self) -> str:
        """Return where a verb looked, for an empty answer: `namespace research (the kubeconfig context's)`."""
        return f"namespace {self.research} ({self.where})"


def pod_namespace() -> str | None:
    """Return the namespace of the pod this runs in; None outside a pod."""
    try:
        return read_text(IN_CLUSTER_NAMESPACE, SMALL_FILE_BYTES).strip() or None
    except (OSError, InputError):
        return None


def gate_config(path: str | None) -> GateConfig:
    """Return the gate configuration of `path` (a ConfigError names what is wrong), else the bundled example's."""
    if path:
        from offhours.scripts.config.loader import load_config

        return load_config(path)
    from offhours.workflows.render import example_gate_config

    return example_gate_config()


def resolve(namespace: str | None, serving_namespace: str | None, config: GateConfig,
            kubeconfig: str | None = None) -> Namespaces:
    """Apply the rule of the module docstring (`kubeconfig`: a file, else $KUBECONFIG, else ~/.kube/config)."""
    serving = serving_namespace or config.namespace
    if namespace:
        return Namespaces(namespace, serving, FROM_FLAG)
    found = context_namespace(kubeconfig)
    if found:
        return Namespaces(found, serving, FROM_CONTEXT)
    found = pod_namespace()
    if found:
        return Namespaces(found, serving, FROM_POD)
    return Namespaces(config.workflow_namespace, serving, FROM_CONFIG)


def of_args(args: argparse.Namespace) -> Namespaces:
    """Return the namespaces of a parsed verb: its -n, --serving-namespace, --config and --kubeconfig, where it has them."""
    import os

    return resolve(getattr(args, "namespace", None), getattr(args, "serving_namespace", None),
                   gate_config(getattr(args, "config", None)),
                   getattr(args, "kubeconfig", None) or os.environ.get("KUBECONFIG") or None)


def add_flags(parser: argparse.ArgumentParser, serving: bool = True) -> None:
    """Add -n/--namespace (and --serving-namespace) with the rule in their help."""
    parser.add_argument("-n", "--namespace", help="research (workflow) namespace (default: the kubeconfig context's, "
                        "else the gate configuration's workflowNamespace)")
    if serving:
        parser.add_argument("--serving-namespace", help="namespace of the services, their Deployments and state "
                            "ConfigMaps (default: the gate configuration's)")
