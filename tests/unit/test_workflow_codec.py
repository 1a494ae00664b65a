"""The Argo Workflow codec: one reading and writing of Workflow objects, shared by the Kubernetes and in-memory clusters."""

import ast
from pathlib import Path
from typing import Any

import pytest

from offhours.scripts.cluster import kube, memory, parked, workflow
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.workflow import (
    build_parked_copy,
    exit_seconds_text,
    is_own_copy,
    measured_exit_seconds,
    parked_copy_name,
    workflow_job,
)
from offhours.scripts.names import ARGO_API_VERSION
from offhours.scripts.policy.plan import Job
from tests.support.templates import with_offhours_parts

CLUSTER = Path(workflow.__file__).parent
SCRIPTS = CLUSTER.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return names | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


def assigned_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    targets = [t for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
    return {e.id for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(e, ast.Name)}


# -- one codec -------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ["kube.py", "workflow.py", "errors.py"])
def test_the_adapter_the_codec_and_the_error_translation_import_no_cluster_implementation(module: str) -> None:
    imports = imported_modules(CLUSTER / module)
    assert not imports & {"offhours.scripts.cluster.memory", "offhours.scripts.cluster.kube"}


def test_both_clusters_read_and_write_workflows_through_the_same_codec() -> None:
    assert kube.workflow_job is memory.workflow_job is workflow_job
    assert kube.build_parked_copy is memory.build_parked_copy is build_parked_copy
    assert kube.is_own_copy is memory.is_own_copy is is_own_copy and kube.elsewhere is memory.elsewhere
    assert kube.exit_seconds_text is memory.exit_seconds_text is exit_seconds_text


@pytest.mark.parametrize("path", ["cluster/kube.py", "cluster/parked.py", "cluster/memory.py", "cluster/workflow.py",
                                  "pool/reader.py"])
def test_argos_group_and_version_are_defined_once(path: str) -> None:
    assert not assigned_names(SCRIPTS / path) & {"GROUP", "VERSION", "ARGO_GROUP", "ARGO_VERSION"}
    assert {"ARGO_GROUP", "ARGO_VERSION"} <= assigned_names(SCRIPTS / "names.py")


def test_a_submitted_workflow_and_a_parked_copy_carry_the_same_api_version() -> None:
    template = with_offhours_parts({"metadata": {"name": "offhours-job"}, "spec": {"arguments": {"parameters": [
        {"name": "service", "value": "chat"}, {"name": "replicas", "value": "1"}, {"name": "run-id", "value": "r1"}]}}})
    submitted = parked.parked_workflow(template, {}, "research")
    assert submitted["apiVersion"] == ARGO_API_VERSION
    del submitted["apiVersion"]  # an object read without one: the copy still names Argo's group and version
    submitted["metadata"].update(name="r1-abcde", uid="u0")
    assert build_parked_copy(submitted)["apiVersion"] == ARGO_API_VERSION


# -- reading a workflow --------------------------------------------------------------------------------
def stopped_workflow() -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {
            "name": "train", "namespace": "research", "uid": "u-train", "creationTimestamp": "2024-05-01T10:00:00Z",
            "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "2", "offhours.io/state": "admitted",
                       "offhours.io/managed": "true", "workflows.argoproj.io/phase": "Running"},
            "annotations": {"offhours.io/priority": "5", "offhours.io/last-checkpoint": "1714558000",
                            "offhours.io/admitted-at": "2024-05-01T10:01:00Z", "offhours.io/borrowed-from": "dep-uid",
                            "offhours.io/preempted-at": "2024-05-01T11:00:00Z",
                            "offhours.io/returned-at": "2024-05-01T11:00:45Z", "offhours.io/gpu-seconds": "7000",
                            "offhours.io/queue-position": "3", "offhours.io/waiting-reason": "busy",
                            "team": "nlp"},
        },
        "spec": {"workflowTemplateRef": {"name": "offhours-job"}, "shutdown": "Stop",
                 "arguments": {"parameters": [{"name": "run-id", "value": "sweep-1"},
                                              {"name": "checkpoint-uri", "value": "s3://lab/ckpt/"},
                                              {"name": "termination-grace-seconds", "value": "90"}]}},
        "status": {"phase": "Running", "startedAt": "2024-05-01T10:01:05Z"},
    }


def test_a_running_admitted_workflow_reads_as_its_job() -> None:
    wf = stopped_workflow()
    del wf["spec"]["shutdown"]
    assert workflow_job(wf) == Job(
        name="train", service="chat", replicas=2, state="admitted", priority=5, created=1714557600.0,
        progress_at=1714558000.0, started=1714557665.0, checkpoint_prefix="s3://lab/ckpt/sweep-1", uid="u-train",
        borrowed_from="dep-uid", waiting_reason="busy", queue_position=3, exit_seconds=90.0, exit_learnt=False,
        grace_parameter=90.0,
        run_id="sweep-1", template="offhours-job", template_refs=("offhours-job",),
        arguments=("run-id", "checkpoint-uri", "termination-grace-seconds"))
    assert workflow_job(wf, "code") is None


def test_a_stopped_finished_or_foreign_workflow_is_no_job() -> None:
    assert workflow_job(stopped_workflow()) is None
    wf = stopped_workflow()
    del wf["spec"]["shutdown"]
    wf["status"]["phase"] = "Succeeded"
    assert workflow_job(wf) is None
    # Labelled returned, only its exit handler running: listed all the same (the gate's record says whether it is).
    wf["status"] = {"phase": "Running", "nodes": {"n": {"name": "train.onExit"}}}
    wf["metadata"]["labels"]["offhours.io/state"] = "returned"
    job = workflow_job(wf)
    assert job is not None and job.returned and job.finishing and job.state == "unmanaged"


@pytest.mark.parametrize(("replicas", "problem"), [
    ("3", None), ("0", "label offhours.io/replicas='0' is not a positive whole number of replicas"),
    ("12345", "label offhours.io/replicas='12345' is not a positive whole number of replicas"),
    ("-1", "label offhours.io/replicas='-1' is not a positive whole number of replicas"),
])
def test_a_replica_count_the_gate_cannot_trust_is_the_jobs_problem(replicas: str, problem: str | None) -> None:
    job = workflow_job({"metadata": {"name": "a", "labels": {"offhours.io/replicas": replicas}}, "spec": {"suspend": True}})
    assert job is not None and job.state == "parked" and job.problem == problem


@pytest.mark.parametrize(("created", "seconds"), [(12.5, 12.5), ("2024-05-01T10:00:00Z", 1714557600.0), ("100", 100.0),
                                                  ("nan", 0.0), (float("inf"), 0.0), (True, 0.0), ("soon", 0.0), (None, 0.0)])
def test_tenant_written_times_are_read_defensively(created: Any, seconds: float) -> None:
    job = workflow_job({"metadata": {"name": "a", "creationTimestamp": created, "labels": {"offhours.io/replicas": "1"}}})
    assert job is not None and job.created == seconds


@pytest.mark.parametrize(("priority", "read"), [("7", 7), ("-3", -3), ("x", 0), ("1000001", 0), (None, 0)])
def test_a_priority_is_a_bounded_whole_number_else_zero(priority: str | None, read: int) -> None:
    annotations = {"offhours.io/priority": priority} if priority is not None else {}
    job = workflow_job({"metadata": {"name": "a", "labels": {"offhours.io/replicas": "1"}, "annotations": annotations}})
    assert job is not None and job.priority == read


# -- exit times ------------------------------------------------------------------------------------
def test_the_measured_exit_time_is_preempted_to_returned_up_to_a_day() -> None:
    assert measured_exit_seconds(stopped_workflow()) == 45.0
    wf = stopped_workflow()
    wf["metadata"]["annotations"]["offhours.io/returned-at"] = "2024-05-01T10:59:00Z"
    assert measured_exit_seconds(wf) is None
    wf["metadata"]["annotations"]["offhours.io/returned-at"] = "2024-05-02T11:00:01Z"
    assert measured_exit_seconds(wf) is None
    del wf["metadata"]["annotations"]["offhours.io/returned-at"]
    assert measured_exit_seconds(wf) is None
    assert measured_exit_seconds({"metadata": "junk"}) is None


@pytest.mark.parametrize(("seconds", "text"), [(44.6, "45"), (0.4, "0"), (-3.0, "0"), (120.0, "120")])
def test_an_exit_time_is_written_in_whole_seconds(seconds: float, text: str) -> None:
    assert exit_seconds_text(seconds) == text


# -- the parked copy -------------------------------------------------------------------------------
def test_a_parked_copy_keeps_what_defines_the_job_and_drops_the_old_runs_records() -> None:
    assert build_parked_copy(stopped_workflow()) == {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {
            "name": "train-p1", "namespace": "research",
            "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "2", "offhours.io/state": "parked",
                       "offhours.io/managed": "true", "offhours.io/copy-of": "u-train", "offhours.io/run-id": "sweep-1"},
            "annotations": {"offhours.io/priority": "5", "offhours.io/last-checkpoint": "1714558000", "team": "nlp",
                            "offhours.io/preemptions": "1", "offhours.io/parked-from": "train",
                            "offhours.io/first-name": "train"},
        },
        "spec": {"workflowTemplateRef": {"name": "offhours-job"}, "suspend": True,
                 "arguments": {"parameters": [{"name": "run-id", "value": "sweep-1"},
                                              {"name": "checkpoint-uri", "value": "s3://lab/ckpt/"},
                                              {"name": "termination-grace-seconds", "value": "90"}]}},
    }


def test_a_copy_of_a_copy_counts_up_and_keeps_its_runs_first_name() -> None:
    first = build_parked_copy(stopped_workflow())
    first["metadata"]["uid"] = "u-p1"
    first["metadata"]["annotations"]["offhours.io/preemptions"] = "junk"
    second = build_parked_copy(first)
    assert (second["metadata"]["name"], second["metadata"]["annotations"]["offhours.io/preemptions"],
            second["metadata"]["annotations"]["offhours.io/parked-from"], second["metadata"]["labels"]["offhours.io/copy-of"]
            ) == ("train-p1", "1", "train-p1", "u-p1")
    assert parked_copy_name("x" * 300, 2) == "x" * 230 + "-p2"


def test_the_copy_leaves_its_original_untouched() -> None:
    original = stopped_workflow()
    build_parked_copy(original)
    assert original == stopped_workflow()


def test_only_a_copy_the_gate_made_of_the_original_is_its_copy() -> None:
    """The copy-of label is anyone's to write: a copy is the gate's only by a UID the gate recorded making."""
    original = stopped_workflow()
    copy = build_parked_copy(original)
    copy["metadata"]["uid"] = "u-copy"
    assert is_own_copy(copy, original, {"u-copy"})
    assert not is_own_copy(copy, original, ())  # the same labels, a UID the gate never made: a decoy
    assert not is_own_copy({**copy, "metadata": {**copy["metadata"], "labels": {}}}, original, {"u-copy"})
    assert not is_own_copy(copy, {"metadata": {"name": "train"}}, {"u-copy"})  # an original without a UID owns nothing


def test_the_fake_parks_exactly_the_codecs_copy() -> None:
    cluster = MemoryCluster()
    cluster.workflows[("research", "train")] = stopped_workflow()
    cluster.clock = 500.0
    job = Job("train", "chat", 2, "admitted")
    made = cluster.park_copy("research", job)
    assert made.name == "train-p1"
    stored = dict(cluster.workflows[("research", "train-p1")])
    meta = dict(stored.pop("metadata"))
    assert meta.pop("creationTimestamp") == 500.0 and meta.pop("uid") == made.uid
    assert {**stored, "metadata": meta} == build_parked_copy(stopped_workflow())
    assert cluster.park_copy("research", job, {made.uid}) == made  # again: its own copy is there, success
    # Without the gate's record of it, what holds the name is not taken for the copy: a new one, elsewhere.
    other = cluster.park_copy("research", job)
    assert other.name.startswith("train-p1-") and other.uid != made.uid
