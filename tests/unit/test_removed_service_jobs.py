"""A service removed from the gate configuration: nothing of its research side keeps serving's GPUs.

The gate gives a removed service back what its record says it lent, stopping and parking again the jobs it
counts as lent, then forgets the service. What it did not count (a workflow running without admission, its
`admitted` label and `borrowed-from` mark a tenant's copy) it left running: no tick of that service ever comes
again to stop it, so it kept its GPUs for as long as it liked. With the record unreadable, the marks were the only
evidence; with the Deployment not found under the service's name, nothing at all was stopped.
"""

from dataclasses import replace

import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.names import ANNOTATION_BORROWED_FROM, EVENT_SERVICE_RELEASED, STATE_ADMITTED

from .test_argo_verbs import running
from .test_gate_controller import World, config

ONLY_CODE = {"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
             "metrics": {"source": "direct", "maxAgeSeconds": 180},
             "services": {"code": {"capacity": {"requestsPerSecond": 10}}}}


def _remove_chat(w: World) -> None:
    w.gate = Gate(parse_config(ONLY_CODE), w.cluster, w.source, clock=lambda: w.now, out=w.log,
                  monotonic=lambda: w.now)


def _sneak(w: World, name: str, run_id: str | None = None) -> None:
    """A workflow of chat running without admission, labelled admitted with the Deployment's mark copied on it."""
    w.park(name, replicas=2, state=STATE_ADMITTED, run_id=run_id)
    w.wf(name)["spec"].pop("suspend", None)
    w.wf(name)["metadata"]["annotations"][ANNOTATION_BORROWED_FROM] = w.cluster.deployments[("serving", "chat")].uid
    w.wf(name)["status"]["nodes"] = {f"{name}-1": {"name": f"{name}[0].train", "type": "Pod", "phase": "Running"}}


def _chat_running(w: World) -> list[str]:
    return sorted(n for (_, n), wf in w.cluster.workflows.items()
                  if wf["metadata"]["labels"].get("offhours.io/service") == "chat" and running(wf))


@pytest.mark.parametrize("record", ["readable", "unreadable"])
@pytest.mark.parametrize("run", ["its own run", "the admitted job's run"])
def test_a_removed_services_unadmitted_running_workflows_are_stopped_too(record: str, run: str) -> None:
    """Fault: chat removed while it lends job-0, a tenant's workflow running without admission under chat (its
    mark forged): the release stopped job-0 only, and the tenant's kept its GPUs with no tick left to stop it."""
    w = World()
    w.lend(1)
    _sneak(w, "sneak", run_id="job-0" if run != "its own run" else None)
    if record == "unreadable":
        w.cluster.states[("serving", "chat")] = "{not json"
    _remove_chat(w)
    w.tick()
    assert _chat_running(w) == [], w.log.getvalue()
    assert w.wf("sneak")["spec"].get("shutdown") == "Stop" and w.wf("job-0")["spec"].get("shutdown") == "Stop"
    assert ("serving", "chat") not in w.cluster.states
    assert any(e.reason == EVENT_SERVICE_RELEASED for e in w.cluster.events)


def test_a_removed_service_whose_deployment_is_not_found_still_has_its_jobs_stopped() -> None:
    """Fault: the record unreadable (so the Deployment's name unknown) and no Deployment under the service's name:
    the release gave nothing back, stopped nothing, and forgot the service: its admitted jobs ran on for ever."""
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
    assert w.state("job-0") == STATE_ADMITTED and dep.replicas == 6, w.log.getvalue()
    w.cluster.states[("serving", "chat")] = "{not json"
    _remove_chat(w)
    w.tick()
    assert _chat_running(w) == [], w.log.getvalue()
    assert w.wf("job-0")["spec"].get("shutdown") == "Stop"
    assert [n for (_, n) in w.cluster.workflows if n.startswith("job-0-p")] == ["job-0-p1"]


def test_a_removed_services_parked_workflows_are_left_parked() -> None:
    """What survives: what waits parked under a removed service waits on (for the service to come back)."""
    w = World()
    w.lend(1)
    w.park("waiting", replicas=2)
    _remove_chat(w)
    w.tick()
    assert w.state("waiting") == "parked" and w.wf("waiting")["spec"].get("suspend") is True
    assert w.state("job-0-p1") == "parked"


@pytest.mark.parametrize("record", ["readable", "unreadable"])
def test_a_removed_services_release_tried_again_after_a_failed_stop_makes_no_second_copy(record: str) -> None:
    """Fault: chat removed while it lends job-0, and the stop fails (HTTP 500) on the first two tries of its
    release, each after the copy was parked. The release is tried again each tick; it parked without a token
    or lineage of its own, so each try took the copy the one before made for a stranger's workflow under its
    name and made another (job-0-p1, then two more under generated names: the job's work three times)."""
    from offhours.scripts.cluster.base import ClusterError

    w = World()
    w.lend(1)
    if record == "unreadable":
        w.cluster.states[("serving", "chat")] = "{not json"
    real, fails = w.cluster.stop, [ClusterError("HTTP 500 Internal Server Error (retries exhausted)")] * 2

    def stop(namespace: str, job: object) -> None:
        if fails:
            raise fails.pop()
        real(namespace, job)  # type: ignore[arg-type]

    w.cluster.stop = stop  # type: ignore[method-assign]
    _remove_chat(w)
    for _ in range(3):
        w.tick()
    assert "could not give back what was lent of chat" in w.log.getvalue()
    assert _chat_running(w) == [] and w.wf("job-0")["spec"].get("shutdown") == "Stop", w.log.getvalue()
    copies = sorted(n for (_, n), wf in w.cluster.workflows.items()
                    if wf["metadata"]["labels"].get("offhours.io/copy-of") == w.wf("job-0")["metadata"]["uid"])
    assert copies == ["job-0-p1"], w.log.getvalue()
    assert ("serving", "chat") not in w.cluster.states and w.replicas() == 8
