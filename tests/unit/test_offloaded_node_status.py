"""A workflow whose node status Argo offloaded to its database (over ~1 MB of nodes, persistence on):
`status.nodes` is gone from the object and `status.offloadNodeStatusVersion` says where it went.

Read as "no live pod", a suspended admitted workflow with its pods running was taken for parked: counted
as holding nothing, never a reclaim's victim, and resumed by its next admission.
"""

from offhours.scripts.cluster.workflow import workflow_job
from offhours.scripts.names import LABEL_REPLICAS, LABEL_SERVICE, LABEL_STATE, STATE_ADMITTED
from offhours.scripts.policy.plan import ADMITTED, PARKED, UNMANAGED


def _suspended(state: str | None, status: dict) -> dict:  # type: ignore[type-arg]
    labels = {LABEL_SERVICE: "chat", LABEL_REPLICAS: "2", **({LABEL_STATE: state} if state else {})}
    return {"metadata": {"name": "big", "uid": "u", "labels": labels}, "spec": {"suspend": True}, "status": status}


def test_a_suspended_workflow_whose_nodes_are_offloaded_is_not_taken_for_parked() -> None:
    offloaded = {"phase": "Running", "offloadNodeStatusVersion": "fnv:123"}
    admitted = workflow_job(_suspended(STATE_ADMITTED, offloaded), "chat")
    unlabelled = workflow_job(_suspended(None, offloaded), "chat")
    assert admitted is not None and admitted.state == ADMITTED
    assert unlabelled is not None and unlabelled.state == UNMANAGED
    parked = workflow_job(_suspended(None, {}), "chat")  # created parked: no status yet
    assert parked is not None and parked.state == PARKED
