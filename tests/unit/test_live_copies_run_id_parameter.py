"""The live check before a new workflow of a run: a live workflow whose run-id parameter names the run counts."""

from __future__ import annotations

import pytest

from offhours.scripts.pool.views import live_copies
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import pool_of


@pytest.mark.xfail(strict=True, reason="a run's identity is read label first; the steps write checkpoints under "
                                       "the parameter, so the live check needs every id a workflow answers to")
def test_a_live_workflow_whose_run_id_parameter_names_the_run_is_a_live_copy() -> None:
    """Fault: a live workflow labelled with another run id but whose run-id parameter is run-1 is not a live copy of run-1."""
    wf = workflow("hand-1", "chat", 1, "admitted", "Running", created=60, started=50, run_id="decoy",
                  annotations={"offhours.io/admitted-at": ts(50)})
    wf["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": "run-1"}]}
    # Its steps write `<checkpoint-uri>/run-1/<step>`: a second live workflow of run-1 would write the same stores.
    assert live_copies(pool_of(wf), "run-1") == ["hand-1"]
