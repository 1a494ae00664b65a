"""KubeCluster's conditional serving writes on a KEDA ScaledObject that leaves maxReplicaCount out (KEDA's 100).

No JSON-patch `test` can read an absent field, so the first lower tests the object's resourceVersion, which
KEDA's own status writes (lastActiveTime, every polling interval) move between the gate's read and its patch.
Invariant: such a move is read again and tried again, and at worst nothing is written (a conflict the caller
reads again), never an error: a serving write fails only on a refusal that is not a changed object.
"""

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster.base import Autoscaler, ClusterError
from offhours.scripts.cluster.clock import ServerClock
from offhours.scripts.cluster.kube import KubeCluster


def _keda(status_writes: int, refuse: bool = False) -> tuple[KubeCluster, dict[str, Any]]:
    """A ScaledObject whose status KEDA writes right after each of the first `status_writes` reads."""
    rv, spec = [1], {"scaleTargetRef": {"name": "chat"}}
    reads = [0]

    def get(*args: Any, **kw: Any) -> dict[str, Any]:
        obj = {"metadata": {"resourceVersion": str(rv[0])}, "spec": dict(spec)}
        reads[0] += 1
        if reads[0] <= status_writes:
            rv[0] += 1
        return obj

    def patch(group: str, version: str, ns: str, plural: str, name: str, body: list[dict[str, Any]]) -> dict:
        if refuse or (body[0]["path"] == "/metadata/resourceVersion" and body[0]["value"] != str(rv[0])):
            raise ApiException(status=422, reason="Unprocessable Entity")
        spec["maxReplicaCount"] = body[1]["value"]
        rv[0] += 1
        return {}

    kc = KubeCluster.__new__(KubeCluster)
    kc.api = SimpleNamespace(last_response=None)
    kc.retries, kc.backoff, kc.sleep = 2, 0.0, lambda s: None
    kc.monotonic = lambda: 0.0
    kc.server_clock = ServerClock(kc.monotonic)
    kc.custom = SimpleNamespace(get_namespaced_custom_object=get, patch_namespaced_custom_object=patch)
    return kc, spec


def test_a_status_write_between_read_and_patch_is_read_again_and_the_lower_written() -> None:
    kc, spec = _keda(status_writes=1)
    answer = kc.lower_serving(Autoscaler("ScaledObject", "serving", "chat", 1, 100), 100, 96)
    assert (answer.value, answer.conflict, spec.get("maxReplicaCount")) == (96, False, 96)


def test_status_writes_at_every_try_write_nothing_and_are_a_conflict_not_an_error() -> None:
    kc, spec = _keda(status_writes=1_000)
    answer = kc.lower_serving(Autoscaler("ScaledObject", "serving", "chat", 1, 100), 100, 96)
    assert (answer.value, answer.conflict, "maxReplicaCount" in spec) == (100, True, False)


def test_a_refusal_that_is_not_a_moved_object_is_still_an_error() -> None:
    kc, _ = _keda(status_writes=0, refuse=True)
    with pytest.raises(ClusterError, match="422"):
        kc.lower_serving(Autoscaler("ScaledObject", "serving", "chat", 1, 100), 100, 96)
