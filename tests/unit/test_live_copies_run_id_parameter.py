"""The live check before a new workflow of a run: a live workflow whose run-id parameter names the run counts."""

from __future__ import annotations

from offhours.scripts.pool.views import live_copies
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import pool_of


def test_a_live_workflow_whose_run_id_parameter_names_the_run_is_a_live_copy() -> None:
    """Fault: a live workflow labelled with another run id but whose run-id parameter is run-1 is not a live copy of run-1."""
    wf = workflow("hand-1", "chat", 1, "admitted", "Running", created=60, started=50, run_id="decoy",
                  annotations={"offhours.io/admitted-at": ts(50)})
    wf["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": "run-1"}]}
    # Its steps write `<checkpoint-uri>/run-1/<step>`: a second live workflow of run-1 would write the same stores.
    assert live_copies(pool_of(wf), "run-1") == ["hand-1"]


def test_a_live_workflow_is_a_live_copy_of_its_label_too_and_the_run_its_steps_write_groups_it() -> None:
    """Either id it answers to refuses a second workflow; its run (and what `offhours jobs` groups it under) is the
    one its checkpoints are under."""
    wf = workflow("hand-1", "chat", 1, "parked", created=60, suspend=True, run_id="decoy")
    wf["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": "run-1"}]}
    pool = pool_of(wf)
    assert live_copies(pool, "decoy") == live_copies(pool, "run-1") == ["hand-1"]
    assert [r.run_id for r in pool.runs] == ["run-1"]


def test_the_read_model_never_promises_an_admission_the_gate_refuses() -> None:
    """The fault: with room to lend and no reason written by the gate, the read model said "the gate admits it on
    its next tick" of a workflow whose run id the gate cannot trust (it never admits it)."""
    wf = workflow("hand-1", "chat", 1, "parked", created=60, suspend=True, run_id="decoy")
    wf["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": "run-1"}]}
    [job] = pool_of(wf).jobs
    assert job.reason == ("not admitted: its run-id parameter 'run-1' and its label offhours.io/run-id='decoy' "
                          "disagree: its steps write the parameter's checkpoints, the gate reads the label")
    good = workflow("ok-1", "chat", 1, "parked", created=60, suspend=True)
    [fine] = pool_of(good).jobs
    assert fine.reason is not None and not fine.reason.startswith("not admitted")
