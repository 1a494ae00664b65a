"""A pod the kubelet ended without its containers ever reporting `terminated` is released, not running for ever.

`pod_exit` read a pod as released only once every container status said `terminated`. A pod the kubelet
refused at admission (`OutOfnvidia.com/gpu`, `UnexpectedAdmissionError`: a GPU device plugin restarting)
is `Failed` with no container status at all; Argo's retry runs the step in a new pod and the refused one
stays. While it stays, no stop of that workflow can be measured: each is dropped unmeasured when overdue.
"""

from datetime import datetime, timezone

from kubernetes import client

from offhours.scripts.cluster.kube import pod_exit
from offhours.scripts.policy.release import PodExit, release_seconds


def _at(s: float) -> datetime:
    return datetime.fromtimestamp(s, timezone.utc)


def _terminated(finished: float) -> client.V1ContainerStatus:
    return client.V1ContainerStatus(name="main", image="i", image_id="", ready=False, restart_count=0,
                                    state=client.V1ContainerState(terminated=client.V1ContainerStateTerminated(
                                        exit_code=143, finished_at=_at(finished))))


def test_a_pod_refused_at_admission_before_the_stop_holds_up_no_measurement() -> None:
    """Fault: a Failed pod without container statuses read as still running, so its workflow's stop was never measured."""
    refused = client.V1Pod(metadata=client.V1ObjectMeta(name="step-refused", creation_timestamp=_at(800)),
                           status=client.V1PodStatus(phase="Failed", reason="UnexpectedAdmissionError"))
    retried = client.V1Pod(metadata=client.V1ObjectMeta(name="step-retry", creation_timestamp=_at(810)),
                           status=client.V1PodStatus(phase="Failed", container_statuses=[_terminated(1040)]))
    pods = [pod_exit(refused), pod_exit(retried)]
    assert pods[0].finished is not None and pods[0].finished < 1000  # ended long before the stop: it held nothing
    assert release_seconds(1000.0, pods, now=1100.0) == 40.0


def test_a_running_pod_is_still_not_released() -> None:
    running = client.V1ContainerStatus(name="main", image="i", image_id="", ready=True, restart_count=0,
                                       state=client.V1ContainerState(running=client.V1ContainerStateRunning()))
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p", creation_timestamp=_at(800)),
                       status=client.V1PodStatus(phase="Running", container_statuses=[running]))
    assert pod_exit(pod) == PodExit("p", 800.0, None)
    pending = client.V1Pod(metadata=client.V1ObjectMeta(name="p", creation_timestamp=_at(800)),
                           status=client.V1PodStatus(phase="Pending"))
    assert pod_exit(pending).finished is None  # not started yet: it may hold its GPUs


def _step(name: str, gpus: object) -> client.V1Pod:
    limits = {} if gpus is None else {"nvidia.com/gpu": gpus}
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, creation_timestamp=_at(1005)),
                        spec=client.V1PodSpec(containers=[client.V1Container(
                            name="main", resources=client.V1ResourceRequirements(limits=limits))]),
                        status=client.V1PodStatus(phase="Running", container_statuses=[_terminated(1090)]))


def test_a_gpu_pod_created_just_after_the_recorded_stop_is_a_holder_and_a_gpu_less_one_is_not() -> None:
    """Fault guarded: a GPU step Argo started between the tick's start (the recorded stop) and the stop's write was left out."""
    assert [pod_exit(_step(n, g)).gpus for n, g in (("a", "8"), ("b", "0"), ("c", None), ("d", "x"))] == \
        [True, False, False, True]  # an amount no one can read is taken as a GPU: the slow side
    assert release_seconds(1000.0, [pod_exit(_step("step", "8"))], now=1100.0) == 90.0
    assert release_seconds(1000.0, [pod_exit(_step("exit-handler", None))], now=1100.0) == 100.0  # none held: now
