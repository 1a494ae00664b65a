"""End to end: the tenant boundary kube-apiserver v1.34 enforces itself (ValidatingAdmissionPolicy, ResourceQuota).

Real: the API server evaluating the rendered policies' CEL and the quota at admission, RBAC, impersonation.
Each rule: the allowed writes of the gate, the exit hook and a researcher go through; a researcher's forbidden
write is refused with the rule's message. The researcher is a ServiceAccount with a researcher's RBAC (workflows,
pods), impersonated (`kubectl --as=system:serviceaccount:research:NAME`, which also carries its groups).
"""

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.names import GPU_QUOTA

from .conftest import RESEARCH, SERVING, wait

RESEARCHER = f"system:serviceaccount:{RESEARCH}:e2e-researcher"
ARGO_CONTROLLER = "system:serviceaccount:argo:argo"
GATE = f"system:serviceaccount:{SERVING}:offhours-gate"
HOOK = f"system:serviceaccount:{RESEARCH}:offhours-exit-hook"
Run = Callable[..., tuple[int, str]]


@pytest.fixture(scope="module")
def as_user(cluster_env: dict[str, str], installed: Path, kubectl: Callable[..., str]) -> Iterator[Run]:
    """kubectl as someone: (exit status, output); the researcher's account and RBAC made first, removed after."""
    researcher: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "e2e-researcher", "namespace": RESEARCH}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "e2e-researcher", "namespace": RESEARCH},
         "rules": [{"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["*"]},
                   {"apiGroups": [""], "resources": ["pods", "resourcequotas", "secrets"], "verbs": ["*"]},
                   # RBAC would refuse these first; granted so that offhours-exit-hook-pods is what answers.
                   {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
                   {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "e2e-researcher", "namespace": RESEARCH},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-researcher"},
         "subjects": [{"kind": "ServiceAccount", "name": "e2e-researcher", "namespace": RESEARCH}]},
        # Argo's workflow controller as Argo's install names it (research.argoController's default): the local
        # controller runs as a cluster admin, so its identity is impersonated, with the right to create pods.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "e2e-argo-controller", "namespace": RESEARCH},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "e2e-argo-controller", "namespace": RESEARCH},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-argo-controller"},
         "subjects": [{"kind": "ServiceAccount", "name": "argo", "namespace": "argo"}]},
        # RBAC would refuse these first; granted here so that the policy, the second lock, is what answers.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "e2e-researcher", "namespace": SERVING},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "e2e-researcher", "namespace": SERVING},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "e2e-researcher"},
         "subjects": [{"kind": "ServiceAccount", "name": "e2e-researcher", "namespace": RESEARCH}]},
    ]
    for doc in researcher:
        kubectl("apply", "-f", "-", stdin=json.dumps(doc))

    def run(user: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
        out = subprocess.run([f"{cluster_env['OFFHOURS_CLUSTER_BIN']}/offhours-kube", "kubectl",
                              "--kubeconfig", cluster_env["KUBECONFIG"], f"--as={user}", *args],
                             input=stdin, capture_output=True, text=True, timeout=120)
        return out.returncode, out.stdout + out.stderr

    yield run
    for doc in reversed(researcher):
        kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "-n", doc["metadata"]["namespace"],
                "--ignore-not-found")


def pod(name: str, **spec: Any) -> str:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if "gpus" in spec:
        n = str(spec.pop("gpus"))
        container["resources"] = {"limits": {"nvidia.com/gpu": n}, "requests": {"nvidia.com/gpu": n}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": RESEARCH},
                       "spec": {"serviceAccountName": "e2e-researcher", "containers": [container], **spec}})


def parked(name: str, **labels: str) -> str:
    return json.dumps({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                       "metadata": {"name": name, "namespace": RESEARCH,
                                    "labels": {"offhours.io/state": "parked", **labels}},
                       "spec": {"suspend": True, "entrypoint": "main", "podPriorityClassName": "offhours-best-effort",
                                "templates": [{"name": "main", "container": {"image": "busybox"}}]}})


BEST_EFFORT = {"priorityClassName": "offhours-best-effort"}


@pytest.mark.parametrize(("name", "spec", "words"), [
    ("e2e-default-priority", {}, "spec.priority is 0; research pods run at most at offhours-best-effort (-100)"),
    ("e2e-node-name", {**BEST_EFFORT, "nodeName": "gpu-00"}, "spec.nodeName is set (gpu-00), which skips the scheduler"),
    ("e2e-scheduler", {**BEST_EFFORT, "schedulerName": "volcano"}, "spec.schedulerName is volcano"),
    ("e2e-tolerate-all", {**BEST_EFFORT, "tolerations": [{"operator": "Exists"}]},
     "spec.tolerations may tolerate only the taint keys nvidia.com/gpu"),
])
def test_a_research_pod_beyond_best_effort_is_refused_with_the_field_and_the_fix(
        as_user: Run, name: str, spec: dict[str, Any], words: str) -> None:
    code, out = as_user(RESEARCHER, "create", "-f", "-", stdin=pod(name, **spec))
    assert code != 0 and "offhours-research-pods-best-effort" in out and words in out, out


def test_a_best_effort_pod_with_the_pools_toleration_is_created(as_user: Run) -> None:
    spec = {**BEST_EFFORT, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    code, out = as_user(RESEARCHER, "create", "-f", "-", stdin=pod("e2e-allowed", **spec))
    assert code == 0, out
    as_user(RESEARCHER, "-n", RESEARCH, "delete", "pod", "e2e-allowed", "--grace-period=0", "--wait=false")


def test_a_parked_workflow_is_resumed_by_the_gate_only_and_every_other_verb_works_for_its_owner(as_user: Run) -> None:
    code, out = as_user(RESEARCHER, "create", "-f", "-", stdin=parked("e2e-parked"))
    assert code == 0, out
    try:
        # What `argo resume` writes (the CLI asks the server, which writes as the caller): spec.suspend lifted.
        for patch in ('{"spec":{"suspend":null}}', '{"spec":{"suspend":false}}'):
            code, out = as_user(RESEARCHER, "-n", RESEARCH, "patch", "workflow", "e2e-parked", "--type=merge", "-p", patch)
            assert code != 0 and "is parked (spec.suspend: true): only the offhours gate resumes it" in out, out
            assert "offhours why e2e-parked" in out
        assert as_user(RESEARCHER, "-n", RESEARCH, "get", "workflow", "e2e-parked")[0] == 0
        # The gate's marks are the gate's.
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "label", "workflow", "e2e-parked", "offhours.io/state=admitted",
                            "--overwrite")
        assert code != 0 and "label offhours.io/state parked -> admitted: the offhours gate writes this label" in out
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "annotate", "workflow", "e2e-parked", "offhours.io/copy-token=x")
        assert code != 0 and "offhours.io/copy-token: written by the offhours gate only" in out, out
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "annotate", "workflow", "e2e-parked", "offhours.io/priority=3")
        assert code == 0, out  # a tenant's own annotation
        # `offhours cancel` / `argo stop`: the stop lifts suspend with spec.shutdown, so nothing runs.
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "patch", "workflow", "e2e-parked", "--type=merge", "-p",
                            '{"metadata":{"annotations":{"offhours.io/cancelled-at":"now"}},'
                            '"spec":{"shutdown":"Stop","suspend":null}}')
        assert code == 0, out
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "patch", "workflow", "e2e-parked", "--type=json", "-p",
                            '[{"op":"remove","path":"/spec/shutdown"}]')
        assert code != 0 and "was stopped while parked: its spec.shutdown stays" in out, out
    finally:
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "delete", "workflow", "e2e-parked", "--wait=false")
        assert code == 0, out


@pytest.fixture
def hook_token(api: client.ApiClient) -> Iterator[Callable[[str], client.ApiClient]]:
    """A client holding an exit hook token bound to a pod of that name, made as kubelet makes one (TokenRequest)."""
    core, made = client.CoreV1Api(api), []

    def token_for(pod_name: str) -> client.ApiClient:
        pod = core.create_namespaced_pod(RESEARCH, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": RESEARCH},
            "spec": {"serviceAccountName": "offhours-exit-hook", "containers": [{"name": "main", "image": "busybox"}]}})
        made.append(pod_name)
        bound = client.V1BoundObjectReference(api_version="v1", kind="Pod", name=pod_name, uid=pod.metadata.uid)
        token = core.create_namespaced_service_account_token("offhours-exit-hook", RESEARCH,
                                                             client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600, bound_object_ref=bound))).status.token
        conf = client.Configuration()
        conf.host, conf.ssl_ca_cert = api.configuration.host, api.configuration.ssl_ca_cert
        conf.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(conf)

    yield token_for
    for name in made:
        core.delete_namespaced_pod(name, RESEARCH, grace_period_seconds=0)


def _annotate(api: client.ApiClient, workflow: str, key: str, value: str) -> str:
    """Annotate a workflow as `api`'s identity: '' when written, else the API server's message."""
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            "argoproj.io", "v1alpha1", RESEARCH, "workflows", workflow, {"metadata": {"annotations": {key: value}}})
        return ""
    except client.ApiException as err:
        return str(json.loads(err.body)["message"])


def test_the_exit_hook_tokens_name_their_pod_and_mark_only_that_pods_workflow(
        as_user: Run, api: client.ApiClient, hook_token: Callable[[str], client.ApiClient]) -> None:
    for name in ("e2e-mine", "e2e-theirs"):
        assert as_user(RESEARCHER, "create", "-f", "-", stdin=parked(name))[0] == 0
    try:
        own = hook_token("e2e-mine-return-gpus-1234567")
        review = client.AuthenticationV1Api(own).create_self_subject_review(
            client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"))
        extra = review.status.user_info.extra or {}
        assert extra.get("authentication.kubernetes.io/pod-name") == ["e2e-mine-return-gpus-1234567"], extra
        assert _annotate(own, "e2e-mine", "offhours.io/returned-at", "2026-01-01T01:00:00Z") == ""
        refused = _annotate(own, "e2e-theirs", "offhours.io/returned-at", "2026-01-01T01:00:00Z")
        assert "the exit hook writes only the workflow its own pod belongs to" in refused, refused
        assert "pod e2e-mine-return-gpus-1234567, not e2e-theirs-return-gpus-<hash>" in refused, refused
        # A pod whose name only starts like the workflow's hook pod (another workflow, e2e-mine-x) reaches nothing.
        near = hook_token("e2e-mine-x-return-gpus-99")
        assert "writes only the workflow its own pod belongs to" in _annotate(near, "e2e-mine", "offhours.io/gpu-seconds",
                                                                            "1")
        # A token bound to no pod (the ServiceAccount impersonated) reaches no workflow's marks.
        code, out = as_user(HOOK, "-n", RESEARCH, "annotate", "workflow", "e2e-theirs", "offhours.io/gpu-seconds=1")
        assert code != 0 and "(none: the token is bound to no pod)" in out, out
    finally:
        for name in ("e2e-mine", "e2e-theirs"):
            as_user(RESEARCHER, "-n", RESEARCH, "delete", "workflow", name, "--wait=false")


def test_the_gate_admits_and_marks_and_the_exit_hook_accounts(
        as_user: Run, hook_token: Callable[[str], client.ApiClient]) -> None:
    assert as_user(RESEARCHER, "create", "-f", "-", stdin=parked("e2e-admitted"))[0] == 0
    try:
        for args in (("annotate", "workflow", "e2e-admitted", "offhours.io/admitted-at=2026-01-01T00:00:00Z"),
                     ("label", "workflow", "e2e-admitted", "offhours.io/state=admitted", "--overwrite"),
                     ("patch", "workflow", "e2e-admitted", "--type=merge", "-p", '{"spec":{"suspend":null}}')):
            code, out = as_user(GATE, "-n", RESEARCH, *args)
            assert code == 0, out
        hook = hook_token("e2e-admitted-return-gpus-42")
        assert _annotate(hook, "e2e-admitted", "offhours.io/returned-at", "2026-01-01T01:00:00Z") == ""
        client.CustomObjectsApi(hook).patch_namespaced_custom_object(
            "argoproj.io", "v1alpha1", RESEARCH, "workflows", "e2e-admitted",
            {"metadata": {"labels": {"offhours.io/state": "returned"}}})
        refused = _annotate(hook, "e2e-admitted", "offhours.io/admitted-at", "x")
        assert "offhours.io/admitted-at: written by the offhours gate only" in refused, refused
        code, out = as_user(RESEARCHER, "-n", RESEARCH, "annotate", "workflow", "e2e-admitted",
                            "offhours.io/gpu-seconds=0")
        assert code != 0 and "written by the exit hook that gives the GPUs back" in out, out
    finally:
        as_user(RESEARCHER, "-n", RESEARCH, "delete", "workflow", "e2e-admitted", "--wait=false")


def test_serving_objects_and_the_quotas_are_not_a_research_accounts(as_user: Run) -> None:
    code, out = as_user(RESEARCHER, "-n", SERVING, "create", "configmap", "e2e-mine")
    assert code != 0 and "configmaps serving/e2e-mine belongs to serving and the offhours gate" in out, out
    code, out = as_user(RESEARCHER, "-n", RESEARCH, "create", "quota", "e2e-mine", "--hard=pods=1000")
    assert code != 0 and "resourcequotas research/e2e-mine belongs to serving" in out, out


def test_a_pod_beyond_the_lent_gpus_is_refused_and_created_once_the_gate_lends_more(
        as_user: Run, api: client.ApiClient) -> None:
    gate, core = KubeCluster(api), client.CoreV1Api(api)
    before = gate.gpu_quota(RESEARCH)

    def lend(gpus: int) -> None:
        gate.set_gpu_quota(RESEARCH, gpus)
        # The quota admits against its status, which kube-controller-manager writes from the spec.
        wait("the quota's status", lambda: (core.read_namespaced_resource_quota(GPU_QUOTA, RESEARCH).status.hard
                                            or {}).get("requests.nvidia.com/gpu") == str(gpus), timeout=60)

    try:
        lend(0)
        code, out = as_user(RESEARCHER, "create", "-f", "-", stdin=pod("e2e-gpu", gpus=4, **BEST_EFFORT))
        assert code != 0 and "exceeded quota: offhours-gpus" in out, out
        lend(4)
        code, out = as_user(RESEARCHER, "create", "-f", "-", stdin=pod("e2e-gpu", gpus=4, **BEST_EFFORT))
        assert code == 0, out
        wait("the pod within the loan to run", lambda: core.read_namespaced_pod("e2e-gpu", RESEARCH).status.phase
             == "Running", timeout=60)
        # The gate's read of the pool, on the real API server: the pod as the scheduler counts it.
        seat = next(s for s in gate.pool_seats([RESEARCH]) if s.name == "e2e-gpu")
        running = core.read_namespaced_pod("e2e-gpu", RESEARCH)
        assert (seat.gpus, seat.node, seat.uid, seat.terminating) == (4, running.spec.node_name, running.metadata.uid,
                                                                       False)
        # The read node by node (a cut-short read's fallback) and the pool's nodes by label, on the real server too.
        node = running.spec.node_name
        assert [s.uid for s in gate.node_seats(RESEARCH, node) if s.name == "e2e-gpu"] == [running.metadata.uid]
        assert gate.nodes_selected([("kubernetes.io/hostname", node)]) == [node]
        gate.delete_pod(RESEARCH, "e2e-gpu", "another-incarnation", 0)  # a UID precondition: not this pod
        assert core.read_namespaced_pod("e2e-gpu", RESEARCH).metadata.deletion_timestamp is None
    finally:
        as_user(RESEARCHER, "-n", RESEARCH, "delete", "pod", "e2e-gpu", "--grace-period=0", "--ignore-not-found",
                "--wait=false")
        gate.set_gpu_quota(RESEARCH, before if before is not None and before >= 0 else 0)


def _argo(cluster_env: dict[str, str], user: str, *args: str) -> tuple[int, str]:
    """The real argo CLI (built beside kubectl by the control plane's build) as `user`: (exit status, output)."""
    binary = Path(cluster_env["OFFHOURS_CLUSTER_BIN"]) / "argo"
    if not binary.exists():
        pytest.fail(f"no argo CLI at {binary}: make cluster-up builds it")
    out = subprocess.run([str(binary), "--kubeconfig", cluster_env["KUBECONFIG"], f"--as={user}", "-n", RESEARCH,
                          *args], capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


def failing(name: str) -> str:
    """A workflow that fails: its one pod runs 10 minutes (kwok), its deadline is 2 s."""
    return json.dumps({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                       "metadata": {"name": name, "namespace": RESEARCH},
                       "spec": {"entrypoint": "main", "podPriorityClassName": "offhours-best-effort",
                                "activeDeadlineSeconds": 2,
                                "podMetadata": {"annotations": {"offhours.io/e2e-run-for": "600s"}},
                                "templates": [{"name": "main", "container": {"image": "busybox"}}]}})


def test_argo_resume_of_a_parked_workflow_by_its_owner_is_refused_and_the_other_verbs_work(
        as_user: Run, cluster_env: dict[str, str], api: client.ApiClient) -> None:
    argo = client.CustomObjectsApi(api)

    def workflow(name: str) -> Any:
        return argo.get_namespaced_custom_object("argoproj.io", "v1alpha1", RESEARCH, "workflows", name)

    names = ["e2e-resume", "e2e-stop", "e2e-terminate", "e2e-delete", "e2e-retry"]
    try:
        for name in names[:-1]:
            assert as_user(RESEARCHER, "create", "-f", "-", stdin=parked(name))[0] == 0
        code, out = _argo(cluster_env, RESEARCHER, "resume", "e2e-resume")
        assert code != 0 and "is parked (spec.suspend: true): only the offhours gate resumes it" in out, out
        assert workflow("e2e-resume")["spec"].get("suspend") is True
        code, out = _argo(cluster_env, RESEARCHER, "stop", "e2e-stop")
        assert code == 0, out
        assert workflow("e2e-stop")["spec"].get("shutdown") == "Stop"
        code, out = _argo(cluster_env, RESEARCHER, "terminate", "e2e-terminate")
        assert code == 0, out
        assert workflow("e2e-terminate")["spec"].get("shutdown") == "Terminate"
        code, out = _argo(cluster_env, RESEARCHER, "delete", "e2e-delete")
        assert code == 0, out
        assert as_user(RESEARCHER, "create", "-f", "-", stdin=failing("e2e-retry"))[0] == 0
        wait("the workflow to fail", lambda: workflow("e2e-retry").get("status", {}).get("phase") in ("Failed", "Error"),
             timeout=90)
        code, out = _argo(cluster_env, RESEARCHER, "retry", "e2e-retry")
        assert code == 0, out
    finally:
        for name in names:
            as_user(RESEARCHER, "-n", RESEARCH, "delete", "workflow", name, "--ignore-not-found", "--wait=false")


def test_a_research_pod_that_ignores_sigterm_is_gone_when_its_grace_ends(as_user: Run, api: client.ApiClient) -> None:
    """The kwok stage for research pods: deleted, a pod stays (terminating, its GPUs held) until its grace ends."""
    core = client.CoreV1Api(api)
    doc = json.loads(pod("e2e-slow-exit", terminationGracePeriodSeconds=20, **BEST_EFFORT))
    doc["metadata"]["annotations"] = {"offhours.io/e2e-exit-after": "grace"}
    core.create_namespaced_pod(RESEARCH, doc)
    try:
        wait("the pod to run", lambda: core.read_namespaced_pod("e2e-slow-exit", RESEARCH).status.phase == "Running",
             timeout=60)
        core.delete_namespaced_pod("e2e-slow-exit", RESEARCH)
        left = core.read_namespaced_pod("e2e-slow-exit", RESEARCH)  # a 20 s grace: still there, terminating
        assert left.metadata.deletion_timestamp is not None and left.status.phase == "Running"

        def gone() -> bool:
            try:
                core.read_namespaced_pod("e2e-slow-exit", RESEARCH)
                return False
            except client.ApiException as err:
                return err.status == 404
        wait("the pod gone once its grace ended", gone, timeout=90)
    finally:
        as_user(RESEARCHER, "-n", RESEARCH, "delete", "pod", "e2e-slow-exit", "--grace-period=0", "--force",
                "--ignore-not-found", "--wait=false")


def test_the_gate_marks_a_serving_pods_deletion_cost_and_changes_nothing_else_of_it(api: client.ApiClient) -> None:
    """Through the gate's own code (KubeCluster.set_deletion_cost) with a token of its ServiceAccount: the mark goes
    through; a label or another annotation, which its `patch pods` would otherwise allow, is refused by name."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(SERVING, {"apiVersion": "v1", "kind": "Pod",
                                         "metadata": {"name": "e2e-replica", "namespace": SERVING,
                                                      "annotations": {"note": "kept"}},
                                         "spec": {"containers": [{"name": "vllm", "image": "busybox"}]}})
    try:
        token = core.create_namespaced_service_account_token("offhours-gate", SERVING, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))).status.token
        conf = client.Configuration()
        conf.host, conf.ssl_ca_cert = api.configuration.host, api.configuration.ssl_ca_cert
        conf.api_key = {"authorization": f"Bearer {token}"}
        as_gate = client.ApiClient(conf)
        assert KubeCluster(as_gate).set_deletion_cost(SERVING, "e2e-replica", -5)
        annotations = core.read_namespaced_pod("e2e-replica", SERVING).metadata.annotations
        assert annotations == {"note": "kept", "controller.kubernetes.io/pod-deletion-cost": "-5"}
        for patch, words in (({"metadata": {"labels": {"app": "moved"}}}, "its labels are not"),
                             ({"metadata": {"annotations": {"note": None}}}, "its other annotations are not")):
            with pytest.raises(client.ApiException) as refused:
                client.CoreV1Api(as_gate).patch_namespaced_pod("e2e-replica", SERVING, patch)
            assert ("pod serving/e2e-replica: the offhours gate writes only the controller.kubernetes.io/"
                    "pod-deletion-cost annotation" in refused.value.body and words in refused.value.body), refused.value
        assert KubeCluster(as_gate).set_deletion_cost(SERVING, "e2e-replica", None)
        pod = core.read_namespaced_pod("e2e-replica", SERVING).metadata
        assert pod.annotations == {"note": "kept"} and not pod.labels
    finally:
        core.delete_namespaced_pod("e2e-replica", SERVING, grace_period_seconds=0)


def _hook_pod(workflow: str, suffix: str) -> dict[str, Any]:
    """A pod shaped as Argo v4.0.5 creates a workflow's exit hook pod: pod names v2, its Workflow the controller."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{workflow}-{suffix}", "namespace": RESEARCH,
                         "labels": {"workflows.argoproj.io/workflow": workflow, "offhours.io/role": "exit-hook"},
                         "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                                              "name": workflow, "uid": "00000000-0000-0000-0000-000000000001",
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"serviceAccountName": "offhours-exit-hook", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox"}]}}


def test_only_argos_controller_creates_a_pod_running_as_the_exit_hook(as_user: Run) -> None:
    """The exit hook's token marks the workflow its pod is named for: who creates such a pod, under which name,
    is the API server's to refuse. An exit hook pod passes as Argo's controller (server dry run); as a researcher,
    or named for another workflow, it is refused; so are a Job, a Secret token and a TokenRequest that would run
    as or mint the exit hook's ServiceAccount. (A real workflow's exit hook runs and returns its GPUs under these
    policies in test_argo_submit_e2e.py.)"""
    hook = json.dumps(_hook_pod("e2e-hookcopy", "return-gpus-3141592653"))
    code, out = as_user(ARGO_CONTROLLER, "create", "--dry-run=server", "-f", "-", stdin=hook)
    assert code == 0, out
    code, out = as_user(RESEARCHER, "create", "--dry-run=server", "-f", "-", stdin=hook)
    assert code != 0 and "offhours-exit-hook-pods" in out and ("only Argo's workflow controller "
                                                               f"({ARGO_CONTROLLER}) creates pods running as it") in out, out
    # Workflow e2e-vic's template named tim-return-gpus: Argo would name its pod as workflow e2e-vic-tim's hook.
    other = json.dumps(_hook_pod("e2e-vic", "tim-return-gpus-77"))
    code, out = as_user(ARGO_CONTROLLER, "create", "--dry-run=server", "-f", "-", stdin=other)
    assert code != 0 and "its name ends as the exit hook pod of another workflow" in out, out
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "e2e-hook-job", "namespace": RESEARCH},
           "spec": {"template": {"spec": {"serviceAccountName": "offhours-exit-hook", "restartPolicy": "Never",
                                          "containers": [{"name": "main", "image": "busybox"}]}}}}
    code, out = as_user(RESEARCHER, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(job))
    assert code != 0 and "jobs e2e-hook-job: its pods would run as offhours-exit-hook" in out, out
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "e2e-hook-token", "namespace": RESEARCH,
                           "annotations": {"kubernetes.io/service-account.name": "offhours-exit-hook"}}}
    code, out = as_user(RESEARCHER, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(secret))
    assert code != 0 and "a long-lived token of offhours-exit-hook" in out, out
    code, out = as_user(RESEARCHER, "-n", RESEARCH, "create", "token", "offhours-exit-hook")
    assert code != 0 and "is issued to the kubelet of its own pods only" in out, out
    code, out = as_user(RESEARCHER, "-n", RESEARCH, "create", "token", "e2e-researcher")
    assert code == 0 and out.strip(), out  # a token of one's own account: not this policy's
