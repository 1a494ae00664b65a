"""Minimal examples of what the fault campaign (tests/support/campaign.py) found, one regression test each."""

from tests.support.campaign import CLEAN, GateCampaign


def check(state: GateCampaign) -> None:
    state.a_fault_in_one_service_never_changes_another()
    state.gate_owns_only_its_delta()
    state.never_more_lent_than_baseline_minus_min()
    state.no_work_lost_or_duplicated()
    state.only_the_gates_own_admissions_count()
    state.serving_within_reaction_time()


def test_a_workflow_made_in_the_twin_after_a_resync_gets_a_uid_of_its_own() -> None:
    """The harness's fault, not the gate's: after a fault that hits the whole gate process the twin cluster
    takes a copy of the main cluster's chat workflows, UIDs and all, but kept its own UID counter, which lags
    the main cluster's (the main one also made the faulty service's workflows). The next chat workflow made
    in the twin (a run submitted again by hand) then got the UID of a copied one, so the gate's record of the
    adopted copy named another workflow and the twin refused to admit that one: chat alone diverged from chat
    with a faulty neighbour though the gate treated both alike. What must hold: every workflow in either
    cluster has a UID of its own, and chat's outcome is the same in both clusters at every step."""
    state = GateCampaign()
    state.start(chat=0, code=0)
    check(state)
    state.load_source_raises(chat=0.0, code=0.0, error=ConnectionError("Prometheus unreachable"))
    check(state)
    for _ in range(2):  # low load long enough that the gate lends at once when the copy appears
        state.tick(chat=0.0, code=0.0)
        check(state)
    state.argo_verb(pick=0, service=CLEAN, verb="submit")
    check(state)
    for _ in range(3):
        state.tick(chat=0.0, code=0.0)
        check(state)
        for w in (state.main, state.twin):
            uids = [wf["metadata"]["uid"] for wf in w.workflows()]
            assert len(uids) == len(set(uids)), f"workflows sharing a UID: {sorted(uids)}"
    state.teardown()
