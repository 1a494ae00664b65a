"""The exit hook's pod-name binding (gate_marks: a request from the exit hook's ServiceAccount marks only the
workflow whose `<name>-return-gpus-<digits>` pod its token is bound to) holds only if no one but Argo's controller
creates a pod that runs as that ServiceAccount: the pod's name is its creator's choice."""

from typing import Any

import pytest

from offhours.scripts.names import EXIT_HOOK_SERVICE_ACCOUNT, POLICY_BEST_EFFORT_PODS, RETURN_GPUS
from tests.unit.test_admission_policies import rendered

celpy = pytest.importorskip("celpy")


def _allowed(pod: dict[str, Any], username: str) -> bool:
    policy = next(d for d in rendered().values()
                  if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == POLICY_BEST_EFFORT_PODS)
    env = celpy.Environment()
    activation = {"object": celpy.json_to_cel(pod), "oldObject": None,
                  "request": celpy.json_to_cel({"userInfo": {"username": username, "groups": []}})}
    return all(bool(env.program(env.compile(v["expression"])).evaluate(activation))
               for v in policy["spec"]["validations"])


@pytest.mark.xfail(strict=True, reason="the pod policy does not know Argo's controller's identity (no configuration "
                   "names it): a researcher may create a pod named <victim>-return-gpus-1 running as the exit hook's "
                   "ServiceAccount, and its token then passes gate_marks' binding for the victim's workflow")
def test_a_researcher_cannot_create_a_pod_that_runs_as_the_exit_hook() -> None:
    pod = {"metadata": {"name": f"victim-{RETURN_GPUS}-1"},
           "spec": {"serviceAccountName": EXIT_HOOK_SERVICE_ACCOUNT, "priority": 0, "containers": [{"name": "c"}]}}
    assert not _allowed(pod, "alice")


GPU = {"resources": {"requests": {"nvidia.com/gpu": "1"}}}


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_the_exit_hook_runs_at_the_default_priority_only_without_a_gpu_in_any_container(where: str) -> None:
    # A pod's GPU request is its largest init container's if that is larger: held for the pod's whole life.
    spec: dict[str, Any] = {"serviceAccountName": EXIT_HOOK_SERVICE_ACCOUNT, "priority": 0,
                            "containers": [{"name": "c"}]}
    assert _allowed({"metadata": {"name": "p"}, "spec": spec}, "argo")
    spec[where] = [*spec.get(where, []), {"name": "g", **GPU}]
    assert not _allowed({"metadata": {"name": "p"}, "spec": spec}, "argo")


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_validate_says_the_same_of_an_exit_hook_pod_holding_a_gpu(where: str) -> None:
    from offhours.scripts.policy.boundary import boundary_problems
    from offhours.scripts.policy.config import ResearchBoundary

    spec: dict[str, Any] = {"serviceAccountName": EXIT_HOOK_SERVICE_ACCOUNT, "containers": [{"name": "c"}]}
    assert boundary_problems({"kind": "Pod", "spec": spec}, ResearchBoundary()) == []
    spec[where] = [*spec.get(where, []), {"name": "g", **GPU}]
    assert [p for p, _ in boundary_problems({"kind": "Pod", "spec": spec}, ResearchBoundary())] == \
        ["spec.priorityClassName"]
