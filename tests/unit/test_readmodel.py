import json
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.pool.model import RESUMED_WAITING, build_pool, computed_reason, parse_time
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, lending_pool, state_configmap, workflow


def pool():
    return build_pool(*lending_pool(), SERVING, NOW)


def test_services_read_from_the_state_configmap_and_the_deployment():
    p = pool()
    chat = p.service("chat")
    assert (chat.baseline, chat.replicas, chat.ready, chat.required, chat.lent, chat.lendable) == (10, 8, 8, 6, 2, 2)
    assert (chat.gpus_per_replica, chat.gpus_lent, chat.deployment, chat.problem) == (4, 8, "vllm-chat", None)
    assert chat.decided_at == NOW - timedelta(minutes=1)
    code = p.service("code")
    assert code.problem == "state.json is not JSON (Expecting property name enclosed in double quotes)"
    assert (code.baseline, code.replicas, code.ready, code.gpus_per_replica) == (None, 3, 2, 2)
    assert [s.name for s in p.services] == ["chat", "code"]


def test_states_of_runs():
    p = pool()
    assert {r.run_id: r.state for r in p.runs} == {
        "train-a": "running", "sweep-b": "waiting", "eval-c": "waiting", "rl-d": RESUMED_WAITING, "sft-e": "succeeded"}


def test_the_gate_reason_wins_and_a_missing_one_is_computed_from_the_state():
    p = pool()
    b, c, d = p.find("sweep-b").current, p.find("eval-c").current, p.find("rl-d-x7-p1").current
    assert (b.position, b.reason_computed) == (1, True)
    assert b.reason == "waiting: chat needs 6 of its 10 replicas and lends 2 already; 2 are lendable and this job needs 4; " \
                       "first in the queue"
    assert (c.position, c.reason, c.reason_computed) == (2, "waiting: the lending window opens at 20:00", False)
    assert (d.position, d.reason_computed) == (3, True)
    assert d.reason.endswith("2 are lendable and this job needs 2; third in the queue behind jobs that are admitted first")


def test_a_run_gathers_its_parked_copies():
    run = pool().find("rl-d-x7")
    assert run.run_id == "rl-d" and pool().find("rl-d").copies == run.copies
    assert [c.name for c in run.copies] == ["rl-d-x7", "rl-d-x7-p1"]
    assert (run.name, run.preemptions, run.gpu_seconds) == ("rl-d-x7-p1", 1, 3600.0)
    assert run.last_checkpoint == NOW - timedelta(minutes=45)
    assert [(e.what, e.workflow, round((NOW - e.at).total_seconds() / 60)) for e in run.timeline()] == [
        ("submitted", "rl-d-x7", 300), ("admitted", "rl-d-x7", 290), ("started", "rl-d-x7", 290),
        ("checkpoint", "rl-d-x7", 45),
        ("preempted: its replicas went back to serving", "rl-d-x7", 31),
        ("finished (Failed)", "rl-d-x7", 30), ("parked again as rl-d-x7-p1 after preemption 1", "rl-d-x7-p1", 30)]


def test_reason_when_the_service_can_lend_enough():
    cms, deps, _ = lending_pool()
    p = build_pool(cms, deps, [workflow("small", "chat", 2, "parked", suspend=True)], SERVING, NOW)
    assert p.runs[0].current.reason == ("next: chat has 2 lendable replica(s) and this job needs 2; "
                                        "the gate admits it on its next tick")


def test_reason_without_a_decision_and_with_failed_ticks():
    state = {"deploymentUID": "uid-chat", "baseline": 10, "failedTicks": 3}
    p = build_pool([state_configmap("chat", state)], [deployment("chat", 10, 10)],
                   [workflow("w", "chat", 1, "parked", suspend=True)], SERVING, NOW)
    assert p.runs[0].current.reason == ("waiting: the gate has had no usable load data for chat for 3 tick(s), "
                                        "so it lends nothing; first in the queue")
    lone = computed_reason(p.runs[0].current, None, 2)
    assert lone == "waiting: no service chat is known to the gate; second in the queue"


def test_empty_cluster():
    p = build_pool([], [], [], SERVING, NOW)
    assert (p.services, p.runs, p.problems) == ((), (), ())


def test_deployment_without_state_configmap_is_shown_with_its_problem():
    p = build_pool([], [deployment("chat", 5, 4)], [], SERVING, NOW)
    (chat,) = p.services
    assert (chat.replicas, chat.ready, chat.baseline) == (5, 4, None)
    assert chat.problem == "no ConfigMap offhours-state-chat: the gate has not recorded this service yet"


def test_parse_time_accepts_rfc3339_and_epoch_and_rejects_the_rest():
    assert parse_time("2025-03-14T12:00:00Z") == NOW
    assert parse_time(str(NOW.timestamp())) == NOW
    assert [parse_time(v) for v in ("", "soon", None, True, "1e400")] == [None] * 5


junk = st.one_of(st.text(max_size=12), st.integers(-5, 10**6).map(str), st.sampled_from(["", "NaN", "-1", "1e9", "∞"]))


@settings(max_examples=150, deadline=None)
@given(labels=st.dictionaries(st.sampled_from(["offhours.io/replicas", "offhours.io/state", "offhours.io/run-id",
                                               "offhours.io/copy-of"]), junk),
       annotations=st.dictionaries(st.sampled_from(["offhours.io/admitted-at", "offhours.io/preemptions",
                                                    "offhours.io/queue-position", "offhours.io/last-checkpoint",
                                                    "offhours.io/gpu-seconds", "offhours.io/priority",
                                                    "offhours.io/waiting-reason"]), junk),
       state=st.one_of(st.text(max_size=20), st.just(json.dumps(chat_state())),
                       st.builds(lambda b, r: json.dumps({"baseline": b, "lastDecision": {"required": r}}), junk, junk)))
def test_tenant_junk_never_breaks_the_pool(labels, annotations, state):
    """Whatever a tenant writes on its workflow, and whatever the state holds, the pool is built; each
    waiting job has a non-empty reason and a position >= 1, or 0 (outside the queue) only beside a
    reason the gate wrote; and no count is negative."""
    wf = workflow("w", "chat", 1, "parked", suspend=True)
    wf["metadata"]["labels"].update(labels)
    wf["metadata"]["labels"]["offhours.io/service"] = "chat"
    wf["metadata"]["annotations"] = annotations
    p = build_pool([state_configmap("chat", state)], [deployment("chat", 3, 3)], [wf], SERVING, NOW)
    for job in p.jobs:
        assert job.replicas >= 0 and job.preemptions >= 0 and (job.gpu_seconds or 0) >= 0
        if job.state == "waiting":
            assert job.position is not None and job.reason
            assert job.position >= 1 or (job.position == 0 and not job.reason_computed)
    for s in p.services:
        assert s.lendable is None or s.lendable >= 0


def test_a_copy_outside_the_queue_keeps_the_gate_position_zero_and_its_reason():
    """The gate writes position 0 for a parked copy whose original has not stopped yet: no queue place is shown."""
    cms, deps, _ = lending_pool()
    copy = workflow("train-p1", "chat", 2, "parked", suspend=True)
    copy["metadata"]["annotations"] = {"offhours.io/queue-position": "0",
                                       "offhours.io/waiting-reason": "waiting: its original train has not stopped yet"}
    other = workflow("eval", "chat", 2, "parked", suspend=True)
    p = build_pool(cms, deps, [copy, other], SERVING, NOW)
    held, queued = p.find("train-p1").current, p.find("eval").current
    assert (held.position, held.reason, held.reason_computed) == (0, "waiting: its original train has not stopped yet", False)
    assert (queued.position, queued.reason_computed) == (1, True)  # the only job in the queue
