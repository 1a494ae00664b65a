"""The gate's return-path watch (scripts/gate/return_watch.py): a reclaim followed by its own reads to serving.

In-memory cluster and a scripted load as in test_gate_controller.py; the serving probe is real HTTP to an
emulated vLLM on loopback, and the metrics page is read back through the strict exposition parser, over
the gate's own metrics server.
"""

import dataclasses
import socket
import urllib.request

from offhours.scripts.cluster.base import ClusterError, Pod
from offhours.scripts.gate.metrics_server import serve_metrics
from offhours.scripts.gate.reclaim import ReclaimCheck
from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.gate.return_watch import ReturnWatch
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.policy.release import PodExit
from tests.unit.test_gate_controller import World


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reclaimed_world(port: int) -> tuple[World, ReturnWatch]:
    """chat lends 4 of 8 to two jobs whose pods run; its pods answer on loopback:`port`; a rise is reclaimed at t."""
    w = World()
    w.gate.config = dataclasses.replace(w.gate.config, metrics=dataclasses.replace(w.gate.config.metrics, port=port))
    w.lend(2)
    for job in ("job-0", "job-1"):
        w.cluster.set_workflow_pods("research", job, [PodExit(f"{job}-pod", created=0.0, finished=None, gpus=True)])
    w.cluster.pods[("serving", "chat")] = [Pod(f"chat-{i}", "127.0.0.1") for i in range(4)]
    watch = ReturnWatch(w.gate, ReturnMetrics(["chat", "code"]), monotonic=lambda: w.now)
    check = ReclaimCheck(w.gate)
    check.remember(w.gate.tick())
    w.now += 20.0
    w.cluster.clock = w.now
    began = w.now
    w.source.rps["chat"] = 60.0
    outcomes = check.run()
    w.now += 0.5  # the pass's writes answered
    watch.passed(outcomes, began)
    assert w.replicas() == 8 and watch.following
    return w, watch


def at(w: World, watch: ReturnWatch, t: float) -> None:
    w.now = t
    watch.poll()


def test_each_phase_is_the_time_between_the_reads_that_found_its_ends() -> None:
    port = free_port()
    w, watch = reclaimed_world(port)
    t = w.now
    at(w, watch, t + 2.0)  # victims still running, 4 of 8 pods: nothing reached
    assert watch.tracker.get("chat").times == (t - 0.5, t)
    for job in ("job-0", "job-1"):
        w.cluster.set_workflow_pods("research", job, [PodExit(f"{job}-pod", created=0.0, finished=t + 4, gpus=True)])
    at(w, watch, t + 5.0)  # victims gone
    w.cluster.pods[("serving", "chat")] = [Pod(f"chat-{i}", "127.0.0.1") for i in range(8)]
    at(w, watch, t + 10.0)  # scheduled and Ready, but no vLLM answers yet
    assert watch.following
    with Fleet([("127.0.0.1", port, EmulatedServer(engines=1))]):
        at(w, watch, t + 13.0)
    assert not watch.following
    server = serve_metrics(watch.metrics.render, 0, "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=10) as answer:
            page = parse(answer.read().decode())
    finally:
        server.shutdown()
        server.server_close()
    sums = {s.label("phase"): s.value for s in page.samples
            if s.name == "offhours_return_phase_seconds_sum" and s.label("service") == "chat"}
    assert sums == {"decision": 0.5, "victims_exit": 5.0, "scheduling": 5.0, "start": 0.0, "serving": 3.0,
                    "total": 13.5}
    served = [s.value for s in page.samples if s.name == "offhours_return_reclaims_total"
              and s.label("service") == "chat" and s.label("outcome") == "served"]
    assert served == [1.0]


def test_a_read_that_fails_dates_nothing_and_says_so() -> None:
    w, watch = reclaimed_world(free_port())
    for job in ("job-0", "job-1"):
        w.cluster.set_workflow_pods("research", job, [])

    def refused(*_a: object, **_k: object) -> int:
        raise ClusterError("list pods: HTTP 503")

    w.cluster.scheduled_pods = refused  # type: ignore[method-assign]
    before = watch.tracker
    at(w, watch, w.now + 3.0)
    assert watch.tracker == before
    assert "return path not read" in w.log.getvalue() and "HTTP 503" in w.log.getvalue()


def test_a_service_lent_again_closes_its_open_reclaim_as_cancelled() -> None:
    w, watch = reclaimed_world(free_port())
    w.source.rps["chat"] = 10.0
    w.park("later", replicas=2)
    lent = []
    for _ in range(8):
        w.now += 60.0
        w.cluster.clock = w.now
        outcomes = w.gate.tick()
        watch.passed(outcomes, w.now)
        lent += [o for o in outcomes if o.service == "chat" and o.decision and o.decision.action == "lend"]
        if lent:
            break
    assert lent and not watch.following
    page = parse(watch.metrics.render())
    assert [s.value for s in page.samples if s.name == "offhours_return_reclaims_total"
            and s.label("service") == "chat" and s.label("outcome") == "cancelled"] == [1.0]
