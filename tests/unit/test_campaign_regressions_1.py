"""Failures the fault campaign (tests/support/campaign.py) found, replayed step by step."""

from tests.support.campaign import GateCampaign


def test_a_run_whose_job_ended_during_its_stop_succeeds_once_after_the_drain() -> None:
    """Found by CampaignInCI in the whole unit tier: a faulty-service job's work ends just as the gate writes to
    it, the gate's record of the service is corrupted (twice), tenants forge marks, the gate is killed; the drain
    then ran both the original run code-job3 and its parked copy code-job3-p1 to success. Must hold: every run
    succeeds at most once (the drain's no_work_lost_or_duplicated)."""
    state = GateCampaign()
    state.start(chat=405, code=1000)
    state.argo_verb(pick=766, service='code', verb='terminate')
    state.lease_taken_mid_tick(at=13, chat=5.0, code=20.0)
    state.tenant_writes_a_bad_value(pick=595, value=('annotations', 'offhours.io/priority', '99999'))
    state.load_source_raises(chat=60.0, code=5.0, error=ConnectionError('Prometheus unreachable'))
    state.hundreds_of_parked_jobs(count=130, rise=10.0, service='code')
    state.tenant_forges_the_admission_mark(other=131, pick=765)
    state.deployment_recreated(replicas=10)
    state.load_source_raises(chat=45.0, code=0.0, error=ConnectionError('Prometheus unreachable'))
    state.state_corrupted(text='')
    state.tenant_forges_the_admission_mark(other=208, pick=82)
    state.second_gate_ticks(chat=20.0, code=90.0)
    state.job_ends_during_the_gates_write(pick=233)
    state.api_error(error=('KeyError', KeyError('status')), times=3, verb='set-max')
    state.hpa_added(high=10, low=1, service='chat')
    state.tick(chat=10.0, code=20.0)
    state.submit(priority=0, replicas=3, service='chat')
    state.hundreds_of_parked_jobs(count=114, rise=0.0, service='chat')
    state.job_ends_during_the_gates_write(pick=396)
    state.job_ends_during_the_gates_write(pick=774)
    state.deployment_recreated(replicas=11)
    state.job_ends_during_the_gates_write(pick=70)
    state.state_corrupted(text='[]')
    state.submit(priority=2, replicas=1, service='chat')
    state.tick(chat=30.0, code=20.0)
    state.tenant_forges_the_admission_mark(other=75, pick=123)
    state.tenant_writes_a_bad_value(pick=149, value=('labels', 'offhours.io/state', 'returned'))
    state.job_ends_during_the_gates_write(pick=48)
    state.argo_verb(pick=39, service='code', verb='delete')
    state.job_ends(phase='Failed', pick=626, service='chat')
    state.tick(chat=90.0, code=90.0)
    state.gate_killed(at=3, chat=5.0, code=0.0)
    state.job_ends(phase='Succeeded', pick=138, service='chat')
    state.tick(chat=0.0, code=60.0)
    state.malformed_reading(kind='overflow')
    state.state_corrupted(text='[]')
    state.lease_api_error(chat=0.0, code=90.0, error=('ValueError', ValueError('unexpected answer from the API server')))
    state.argo_verb(pick=122, service='code', verb='resubmit')
    state.malformed_reading(kind='partial')
    state.teardown()
