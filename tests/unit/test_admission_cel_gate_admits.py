"""The only-the-gate-admits policy's CEL, evaluated (cel-python) on every update of a parked workflow's suspend/shutdown.

Argo runs a workflow's pods unless spec.suspend is true or spec.shutdown is `Stop`/`Terminate` (its
ShutdownStrategy.ShouldExecute: any other value, the empty string included, executes). The property: an update
by anyone but the gate never takes a parked workflow that runs nothing to one whose pods Argo would run.
"""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.names import LABEL_STATE, POLICY_GATE_ADMITS, STATE_PARKED
from tests.unit.test_admission_policies import rendered

celpy = pytest.importorskip("celpy")

ABSENT = object()
SUSPEND = st.sampled_from([ABSENT, True, False])
SHUTDOWN = st.sampled_from([ABSENT, "", "Stop", "Terminate", "stop", "Pause"])


def _validations() -> list[Any]:
    policy = next(d for d in rendered().values()
                  if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == POLICY_GATE_ADMITS)
    env = celpy.Environment()
    return [env.program(env.compile(v["expression"])) for v in policy["spec"]["validations"]]


PROGRAMS = _validations()


def _workflow(suspend: Any, shutdown: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if suspend is not ABSENT:
        spec["suspend"] = suspend
    if shutdown is not ABSENT:
        spec["shutdown"] = shutdown
    return {"metadata": {"name": "w", "labels": {LABEL_STATE: STATE_PARKED}}, "spec": spec}


def _allowed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    activation = {"object": celpy.json_to_cel(new), "oldObject": celpy.json_to_cel(old)}
    return all(bool(p.evaluate(activation)) for p in PROGRAMS)


def _argo_runs(wf: dict[str, Any]) -> bool:
    spec = wf["spec"]
    return spec.get("suspend") is not True and spec.get("shutdown") not in ("Stop", "Terminate")


@given(SUSPEND, SHUTDOWN, SUSPEND, SHUTDOWN)
def test_no_update_but_the_gates_makes_a_parked_workflow_run(old_suspend: Any, old_shutdown: Any, new_suspend: Any,
                                                              new_shutdown: Any) -> None:
    old, new = _workflow(old_suspend, old_shutdown), _workflow(new_suspend, new_shutdown)
    if not _argo_runs(old) and _argo_runs(new):
        assert not _allowed(old, new), (old["spec"], new["spec"])


def test_a_stop_of_a_parked_workflow_and_a_relabel_of_a_stopped_one_are_allowed() -> None:
    parked, stopped = _workflow(True, ABSENT), _workflow(False, "Stop")
    assert _allowed(parked, stopped)  # offhours cancel
    assert _allowed(stopped, _workflow(ABSENT, "Terminate"))
    assert _allowed(stopped, stopped)


def test_a_stop_cleared_to_the_empty_string_is_refused() -> None:
    assert not _allowed(_workflow(False, "Stop"), _workflow(False, ""))
