"""Reach the cluster a verb talks to, or say in one line that there is none and how to get one.

Every cluster verb connects here first: its kubeconfig (else the pod's service account) is loaded,
the client is told not to retry a refused connection (urllib3 retries three times by default, and
each retry of a dead address costs seconds), and the API server's `/version` (readable by anyone) is
asked once with a short timeout, so a missing or stopped cluster is one line within seconds, never
a verb's own error after its first list call.
"""

import os

import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from offhours.scripts.cluster.errors import failed_call
from offhours.scripts.inputs.kubeconfig import check_kubeconfig

KubeconfigError = ConfigException  # the client's refusal of a kubeconfig, for callers that name it

PROBE_TIMEOUT_SECONDS = 3.0
HOW_TO_GET_ONE = ("start the local one with `make cluster-up` and "
                  "`eval \"$(python3 scripts/controlplane/lifecycle.py env)\"`, or set KUBECONFIG to your cluster's")


class NoCluster(RuntimeError):
    """No cluster to talk to: one line; exit 2 without a configuration (fixed locally), 1 when none answers."""

    def __init__(self, line: str, exit_code: int = 1) -> None:
        super().__init__(line)
        self.exit_code = exit_code


def kubeconfig_path(flag: str | None = None) -> str | None:
    """Return the kubeconfig a verb reads: its --kubeconfig, else $KUBECONFIG (read now, not at import), else the default."""
    return flag or os.environ.get("KUBECONFIG") or None


def connect(kubeconfig: str | None = None, probe: bool = True) -> client.ApiClient:
    """Load the client configuration and check the API server answers; NoCluster (one line) if there is none."""
    path = kubeconfig_path(kubeconfig)
    check_kubeconfig(path)  # bounded and checked before the client reads it (InputError: one line, cli/errors.py)
    try:
        kube_config.load_kube_config(config_file=path)
    except UnicodeDecodeError:
        raise  # not text at all: one line saying so (cli/errors.py)
    except (ConfigException, OSError, TypeError, AttributeError, KeyError, ValueError) as err:  # a file in a shape it cannot read
        try:
            kube_config.load_incluster_config()
        except ConfigException:
            where = path or "~/.kube/config"
            raise NoCluster(f"no cluster: no Kubernetes configuration in {where} ({str(err).splitlines()[0][:120]}); "
                            f"{HOW_TO_GET_ONE}", exit_code=2) from None
    settings = client.Configuration.get_default_copy()
    settings.retries = 0  # a refused connection is an answer: fail on it at once
    client.Configuration.set_default(settings)
    api = client.ApiClient(settings)
    if probe:
        try:
            client.VersionApi(api).get_code(_request_timeout=PROBE_TIMEOUT_SECONDS)
        except ApiException:
            pass  # it answered: what it refuses is the verb's own call to name
        except urllib3.exceptions.HTTPError as err:
            raise NoCluster(f"{failed_call('no cluster', err)}; {HOW_TO_GET_ONE}") from None
    return api


def context_namespace(kubeconfig: str | None = None) -> str | None:
    """Return the kubeconfig's current context's namespace; None without a kubeconfig, a context or a namespace in it."""
    check_kubeconfig(kubeconfig)  # the first read of it: bounded and checked (InputError), before the client's own
    try:
        _, active = kube_config.list_kube_config_contexts(config_file=kubeconfig)
        namespace = ((active or {}).get("context") or {}).get("namespace")
    except UnicodeDecodeError:
        raise  # not text at all: one line saying so (cli/errors.py)
    except (ConfigException, OSError, AttributeError, TypeError, KeyError, ValueError):
        # A file in a shape the client cannot read has no context to take a namespace from; the connection, next,
        # names the file as one line (connect).
        return None
    return str(namespace) if isinstance(namespace, str) and namespace else None


def client_of(kubeconfig: str) -> client.ApiClient:
    """Return a client of the kubeconfig file `kubeconfig` (no probe; the caller's first call names a failure)."""
    return kube_config.new_client_from_config(kubeconfig)


def as_bearer(api_client: client.ApiClient, token: str) -> client.ApiClient:
    """Return a client of the same API server as `api_client` that authenticates with `token` alone (no client certificate)."""
    mine = api_client.configuration
    config = client.Configuration()
    config.host, config.ssl_ca_cert, config.verify_ssl = mine.host, mine.ssl_ca_cert, mine.verify_ssl
    config.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(config)
