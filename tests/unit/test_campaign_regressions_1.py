"""Failures the fault campaign (tests/support/campaign.py) found, replayed step by step."""

from offhours.scripts.names import ANNOTATION_WAITING_REASON
from tests.support.campaign import NS, GateCampaign


def test_a_copy_of_a_job_that_succeeded_during_its_stop_is_not_run_once_the_gates_record_is_lost() -> None:
    """Found by CampaignInCI in the whole unit tier. A new Deployment makes the gate stop code-job4 and park a copy
    of it; the job's work ends (Succeeded) just as the stop arrives. Then the gate's record of the service is
    overwritten with something unreadable ("[]"), so the gate no longer knows the copy as its own. The drain
    admitted the copy, and the run succeeded twice. Must hold: the run succeeds once (the original), its copy is
    never run (it waits, saying why) and every invariant holds through the drain."""
    state = GateCampaign()
    state.start(chat=405, code=1000)
    state.tick(chat=10.0, code=20.0)
    state.hundreds_of_parked_jobs(count=114, rise=0.0, service="chat")
    state.deployment_recreated(replicas=11)
    state.job_ends_during_the_gates_write(pick=70)
    state.tick(chat=30.0, code=20.0)
    cluster = state.main.cluster
    original, copy = cluster.workflows[(NS, "code-job4")], cluster.workflows[(NS, "code-job4-p1")]
    assert original["spec"].get("shutdown") == "Stop" and original["status"]["phase"] == "Succeeded"
    assert copy["spec"].get("suspend")
    state.state_corrupted(text="[]")
    state.teardown()
    copy = cluster.workflows[(NS, "code-job4-p1")]
    assert copy["spec"].get("suspend") and "code-job4-p1" not in cluster.admitted_by_gate
    assert "its original code-job4 has succeeded" in copy["metadata"]["annotations"].get(ANNOTATION_WAITING_REASON, "")
