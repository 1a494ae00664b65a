"""Read the pool's objects from the Kubernetes API (read only) and build the read model from them.

Only list calls: ConfigMaps and Deployments in the serving namespace, offhours workflows in the
research namespace. A call that fails (no rights, server down) becomes a problem named in the
pool, and the rest is still shown; `PoolReadError` only when the workflows cannot be read at all
and the caller asked for them to be required.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from offhours.scripts.cluster.access import SelfAccess
from offhours.scripts.cluster.errors import describe_api_error
from offhours.scripts.cluster.handles import handles
from offhours.scripts.cluster.workflow import PLURAL
from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION, LABEL_SERVICE
from offhours.scripts.pool.model import Pool, build_pool


class PoolReadError(RuntimeError):
    """The API refused or failed a read; names the call and the answer."""


class PoolReader:
    """Lists the objects of one serving and one research namespace."""

    def __init__(self, serving_namespace: str, research_namespace: str, api_client: Any = None) -> None:
        self.serving_namespace = serving_namespace
        self.research_namespace = research_namespace
        apis = handles(api_client)
        self.api, self.core, self.apps, self.custom = apis.api, apis.core, apis.apps, apis.custom
        # Who reads, as the API server answers access reviews for them: what a lookup may touch (cluster/resolve.py).
        self.access = SelfAccess(self.api)

    def _list(self, what: str, call: Callable[[], Any], problems: list[str]) -> list[dict[str, Any]]:
        try:
            answer = call()
        except Exception as err:  # noqa: BLE001 - any failure of one list is shown, never a crash of the reader
            problems.append(describe_api_error(what, err))
            return []
        if isinstance(answer, dict):
            return [i for i in answer.get("items") or [] if isinstance(i, dict)]
        return [self.api.sanitize_for_serialization(i) for i in answer.items]

    def workflows(self, problems: list[str]) -> list[dict[str, Any]]:
        """Every workflow labelled with an offhours service, finished ones included."""
        ns = self.research_namespace
        return self._list(f"list workflows in {ns}", lambda: self.custom.list_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, ns, PLURAL, label_selector=LABEL_SERVICE), problems)

    def runs(self) -> Pool:
        """Read the research workflows alone, as a pool of runs (no service state): PoolReadError if they cannot be."""
        problems: list[str] = []
        workflows = self.workflows(problems)
        if problems:
            raise PoolReadError(problems[-1])
        return build_pool([], [], workflows, self.serving_namespace)

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        """Read everything and build the pool; failed lists become the pool's problems."""
        problems: list[str] = []
        ns = self.serving_namespace
        configmaps = self._list(f"list configmaps in {ns}", lambda: self.core.list_namespaced_config_map(ns), problems)
        deployments = self._list(f"list deployments in {ns}", lambda: self.apps.list_namespaced_deployment(ns), problems)
        before = len(problems)
        workflows = self.workflows(problems)
        if require_workflows and len(problems) > before:
            raise PoolReadError(problems[-1])
        return build_pool(configmaps, deployments, workflows, ns, now, problems)
