"""KubeCluster.admit: a resume that lets a workflow run is guarded by the resourceVersion its grace was checked at.

The stand-in answers a patch the way kube-apiserver does: a body naming a resourceVersion other than the
object's is a 409 Conflict; otherwise the merge patch is applied. The tenant's edit lands between the
gate's read and its resume.
"""

import copy
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.cluster.workflow import GRACE_PARAMETER
from offhours.scripts.policy.plan import PARKED, Job


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class Racing:
    """One workflow; the tenant rewrites its grace right after the gate reads it."""

    def __init__(self, grace: str) -> None:
        self.wf: dict[str, Any] = {
            "metadata": {"name": "job", "resourceVersion": "5", "labels": {}, "annotations": {}},
            "spec": {"suspend": True, "arguments": {"parameters": [{"name": GRACE_PARAMETER, "value": grace}]}}}

    def get_namespaced_custom_object(self, *_args: Any) -> dict[str, Any]:
        seen = copy.deepcopy(self.wf)
        self.wf["spec"]["arguments"]["parameters"] = [{"name": GRACE_PARAMETER, "value": "86400"}]
        self.wf["metadata"]["resourceVersion"] = "6"  # kubectl patch by the tenant, just after the gate's read
        return seen

    def patch_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        body = args[-1]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != self.wf["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        _merge(self.wf, body)
        return self.wf


def test_a_tenant_edit_between_the_read_and_the_resume_is_a_conflict_even_when_the_read_was_within_the_cap() -> None:
    """Fault: a grace already within the cap wrote no guard, so an edit in between was resumed uncapped."""
    server = Racing("20")
    cluster = KubeCluster(client.ApiClient(client.Configuration()), retries=0)
    cluster.custom = server
    job = Job(name="job", service="chat", replicas=1, state=PARKED)
    try:
        cluster.admit("research", job, "uid", max_grace_seconds=30)
    except Exception:  # noqa: BLE001 - the conflict: this admission fails, the next tick retries
        pass
    graces = [p["value"] for p in server.wf["spec"]["arguments"]["parameters"]]
    assert server.wf["spec"].get("suspend") or all(int(g) <= 30 for g in graces), server.wf
