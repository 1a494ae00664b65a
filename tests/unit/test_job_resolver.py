"""The one resolver of a job name (cluster/resolve.py) over the in-memory cluster's modelled RBAC.

Class: a name resolved without asking whose it is (a lookup that acts on a job in a namespace where the
caller may not act, trusts a tenant-written submitter label, or picks one of several jobs of one name).
Mechanism: `resolve` is the only way from a name to a run, for every verb and the console; it keeps only the
runs of namespaces where an access review allows the verb's action, and refuses more than one.
Invariants (generated below), whatever runs, names, submitter labels and grants:
- a resolved run matches the name and lies in a namespace where the caller may do the action;
- no other run the caller may act on matches the name (else the answer is AmbiguousJob naming every one);
- NoSuchJob only when no run the caller may act on matches;
- the submitter labels never change the outcome (a forged creator label moves nothing).
"""

import argparse
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.cli import jobs as cli_jobs
from offhours.scripts.cluster.access import CANCEL_JOB, READ_JOBS, READ_LOGS, AccessUnknown, Action, SelfAccess
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.resolve import AmbiguousJob, NoSuchJob, Unresolved, matches, resolve
from offhours.scripts.names import ARGO_CREATOR_LABEL, ARGO_GROUP
from offhours.scripts.pool.model import build_pool
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, workflow


@dataclasses.dataclass(frozen=True)
class Copy:
    name: str
    user: str


@dataclasses.dataclass(frozen=True)
class Run:
    namespace: str
    run_id: str
    copies: tuple[Copy, ...]


NAMESPACES = ["team-a", "team-b", "team-c"]
NAMES = ["x", "y", "z", "train"]
ACTIONS = [READ_JOBS, CANCEL_JOB, READ_LOGS]


def researchers() -> MemoryCluster:
    """alice may act in team-a, bob in team-b; both read team-c (where neither may cancel)."""
    cluster = MemoryCluster()
    for user, ns in (("alice", "team-a"), ("bob", "team-b")):
        cluster.grant(user, ns, "workflows", ["get", "list", "patch", "create"], ARGO_GROUP)
        cluster.grant(user, ns, "pods", ["get"], "", "log")
    cluster.grant("group:researchers", "team-c", "workflows", ["get", "list"], ARGO_GROUP)
    return cluster


def wf(name: str, ns: str, run_id: str | None = None, creator: str = "") -> dict[str, Any]:
    w = workflow(name, "chat", 1, "admitted", "Running", run_id=run_id, labels={ARGO_CREATOR_LABEL: creator}
                 if creator else None)
    w["metadata"]["namespace"] = ns
    return w


def pool_of(*workflows: dict[str, Any]) -> Any:
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], list(workflows), SERVING,
                      NOW)


def test_a_forged_creator_label_does_not_make_another_namespaces_job_yours() -> None:
    """bob labels his own job as alice's: alice's lookup of it never touches it; bob's own name resolves his."""
    cluster = researchers()
    pool = pool_of(wf("train", "team-b", creator="alice"))
    with pytest.raises(NoSuchJob) as refused:
        resolve(pool.runs, "train", CANCEL_JOB, cluster.access_for("alice", ["researchers"]))
    assert "team-b" in str(refused.value) and "nothing was touched" in str(refused.value)
    assert resolve(pool.runs, "train", CANCEL_JOB, cluster.access_for("bob", ["researchers"])).namespace == "team-b"


def test_the_same_name_in_two_namespaces_resolves_to_the_one_the_caller_may_act_on() -> None:
    cluster = researchers()
    pool = pool_of(wf("train", "team-a"), wf("train", "team-b", creator="alice"))
    assert resolve(pool.runs, "train", CANCEL_JOB, cluster.access_for("alice")).namespace == "team-a"
    assert resolve(pool.runs, "train", CANCEL_JOB, cluster.access_for("bob")).namespace == "team-b"


def test_a_name_that_is_one_runs_workflow_and_another_runs_id_is_refused_naming_both() -> None:
    """bob names a workflow of his as alice's run id, in the namespace they share: neither is picked."""
    cluster = researchers()
    cluster.grant("bob", "team-a", "workflows", ["get", "list", "patch"], ARGO_GROUP)
    pool = pool_of(wf("train-1", "team-a", run_id="r1"), wf("r1", "team-a", run_id="r2", creator="bob"))
    with pytest.raises(AmbiguousJob) as refused:
        resolve(pool.runs, "r1", CANCEL_JOB, cluster.access_for("alice"))
    message = str(refused.value)
    assert "team-a/r1 (workflows train-1" in message and "team-a/r2 (workflows r1; submitter label: bob)" in message
    assert resolve(pool.runs, "train-1", CANCEL_JOB, cluster.access_for("alice")).run_id == "r1"


def test_reading_and_cancelling_are_asked_separately() -> None:
    """team-c: both may read (why, the job page), neither may cancel or read logs."""
    cluster = researchers()
    pool = pool_of(wf("shared", "team-c"))
    assert resolve(pool.runs, "shared", READ_JOBS, cluster.access_for("alice", ["researchers"])).namespace == "team-c"
    for action in (CANCEL_JOB, READ_LOGS):
        with pytest.raises(NoSuchJob):
            resolve(pool.runs, "shared", action, cluster.access_for("alice", ["researchers"]))


def test_an_access_review_without_an_answer_refuses_the_lookup() -> None:
    class Down:
        def may(self, namespace: str, action: Action) -> bool:
            raise AccessUnknown("the API server did not answer an access review (MaxRetryError)")

        def who(self) -> str:
            return "alice"

    pool = pool_of(wf("train", "team-a"))
    with pytest.raises(Unresolved, match="cannot tell whether alice may patch workflows.argoproj.io in namespace team-a"):
        resolve(pool.runs, "train", CANCEL_JOB, Down())


def _grants(draw: Any) -> MemoryCluster:
    cluster = MemoryCluster()
    for ns in NAMESPACES:
        verbs = draw(st.sets(st.sampled_from(["get", "list", "patch", "create"])))
        if verbs:
            cluster.grant("alice", ns, "workflows", verbs, ARGO_GROUP)
        if draw(st.booleans()):
            cluster.grant("alice", ns, "pods", ["get"], "", "log")
    return cluster


@st.composite
def worlds(draw: Any) -> tuple[list[Run], MemoryCluster, str, Action]:
    runs = []
    for _ in range(draw(st.integers(0, 8))):
        copies = tuple(Copy(draw(st.sampled_from(NAMES)), draw(st.sampled_from(["alice", "bob", ""])))
                       for _ in range(draw(st.integers(1, 3))))
        runs.append(Run(draw(st.sampled_from(NAMESPACES)), draw(st.sampled_from(NAMES)), copies))
    return runs, _grants(draw), draw(st.sampled_from(NAMES)), draw(st.sampled_from(ACTIONS))


def outcome(runs: list[Run], name: str, action: Action, access: Any) -> tuple[str, Any]:
    try:
        run = resolve(runs, name, action, access)
    except AmbiguousJob as err:
        return "ambiguous", str(err)
    except NoSuchJob:
        return "none", None
    return "run", (run.namespace, run.run_id)


@settings(max_examples=300, derandomize=True, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(worlds(), st.lists(st.sampled_from(["alice", "bob", "", "root"]), min_size=24, max_size=24))
def test_a_name_resolves_only_to_one_run_the_caller_may_act_on(world: Any, forged: list[str]) -> None:
    runs, cluster, name, action = world
    access = cluster.access_for("alice")
    mine = {(r.namespace, r.run_id) for r in matches(runs, name) if access.may(r.namespace, action)}
    kind, value = outcome(runs, name, action, access)
    if kind == "run":
        assert mine == {value}
    elif kind == "ambiguous":
        assert len(mine) > 1 and all(f"{ns}/{rid} (" in value for ns, rid in mine)
    else:
        assert not mine
    # The submitter labels, rewritten at will, change nothing.
    labels = iter(forged * 3)
    relabelled = [dataclasses.replace(r, copies=tuple(dataclasses.replace(c, user=next(labels)) for c in r.copies))
                  for r in runs]
    again = outcome(relabelled, name, action, access)
    assert again[0] == kind and (kind == "ambiguous" or again == (kind, value))


def test_cancel_by_the_cli_never_patches_a_job_the_caller_may_not_patch(monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    cluster = researchers()
    pool = pool_of(wf("train", "team-b", creator="alice"))
    patched: list[str] = []

    class Custom:
        def patch_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> None:
            patched.append(args[4])

    reader = argparse.Namespace(custom=Custom(), access=cluster.access_for("alice"), read=lambda **_: pool)
    monkeypatch.setattr(cli_jobs, "_reader", lambda args: reader)
    args = argparse.Namespace(name="train", yes=True, command="cancel", namespace="team-b", serving_namespace=None,
                              config=None)
    assert cli_jobs._guarded(cli_jobs._cmd_cancel)(args) == 1
    assert patched == []
    assert "alice may patch workflows.argoproj.io" in capsys.readouterr().err


def test_self_access_asks_the_api_server_again_after_its_answers_expire() -> None:
    """A long-lived console notices a removed RoleBinding: answers are kept `ttl` seconds of its own clock, no longer."""
    now = [0.0]
    asked: list[dict[str, Any]] = []
    allowed = [True]

    class Server:
        def call_api(self, path: str, method: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
            asked.append(body["spec"]["resourceAttributes"])
            return {"status": {"allowed": allowed[0]}}

    access = SelfAccess(Server(), ttl=60.0, clock=lambda: now[0])
    assert access.may("team-a", CANCEL_JOB) and access.may("team-a", CANCEL_JOB)
    assert asked == [{"namespace": "team-a", "verb": "patch", "group": ARGO_GROUP, "resource": "workflows"}]
    allowed[0], now[0] = False, 61.0
    assert not access.may("team-a", CANCEL_JOB) and len(asked) == 2
