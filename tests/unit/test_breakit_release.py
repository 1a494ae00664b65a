"""Break-it probes of a removed service's release (records its copies before parking) and its retries."""

import pytest

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.gate.controller import Gate

from .test_argo_verbs import running
from .test_gate_controller import World, config
from .test_removed_service_jobs import _chat_running, _remove_chat, _sneak


def _failing_stops(w: World, n: int) -> None:
    real, fails = w.cluster.stop, [ClusterError("HTTP 500 Internal Server Error (retries exhausted)")] * n

    def stop(namespace: str, job: object) -> None:
        if fails:
            raise fails.pop()
        real(namespace, job)  # type: ignore[arg-type]

    w.cluster.stop = stop  # type: ignore[method-assign]


def _readd_chat(w: World) -> None:
    w.gate = Gate(config(), w.cluster, w.source, clock=lambda: w.now, out=w.log, monotonic=lambda: w.now)


def _work_of(w: World, name: str) -> list[str]:
    """The workflows carrying `name`'s work (itself and its copies, transitively)."""
    uids = {w.wf(name)["metadata"]["uid"]}
    out = [name]
    grew = True
    while grew:
        grew = False
        for (_, n), wf in sorted(w.cluster.workflows.items()):
            if n not in out and wf["metadata"]["labels"].get("offhours.io/copy-of") in uids:
                out.append(n)
                uids.add(wf["metadata"]["uid"])
                grew = True
    return out


def _running_of(w: World, name: str) -> list[str]:
    return [n for n in _work_of(w, name) if running(w.wf(n)) and w.wf(n)["spec"].get("shutdown") != "Stop"]


@pytest.mark.parametrize("who", ["job-0", "sneak"])
def test_readded_between_tries_runs_no_job_twice(who: str) -> None:
    """Probe (held): a release whose stop failed after the copy, then the service configured again."""
    w = World()
    w.lend(1)
    if who == "sneak":
        _sneak(w, "sneak", run_id=None)
    _failing_stops(w, 1)
    _remove_chat(w)
    w.tick()
    assert "could not give back what was lent of chat" in w.log.getvalue()
    _readd_chat(w)
    for i in range(20):
        w.tick()
        assert len(_running_of(w, who)) <= 1, (i, _running_of(w, who), w.log.getvalue())
    assert len(_work_of(w, who)) <= 2, (_work_of(w, who), w.log.getvalue())


@pytest.mark.parametrize("fail_at", ["write_state", "park_copy", "stop", "delete_state"])
@pytest.mark.parametrize("times", [1, 3])
def test_release_interrupted_at_each_write_makes_one_copy(fail_at: str, times: int) -> None:
    """Probe (held): each write of the release failing, once or three times: serving whole, one copy each."""
    w = World()
    w.lend(2)
    real = getattr(w.cluster, fail_at)
    left = [times]

    def flaky(*a: object, **k: object) -> object:
        if left[0] > 0:
            left[0] -= 1
            raise ClusterError("HTTP 500")
        return real(*a, **k)

    _remove_chat(w)
    setattr(w.cluster, fail_at, flaky)
    for _ in range(times + 2):
        w.tick()
        assert w.replicas() == 8
    assert _chat_running(w) == [], w.log.getvalue()
    for job in ("job-0", "job-1"):
        assert len(_work_of(w, job)) == 2, (_work_of(w, job), w.log.getvalue())
    assert ("serving", "chat") not in w.cluster.states


@pytest.mark.parametrize("run_id", [None, "job-0", "own", "unlabelled"])
@pytest.mark.parametrize("record", ["readable", "unreadable"])
def test_a_sneak_whose_stop_fails_gets_one_copy(run_id: str | None, record: str) -> None:
    """Fault: chat removed while a workflow runs under it without admission and with no run id (no label, no
    parameter), its stop failing twice: with no run, its stop was never recorded (no token), and each try of the
    release made it another copy (sneak-p1, then two under generated names: its work three times)."""
    w = World()
    w.lend(1)
    _sneak(w, "sneak", run_id=None if run_id == "unlabelled" else run_id)
    if run_id == "unlabelled":
        w.wf("sneak")["metadata"]["labels"].pop("offhours.io/run-id")
    if record == "unreadable":
        w.cluster.states[("serving", "chat")] = "{not json"
    real, fails = w.cluster.stop, [2]

    def stop(namespace: str, job: object) -> None:
        if getattr(job, "name", "") == "sneak" and fails[0] > 0:
            fails[0] -= 1
            raise ClusterError("HTTP 500")
        real(namespace, job)  # type: ignore[arg-type]

    w.cluster.stop = stop  # type: ignore[method-assign]
    _remove_chat(w)
    for _ in range(4):
        w.tick()
    assert _chat_running(w) == [], w.log.getvalue()
    assert len(_work_of(w, "sneak")) == 2, (_work_of(w, "sneak"), w.log.getvalue())
    assert len(_work_of(w, "job-0")) == 2, (_work_of(w, "job-0"), w.log.getvalue())


def test_a_flood_of_sneaks_does_not_cost_an_admitted_job_its_token() -> None:
    """Fault: a tenant runs more workflows without admission under chat than the record keeps stops of (512),
    and the stop of the admitted job-0 fails once: job-0's stop, recorded first, was pushed out of the record by
    the tenant's, so its copy got no token; the next try copied job-0 again (job-0-p1-0020d: its work twice)."""
    from offhours.scripts.policy.record import MAX_COPIES

    w = World()
    w.lend(1)
    for i in range(MAX_COPIES + 8):
        _sneak(w, f"zz-sneak-{i:04d}", run_id=f"s{i}")
    real, fails = w.cluster.stop, [1]

    def stop(namespace: str, job: object) -> None:
        if getattr(job, "name", "") == "job-0" and fails[0] > 0:
            fails[0] -= 1
            raise ClusterError("HTTP 500")
        real(namespace, job)  # type: ignore[arg-type]

    w.cluster.stop = stop  # type: ignore[method-assign]
    _remove_chat(w)
    for _ in range(4):
        w.tick()
    assert len(_work_of(w, "job-0")) == 2, (_work_of(w, "job-0"), w.log.getvalue()[-3000:])
    assert _chat_running(w) == [] and ("serving", "chat") not in w.cluster.states, w.log.getvalue()[-3000:]
    assert all(len(_work_of(w, f"zz-sneak-{i:04d}")) == 2 for i in range(MAX_COPIES + 8))
    assert w.replicas() == 8


@pytest.mark.parametrize("fail_at", ["write_state", "park_copy", "stop"])
@pytest.mark.parametrize("nth", [2, 3])
@pytest.mark.parametrize("lost", [False, True])
def test_release_failing_at_a_later_write_or_losing_its_answer_makes_one_copy(fail_at: str, nth: int,
                                                                              lost: bool) -> None:
    """Probe (held): the nth call of a write fails, before it lands or after (its answer lost)."""
    w = World()
    w.lend(2)
    _sneak(w, "sneak", run_id=None)
    real, calls = getattr(w.cluster, fail_at), [0]

    def flaky(*a: object, **k: object) -> object:
        calls[0] += 1
        if calls[0] == nth:
            if lost:
                real(*a, **k)
            raise ClusterError("HTTP 500")
        return real(*a, **k)

    _remove_chat(w)
    setattr(w.cluster, fail_at, flaky)
    for _ in range(4):
        w.tick()
        assert w.replicas() == 8
    assert _chat_running(w) == [], w.log.getvalue()
    for job in ("job-0", "job-1", "sneak"):
        assert len(_work_of(w, job)) == 2, (_work_of(w, job), w.log.getvalue())
    assert ("serving", "chat") not in w.cluster.states


@pytest.mark.parametrize("record", ["readable", "unreadable", "missing"])
def test_a_release_without_its_deployment_whose_stops_fail_makes_one_copy(record: str) -> None:
    """Probe (held): the Deployment gone, the record readable, unreadable or gone, the stops failing twice."""
    w = World()
    w.lend(2)
    w.cluster.deployments.pop(("serving", "chat"))
    if record == "unreadable":
        w.cluster.states[("serving", "chat")] = "{not json"
    _failing_stops(w, 2)
    _remove_chat(w)
    if record == "missing":
        real, first = w.cluster.read_state, [True]

        def read_state(ns: str, svc: str) -> str | None:  # deleted by someone between the listing and the read
            if svc == "chat" and first[0]:
                first[0] = False
                return None
            return real(ns, svc)

        w.cluster.read_state = read_state  # type: ignore[method-assign]
    for _ in range(4):
        w.tick()
    assert _chat_running(w) == [], w.log.getvalue()
    for job in ("job-0", "job-1"):
        assert len(_work_of(w, job)) == 2, (_work_of(w, job), w.log.getvalue())


def test_a_removed_service_whose_record_is_unreadable_and_deployment_renamed_gets_its_serving_back() -> None:
    """Fault: chat's Deployment is chat-vllm, the record unreadable, chat removed: the release finds no
    Deployment under the service's name, stops the jobs, deletes the record, and chat-vllm stayed at 6 of its
    8 replicas for ever. Fixed by the gate's ledger (what it lowered, keyed by the object, not the record)."""
    from dataclasses import replace

    w = World()
    w.cluster.deployments.pop(("serving", "chat"))
    dep = w.cluster.add_deployment("serving", "chat", 8, name="chat-vllm")
    cfg = config()
    cfg = replace(cfg, services=type(cfg.services)(replace(p, deployment="chat-vllm") if p.name == "chat" else p
                                                    for p in cfg.services))
    w.gate = Gate(cfg, w.cluster, w.source, clock=lambda: w.now, out=w.log, monotonic=lambda: w.now)
    w.park("job-0", replicas=2)
    for _ in range(7):
        w.tick()
    assert dep.replicas == 6
    w.cluster.states[("serving", "chat")] = "{not json"
    _remove_chat(w)
    for _ in range(3):
        w.tick()
    assert dep.replicas == 8, w.log.getvalue()
