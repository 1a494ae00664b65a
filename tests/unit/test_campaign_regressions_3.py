"""Minimal examples of what the fault campaign (tests/support/campaign.py) found, one regression test each."""

from offhours.scripts.cluster.base import ClusterError
from tests.support.campaign import GateCampaign
from tests.unit.test_campaign_regressions_2 import check


def test_a_job_ending_mid_tick_adds_its_exit_hooks_write_to_no_count_of_the_gates() -> None:
    """The harness's fault, not the gate's: a job that ends during one of the gate's writes runs its exit hook
    there and then, and the hook's own annotation (returned-at, state) was recorded among the gate's calls of
    the tick. With hundreds of parked jobs the gate wrote exactly its budget of 100 waiting reasons, and the
    hook's write made it look like 101. What must hold: the waiting-reason writes the gate itself makes in a
    tick stay within its budget, whatever else writes to the workflows meanwhile."""
    state = GateCampaign()
    state.start(chat=167, code=300)
    check(state)
    state.load_source_raises(chat=0.0, code=0.0, error=ConnectionError('Prometheus unreachable'))
    check(state)
    state.job_ends_during_the_gates_write(pick=0)
    check(state)
    state.api_error(error=('timeout', ClusterError('read timed out after 10 s (retries exhausted)')), times=1,
                    verb='annotate-workflow')
    check(state)
    state.hundreds_of_parked_jobs(count=117, rise=30.0, service='code')
    check(state)
    state.lease_taken_mid_tick(at=23, chat=90.0, code=0.0)
    check(state)
    state.argo_verb(pick=256, service='code', verb='delete')
    check(state)
    state.lease_taken_mid_tick(at=32, chat=60.0, code=0.0)
    check(state)
    state.gate_killed(at=9, chat=10.0, code=5.0)
    check(state)
    state.second_gate_holds_the_lease(ticks=1)
    check(state)
    state.hundreds_of_parked_jobs(count=134, rise=30.0, service='chat')
    check(state)
    state.tenant_forges_the_admission_mark(other=0, pick=781)
    check(state)
    state.lease_taken_mid_tick(at=39, chat=60.0, code=10.0)
    check(state)
    state.job_ends_during_the_gates_write(pick=769)
    check(state)
    state.job_ends_during_the_gates_write(pick=758)
    check(state)
    state.api_error(error=('KeyError', KeyError('status')), times=1, verb='get-autoscaler')
    check(state)
    state.second_gate_holds_the_lease(ticks=2)
    check(state)
    state.load_source_raises(chat=5.0, code=10.0, error=ValueError('result is a list'))
    check(state)
    state.lease_api_error(chat=0.0, code=0.0, error=('500', ClusterError('HTTP 500 Internal Server Error (retries exhausted)')))
    check(state)
    state.tenant_writes_a_bad_value(pick=716, value=('annotations', 'offhours.io/priority', 'abc'))
    check(state)
    state.tenant_forges_the_admission_mark(other=645, pick=225)
    check(state)
    state.api_error(error=('timeout', ClusterError('read timed out after 10 s (retries exhausted)')), times=2,
                    verb='write-state')
    check(state)
    state.argo_verb(pick=28, service='chat', verb='resume')
    check(state)
    state.hundreds_of_parked_jobs(count=242, rise=60.0, service='chat')
    check(state)
    state.teardown()
