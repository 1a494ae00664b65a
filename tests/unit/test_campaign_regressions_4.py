"""Minimal examples of what the fault campaign (tests/support/campaign.py) found, one regression test each."""

from offhours.scripts.cluster.base import ClusterError
from tests.support.campaign import GateCampaign
from tests.unit.test_campaign_regressions_2 import check


def test_a_removed_service_whose_stops_fail_parks_each_running_job_once() -> None:
    """Found by CampaignInCI in the whole unit tier. A reclaim of code parked code-job3 (copy code-job3-p1) and
    its stop failed (HTTP 500); code was then removed from the configuration. Giving back a removed service
    stops and parks again what still runs of it, but parked it knowing neither the run's lineage nor the stop's
    token: code-job3-p1 was taken for a stranger's workflow of that name and another copy made under a
    generated name, and again on the next try (the stop kept failing): one stopped workflow, three copies,
    its work run three times. What must hold: every workflow the gate stops has exactly one parked copy,
    however many tries its release takes."""
    state = GateCampaign()
    state.start(chat=360, code=456)
    check(state)
    state.load_source_raises(chat=0.0, code=0.0, error=ConnectionError('Prometheus unreachable'))
    check(state)
    state.job_ends_during_the_gates_write(pick=759)
    check(state)
    state.deployment_recreated(replicas=12)
    check(state)
    state.deployment_recreated(replicas=11)
    check(state)
    state.deployment_recreated(replicas=5)
    check(state)
    state.deployment_recreated(replicas=4)
    check(state)
    state.api_error(error=('500', ClusterError('HTTP 500 Internal Server Error (retries exhausted)')),
                    times=3, verb='stop')
    check(state)
    state.tick(chat=20.0, code=30.0)
    check(state)
    state.job_ends_during_the_gates_write(pick=0)
    check(state)
    state.service_removed_from_the_config(chat=0.0, code=30.0, ticks=2)
    check(state)
    state.job_ends_during_the_gates_write(pick=690)
    check(state)
    state.service_removed_from_the_config(chat=45.0, code=20.0, ticks=2)
    check(state)
    state.tick(chat=10.0, code=45.0)
    check(state)
    state.job_ends(phase='Succeeded', pick=3, service='chat')
    check(state)
    state.owner_scales(replicas=3, service='code')
    check(state)
    state.owner_scales(replicas=11, service='code')
    check(state)
    state.tick(chat=10.0, code=20.0)
    check(state)
    state.hundreds_of_parked_jobs(count=229, rise=0.0, service='chat')
    check(state)
    state.hundreds_of_parked_jobs(count=118, rise=90.0, service='chat')
    check(state)
    state.job_ends_during_the_gates_write(pick=415)
    check(state)
    state.load_source_raises(chat=30.0, code=5.0, error=ValueError('result is a list'))
    check(state)
    state.tick(chat=90.0, code=0.0)
    check(state)
    state.tick(chat=30.0, code=10.0)
    check(state)
    state.hpa_added(high=9, low=2, service='code')
    check(state)
    state.hpa_added(high=4, low=3, service='code')
    check(state)
    state.service_removed_from_the_config(chat=60.0, code=60.0, ticks=3)
    check(state)
    state.teardown()
