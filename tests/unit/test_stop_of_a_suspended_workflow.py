"""The gate's stop of a workflow suspended with a pod still running (`argo suspend` keeps its pods).

Argo v4.0.5 never acts on a suspended workflow's shutdown (da4c1c1, proved on the local control plane for
`offhours cancel`): a Stop written alone leaves the pods on their GPUs while the gate counts them returned,
and the parked copy waits for an original that never ends. The stop unsuspends in the same patch.
"""

from typing import Any

from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.policy.plan import ADMITTED, Job

from .test_gate_controller import World

FULL = 100.0  # requests per second: every replica needed


def test_a_reclaim_stops_an_admitted_workflow_its_owner_suspended_while_its_pod_runs() -> None:
    w = World()
    w.lend(1)
    w.cluster.argo_verb("suspend", "research", "job-0")
    w.wf("job-0")["status"]["nodes"] = {"n1": {"name": "job-0.train", "type": "Pod", "phase": "Running"}}
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-0"]
    spec = w.wf("job-0")["spec"]
    assert spec.get("shutdown") == "Stop" and not spec.get("suspend"), spec


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def patch_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        self.bodies.append(args[-1])
        return {}


def test_the_kubernetes_stop_unsuspends_in_the_same_patch() -> None:
    recorder = Recorder()
    cluster = KubeCluster(client.ApiClient(client.Configuration()))
    cluster.custom = recorder
    cluster.stop("research", Job(name="job", service="chat", replicas=1, state=ADMITTED))
    assert recorder.bodies and recorder.bodies[0]["spec"] == {"shutdown": "Stop", "suspend": None}
