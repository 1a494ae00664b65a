"""`offhours rerun RUN` finds RUN through the one resolver (cluster/resolve.py), as cancel, why and logs do.

Class: a verb with a lookup of its own (rerun listed workflows by the run label in one namespace and read the
first one's record, whoever's it was). Mechanism: `rerun.resolved_record` goes from a name to a run only
through `jobs.find_run` -> `resolve`, asking whether the caller may create workflows in the run's namespace
(RESUBMIT_JOB), and reads the record of that run alone (its workflows', else its store's).
Invariants (generated below), whatever runs, submitter labels and grants:
- a record is returned only for the one run the name matches in a namespace where the caller may create
  workflows, and it is that run's record (its parameters), never another's;
- otherwise the rerun is refused (CommandError) and no store is read;
- the submitter labels never change the outcome (a forged creator label moves nothing).
"""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.jobs import CommandError
from offhours.scripts.cli.namespaces import Namespaces
from offhours.scripts.cli.rerun import RerunError, resolved_record
from offhours.scripts.cluster.access import RESUBMIT_JOB
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.names import ANNOTATION_PROVENANCE, ARGO_CREATOR_LABEL, ARGO_GROUP
from offhours.scripts.pool.model import RunView, build_pool
from offhours.scripts.runtime.provenance import build, encode
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, workflow

WHERE = Namespaces("team-a", SERVING, "test")
NAMESPACES = ["team-a", "team-b", "team-c"]


def record_text(run: str, marker: str) -> str:
    """A record of `run` whose `input-uri` says which workflow carried it (`marker`)."""
    values = {"run-id": run, "image": "ghcr.io/lab/t:1", "input-uri": f"s3://in/{marker}"}
    kinds = {"run-id": "run-id", "image": "image", "input-uri": "optional-uri"}
    return encode(build(run, {"metadata": {"name": "offhours-job", "resourceVersion": "7"}}, values, kinds, "0.1.0"))


def wf(name: str, ns: str, run_id: str, creator: str = "", record: bool = True, created: float = 60) -> dict[str, Any]:
    w = workflow(name, "chat", 1, "admitted", "Running", run_id=run_id, created=created,
                 annotations={ANNOTATION_PROVENANCE: record_text(run_id, f"{ns}-{name}")} if record else None,
                 labels={ARGO_CREATOR_LABEL: creator} if creator else None)
    w["metadata"]["namespace"] = ns
    return w


def pool_of(*workflows: dict[str, Any]) -> Any:
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], list(workflows), SERVING,
                      NOW)


def researchers() -> MemoryCluster:
    """alice may create workflows in team-a, bob in team-b; both may only read team-c."""
    cluster = MemoryCluster()
    for user, ns in (("alice", "team-a"), ("bob", "team-b")):
        cluster.grant(user, ns, "workflows", ["get", "list", "patch", "create"], ARGO_GROUP)
    cluster.grant("group:researchers", "team-c", "workflows", ["get", "list"], ARGO_GROUP)
    return cluster


class Store:
    """The store reader `rerun` is handed: records which runs' stores were read."""

    def __init__(self, text: str | None = None, problem: str | None = None) -> None:
        self.text, self.problem, self.read = text, problem, []

    def __call__(self, run: RunView) -> tuple[str | None, str | None]:
        self.read.append((run.namespace, run.run_id))
        return self.text, self.problem


def test_a_forged_creator_label_does_not_let_alice_rerun_bobs_run() -> None:
    cluster = researchers()
    pool = pool_of(wf("train", "team-b", "train", creator="alice"))
    store = Store()
    with pytest.raises(CommandError) as refused:
        resolved_record(pool, "train", WHERE, cluster.access_for("alice", ["researchers"]), store)
    assert "alice may create workflows.argoproj.io" in str(refused.value) and "team-b" in str(refused.value)
    assert store.read == []
    record = resolved_record(pool, "train", WHERE, cluster.access_for("bob"), store)
    assert record.parameters["input-uri"] == "s3://in/team-b-train"


def test_one_run_id_in_two_namespaces_reruns_the_one_the_caller_may_create_beside() -> None:
    cluster = researchers()
    pool = pool_of(wf("train-x", "team-a", "train"), wf("train-y", "team-b", "train", creator="alice"))
    assert resolved_record(pool, "train", WHERE, cluster.access_for("alice")).parameters["input-uri"] == \
        "s3://in/team-a-train-x"
    assert resolved_record(pool, "train", WHERE, cluster.access_for("bob")).parameters["input-uri"] == \
        "s3://in/team-b-train-y"


def test_a_namespace_where_the_caller_may_only_read_is_no_place_to_rerun_in() -> None:
    pool = pool_of(wf("shared", "team-c", "shared"))
    with pytest.raises(CommandError, match="may create workflows.argoproj.io"):
        resolved_record(pool, "shared", WHERE, researchers().access_for("alice", ["researchers"]))


def test_the_store_is_read_only_when_the_first_workflow_carries_no_record_and_only_as_the_runs() -> None:
    cluster = researchers()
    bare = pool_of(wf("train", "team-a", "train", record=False))
    store = Store(record_text("train", "store"))
    assert resolved_record(bare, "train", WHERE, cluster.access_for("alice"), store).parameters["input-uri"] == \
        "s3://in/store"
    assert store.read == [("team-a", "train")]
    carried = Store(record_text("train", "store"))
    resolved_record(pool_of(wf("train", "team-a", "train")), "train", WHERE, cluster.access_for("alice"), carried)
    assert carried.read == []  # the workflow's own record: the store is not asked
    with pytest.raises(RerunError, match="is the record of run \"other\".*read from its checkpoint store"):
        resolved_record(bare, "train", WHERE, cluster.access_for("alice"), Store(record_text("other", "x")))
    with pytest.raises(RerunError, match=r"could not be read \(s3://lab/c/train: reading failed\): .*nothing was created"):
        resolved_record(bare, "train", WHERE, cluster.access_for("alice"), Store(None, "s3://lab/c/train: reading failed"))
    with pytest.raises(RerunError, match="nor in its checkpoint store"):
        resolved_record(bare, "train", WHERE, cluster.access_for("alice"), Store())


@st.composite
def worlds(draw: Any) -> tuple[list[tuple[str, str, str]], MemoryCluster, str]:
    """Runs (namespace, run id, workflow name), alice's grants in each namespace, and the name she reruns."""
    runs = draw(st.lists(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(["x", "y", "train"]),
                                   st.sampled_from(["x", "y", "train", "w1", "w2"])), max_size=6,
                         unique_by=lambda r: (r[0], r[2])))
    cluster = MemoryCluster()
    for ns in NAMESPACES:
        verbs = draw(st.sets(st.sampled_from(["get", "list", "patch", "create"])))
        if verbs:
            cluster.grant("alice", ns, "workflows", verbs, ARGO_GROUP)
    return runs, cluster, draw(st.sampled_from(["x", "y", "train", "w1"]))


def outcome(pool: Any, name: str, access: Any) -> tuple[str, Any, list[Any]]:
    store = Store()
    try:
        record = resolved_record(pool, name, WHERE, access, store)
    except CommandError:
        return "refused", None, store.read
    return "record", record.parameters["input-uri"], store.read


@settings(max_examples=150, derandomize=True, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(worlds(), st.lists(st.sampled_from(["alice", "bob", "", "root"]), min_size=6, max_size=6))
def test_a_rerun_reads_only_the_record_of_the_one_run_the_caller_may_create_beside(world: Any,
                                                                                    forged: list[str]) -> None:
    runs, cluster, name = world
    access = cluster.access_for("alice")
    # Each run's workflows are made at distinct times, so the run's first workflow is well defined.
    pool = pool_of(*(wf(w, ns, rid, created=60 + i) for i, (ns, rid, w) in enumerate(runs)))
    mine = {(r.namespace, r.run_id) for r in pool.runs
            if (r.run_id == name or any(c.name == name for c in r.copies)) and access.may(r.namespace, RESUBMIT_JOB)}
    kind, value, read = outcome(pool, name, access)
    assert read == []  # every workflow carries its record: no store is read
    if kind == "record":
        (ns, rid), = mine
        run = next(r for r in pool.runs if (r.namespace, r.run_id) == (ns, rid))
        assert value == f"s3://in/{ns}-{run.copies[0].name}"  # that run's first workflow's record, no other's
    else:
        assert len(mine) != 1
    # The submitter labels, rewritten at will, change nothing.
    relabelled = pool_of(*(wf(w, ns, rid, creator=forged[i], created=60 + i) for i, (ns, rid, w) in enumerate(runs)))
    assert outcome(relabelled, name, access)[:2] == (kind, value)

