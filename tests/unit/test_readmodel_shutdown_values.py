"""What a person sees of a workflow's spec.shutdown is what Argo does with it: only `Stop` and `Terminate` stop it
(Argo's ShutdownStrategy executes pods for any other value). A tenant's other value never shows a running job as
cancelled or stopping, nor hides it from cancel."""

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.schedule import run_state
from offhours.scripts.pool.model import build_pool
from offhours.scripts.pool.views import cancellable
from tests.support.pool_fixture import NOW, SERVING, workflow

NOT_A_STOP = st.sampled_from(["stop", "Pause", "terminate", " Stop", "x"])
STATES = st.sampled_from([("admitted", "Running"), ("admitted", ""), ("", "Running"), ("admitted", "Failed")])


def _state(shutdown: str | None, label: str, phase: str) -> tuple[str, bool]:
    pool = build_pool([], [], [workflow("w", "chat", 2, label, phase=phase, shutdown=shutdown)], SERVING, NOW)
    run = pool.runs[0]
    return run.state, bool(cancellable(run))


@given(NOT_A_STOP, STATES)
def test_a_shutdown_argo_does_not_stop_on_reads_as_none(value: str, state: tuple[str, str]) -> None:
    assert _state(value, *state) == _state(None, *state)
    wf = workflow("w", "chat", 2, state[0], phase=state[1], shutdown=value)
    assert run_state(wf) == run_state(workflow("w", "chat", 2, state[0], phase=state[1]))
