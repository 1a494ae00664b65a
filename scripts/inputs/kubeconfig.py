"""The kubeconfig files the Kubernetes client is about to read, read first through the bounds.

The client library reads them itself (it merges a $KUBECONFIG list and resolves paths relative to
each file), with PyYAML's loader and no bound: an enormous, binary, UTF-16, alias-bombed or
duplicate-keyed file would reach it. Each file is checked here first, and refused with its name.
"""

import os

from offhours.scripts.inputs.limits import KUBECONFIG_BYTES
from offhours.scripts.inputs.yamldoc import read_yaml


def check_kubeconfig(path: str | None = None) -> None:
    """Check every file of `path` (a $KUBECONFIG-style list), else $KUBECONFIG, else ~/.kube/config; InputError if bad.

    A file that cannot be opened is left to the client, which names it in its own words.
    """
    listed = path or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    for file in filter(None, listed.split(os.pathsep)):
        try:
            read_yaml(file, KUBECONFIG_BYTES, allow_empty=True)
        except OSError:
            continue
