"""One reading of a workflow's run identity: its run-id label and its run-id parameter, both tenant-written.

The steps write checkpoints under the parameter, the gate and every reader group by the label. Each case is
what a tenant (or Argo) can put on a workflow: the reading never raises, a workflow it cannot place in one
run is a named problem (never admitted), and the copies the gate makes always carry a valid run label.
"""

from typing import Any

import pytest

from offhours.cronworkflows.research_schedule import research_cron_workflow
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.cluster.workflow import (
    RunIdentity,
    build_parked_copy,
    elsewhere,
    parked_copy_name,
    run_identity,
    succeeded,
    workflow_job,
)
from offhours.scripts.names import ARGO_SCHEDULED_TIME_ANNOTATION, LABEL_RUN_ID
from offhours.scripts.policy.plan import Job
from offhours.workflows.render import manifests
from tests.support.templates import with_offhours_parts

SUBDOMAIN_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


def wf(label: Any = "run-1", params: list[Any] | None = None, annotations: dict[str, str] | None = None,
       name: str = "train") -> dict[str, Any]:
    labels = {"offhours.io/service": "chat", "offhours.io/replicas": "2", "offhours.io/state": "parked"}
    if label is not None:
        labels[LABEL_RUN_ID] = label
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": "research", "uid": f"u-{name}", "labels": labels,
                         "annotations": annotations or {}},
            "spec": {"suspend": True, "arguments": {"parameters": params if params is not None else []}},
            "status": {"phase": "Running"}}


def run_param(value: Any) -> dict[str, Any]:
    return {"name": "run-id", "value": value}


def test_label_and_parameter_that_agree_are_one_run() -> None:
    identity = run_identity(wf("run-1", [run_param("run-1")]))
    assert identity == RunIdentity("run-1", "run-1", "run-1") and identity.ids == ("run-1",)
    assert run_identity(wf("run-1")) == RunIdentity("run-1", "run-1")  # no parameter: the label alone
    assert run_identity(wf(None, [run_param("run-1")])) == RunIdentity("run-1", None, "run-1")
    assert run_identity(wf(None)) == RunIdentity(None)  # no run id at all: none, and no problem


def test_a_label_and_a_parameter_that_disagree_answer_to_both_and_are_a_problem() -> None:
    """The fault: labelled `decoy`, its steps write run-1's checkpoints: the gate counted it as decoy's run."""
    identity = run_identity(wf("decoy", [run_param("run-1")]))
    assert identity.run_id == "run-1"  # what its checkpoints are under
    assert identity.ids == ("run-1", "decoy")
    assert identity.problem == ("its run-id parameter 'run-1' and its label offhours.io/run-id='decoy' disagree: its "
                                "steps write the parameter's checkpoints, the gate reads the label")
    job = workflow_job(wf("decoy", [run_param("run-1")]))
    assert job is not None and job.run_id == "run-1" and job.problem == identity.problem == job.run_problem


@pytest.mark.parametrize(("param", "why"), [
    ({"name": "run-id", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}, "is a valueFrom"),
    ({"name": "run-id", "value": "run-1", "valueFrom": {"supplied": {}}}, "is a valueFrom"),
    (run_param("{{workflow.name}}"), "is an Argo expression"),
    (run_param("run-{{=sprig.randAlphaNum(5)}}"), "is an Argo expression"),
    (run_param(7), "has no text value"),
    ({"name": "run-id"}, "has no text value"),
    (run_param("Run_1"), "is not a run id"),
    (run_param("x" * 64), "is not a run id"),
    (run_param("run-1\n"), "is not a run id"),
])
def test_a_run_id_parameter_the_gate_cannot_know_is_a_problem(param: dict[str, Any], why: str) -> None:
    """The fault: a parameter whose value is only known when the workflow runs (or is none at all) writes checkpoints
    the gate cannot place: labelled run-1, it might be any run's second writer."""
    identity = run_identity(wf("run-1", [param]))
    assert identity.problem is not None and why in identity.problem, identity.problem
    assert identity.parameter is None and identity.run_id == "run-1" and identity.ids == ("run-1",)
    job = workflow_job(wf("run-1", [param]))
    assert job is not None and job.problem == identity.problem


def test_two_run_id_parameters_are_a_problem() -> None:
    """The fault: which of two `run-id` arguments Argo gives the steps is Argo's choice, not the gate's reading."""
    identity = run_identity(wf("run-1", [run_param("run-1"), run_param("other")]))
    assert identity.problem is not None and "2 times" in identity.problem


@pytest.mark.parametrize("hostile", [None, 5, ["run-1"], "", "x" * 10_000, "\x1b[31m", "²"])
def test_a_hostile_label_never_makes_the_reading_raise(hostile: Any) -> None:
    identity = run_identity(wf(hostile, [run_param("run-1")]))
    assert identity.parameter == "run-1" and identity.run_id == "run-1"
    assert (identity.problem is None) == (hostile is None)  # any label but the parameter's own value disagrees
    broken = wf("run-1")
    broken["spec"]["arguments"] = {"parameters": "run-1"}
    assert run_identity(broken) == RunIdentity("run-1", "run-1")
    broken["spec"] = ["not", "a", "spec"]
    assert run_identity(broken) == RunIdentity("run-1", "run-1")


def _scheduled_run(scheduled: str | None, label: str) -> dict[str, Any]:
    """A run as Argo's controller creates it from an `offhours schedule` CronWorkflow."""
    template = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
    cron = research_cron_workflow("eval-nightly", template, "0 21 * * *",
                                  {"service": "chat", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o",
                                   "checkpoint-uri": "s3://c"}, "research")
    run = wf(label, cron["spec"]["workflowSpec"]["arguments"]["parameters"],
             {ARGO_SCHEDULED_TIME_ANNOTATION: scheduled} if scheduled else {}, name="eval-nightly-1736769600")
    run["metadata"]["labels"].update(cron["spec"]["workflowMetadata"]["labels"], **{LABEL_RUN_ID: label})
    run["metadata"]["creationTimestamp"] = "2025-01-13T12:00:01Z"  # as it fires (the API server's clock)
    return run


def test_a_scheduled_runs_run_id_is_resolved_as_argo_resolves_it() -> None:
    """What survives: a nightly run's argument is an Argo expression of its scheduled time, which the gate reads too."""
    run = _scheduled_run("2025-01-13T12:00:00Z", "eval-nightly-20250113-1200")
    assert run_identity(run) == RunIdentity("eval-nightly-20250113-1200", "eval-nightly-20250113-1200",
                                            "eval-nightly-20250113-1200")
    job = workflow_job(run)
    assert job is not None and job.problem is None and job.checkpoint_prefix == "s3://c/eval-nightly-20250113-1200"
    # Before Argo's controller set the night's label (it starts as the prefix): held until it does.
    early = run_identity(_scheduled_run("2025-01-13T12:00:00Z", "eval-nightly"))
    assert early.problem is not None and "disagree" in early.problem
    assert early.ids == ("eval-nightly-20250113-1200", "eval-nightly")
    # Without the annotation Argo resolves it from, the night is unknown; a hostile one makes no run id.
    missing = run_identity(_scheduled_run(None, "eval-nightly-20250113-1200"))
    assert missing.problem is not None and ARGO_SCHEDULED_TIME_ANNOTATION in missing.problem
    hostile = run_identity(_scheduled_run("Tomorrow at nine", "eval-nightly-20250113-1200"))
    assert hostile.problem is not None and hostile.parameter is None


def test_the_copy_carries_the_run_its_steps_write_as_its_label() -> None:
    """A copy of a workflow relabelled with another run id is labelled with the run its steps write: consistent."""
    copy = build_parked_copy(wf("decoy", [run_param("run-1")]))
    assert copy["metadata"]["labels"][LABEL_RUN_ID] == "run-1" and run_identity(copy).problem is None
    assert build_parked_copy(wf(None, [run_param("run-1")]))["metadata"]["labels"][LABEL_RUN_ID] == "run-1"


@pytest.mark.parametrize("value", ["x" * 100, "{{workflow.name}}", "Run_1", "run 1"])
def test_a_copy_never_carries_a_run_label_the_api_server_refuses(value: str) -> None:
    """The fault: an original without a run-id label whose parameter is no label value: its copy was labelled with
    it, the API server refused the create, and so the stop that follows the park never happened."""
    copy = build_parked_copy(wf(None, [run_param(value)]))
    assert LABEL_RUN_ID not in copy["metadata"]["labels"]
    kept = build_parked_copy(wf("run-1", [run_param(value)]))  # the original's own (valid) label is kept
    assert kept["metadata"]["labels"][LABEL_RUN_ID] == "run-1"


@pytest.mark.parametrize("first", ["a.-b", "a..b", "-a", "a-", "a_b", "A", "a" * 254, ".a"])
def test_a_copys_name_is_a_dns_subdomain_whatever_the_first_name_annotation_says(first: str) -> None:
    """The fault: the copy's name comes from a tenant-written annotation (the run's first name); a value the
    loose check took ("a.-b") is refused by the API server, and the park fails with the stop behind it."""
    import re

    original = wf("run-1", [run_param("run-1")], {"offhours.io/first-name": first}, name="train")
    copy = build_parked_copy(original)
    name = copy["metadata"]["name"]
    assert re.fullmatch(rf"{SUBDOMAIN_PART}(\.{SUBDOMAIN_PART})*", name) and len(name) <= 253, name
    assert name == "train-p1"  # none of them is an object name: the copy is named after the original
    generated = elsewhere(copy)["metadata"]["generateName"]
    assert re.fullmatch(rf"({SUBDOMAIN_PART}\.)*{SUBDOMAIN_PART}-", generated), generated


def test_a_run_id_with_a_trailing_newline_is_no_run_id() -> None:
    """The fault: `$` in a regular expression also matches before a final newline: "run-1\n" read as a run id, a
    label value no API server takes (a copy labelled with it is never created, nor its original stopped)."""
    assert run_identity(wf(None, [run_param("run-1\n")])).parameter is None
    assert run_identity(wf("run-1\n")).label is None
    template = with_offhours_parts({"metadata": {"name": "offhours-job"}, "spec": {"arguments": {"parameters": [
        {"name": "service", "value": "chat"}, {"name": "run-id"}]}}})
    with pytest.raises(SubmitError, match="run-id must be a DNS label"):
        parked_workflow(template, {"run-id": "run-1\n"}, "research")


def test_a_cut_name_still_ends_in_a_letter_or_digit() -> None:
    assert parked_copy_name("a" * 229 + ".b" * 20, 3) == "a" * 229 + "-p3"
    assert parked_copy_name("a" * 229 + "-b" * 20, 3) == "a" * 229 + "-p3"


def test_success_is_the_root_nodes_word_not_the_phase() -> None:
    """The fault: no status subresource: a tenant writes `status.phase: Succeeded` on any workflow it can edit."""
    run = wf("run-1")
    run["status"] = {"phase": "Succeeded"}
    assert succeeded(run) is False  # ended, but no success Argo wrote
    run["status"]["nodes"] = {"train": {"phase": "Succeeded"}}
    assert succeeded(run) is False  # a root node without the time it finished is none Argo wrote
    run["status"]["nodes"]["train"]["finishedAt"] = "2025-01-01T00:00:00Z"
    assert succeeded(run) is True
    running = wf("run-1")
    running["status"] = {"phase": "Running", "nodes": {"train": {"phase": "Succeeded", "finishedAt": "t"},
                                                       "x": {"name": "train.onExit", "phase": "Running"}}}
    assert succeeded(running) is True  # its work is done, its exit handler runs
    offloaded = wf("run-1")
    offloaded["status"] = {"phase": "Succeeded", "offloadNodeStatusVersion": "v1"}
    assert succeeded(offloaded) is False  # Argo's database has its nodes: not read, never "done"


def test_the_memory_cluster_finishes_a_workflow_as_argo_does() -> None:
    cluster = MemoryCluster()
    cluster.add_workflow("research", "train", "chat", 2)
    cluster.finish("research", "train", "Succeeded")
    assert succeeded(cluster.workflows[("research", "train")]) is True
    cluster.add_workflow("research", "other", "chat", 2)
    cluster.finish("research", "other", "Failed")
    assert succeeded(cluster.workflows[("research", "other")]) is False


def test_a_copy_carries_its_stops_token_and_never_its_originals() -> None:
    original = wf("run-1", [run_param("run-1")], {"offhours.io/copy-token": "the-originals-own"})
    assert build_parked_copy(original, "t0k3n")["metadata"]["annotations"]["offhours.io/copy-token"] == "t0k3n"
    assert "offhours.io/copy-token" not in build_parked_copy(original)["metadata"]["annotations"]
    job = workflow_job(build_parked_copy(original, "t0k3n") | {"status": {"phase": "Running"}})
    assert isinstance(job, Job) and job.copy_token == "t0k3n"
