"""The request form's estimate from a real Prometheus: days of vLLM counters backfilled with promtool, replayed.

Real: Debian's Prometheus and promtool, the HTTP range-query API, the console's Flask app and the
estimator the console builds from a gate configuration's Prometheus (`prometheus_history`). The
history is the bundled trace rendered as vLLM's counters, so the right answer is known: the same
estimate the bundled trace gives in memory. Where Prometheus cannot give a history worth replaying
(down, hanging, no series, a counter missing, a service that began yesterday, an outage of hours),
the page says why there is no estimate and never shows a number; the job can still be submitted.
"""

import math
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.console.app import create_app
from offhours.scripts.console.request_pages import minutes_text
from offhours.scripts.console.source import PoolSource
from offhours.scripts.metrics import vllm
from offhours.scripts.names import ANNOTATION_ESTIMATE
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.estimate import Estimate, EstimateError, JobRequest
from offhours.scripts.policy.partial import PARTIAL, partial_note
from offhours.scripts.simulate.estimate import HistoryEstimator, prometheus_history
from offhours.scripts.simulate.trace import Trace, days_of, load_trace
from tests.support.backfill import RenderedService, backfill
from tests.support.console_forms import hidden
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.fleet import free_port
from tests.support.prometheus_fixture import running_prometheus
from tests.unit.test_console_request_review import GOOD
from tests.unit.test_console_resubmit import Store

pytestmark = pytest.mark.prometheus

DAYS = 4
BUNDLED = days_of(load_trace(), 0, DAYS)
START = (math.floor(time.time() / 86400) - DAYS - 2) * 86400.0  # a UTC midnight; the range ends two days ago
END = START + DAYS * 86400
BASELINE = 10  # chat's replicas in the console's pool (tests/support/tenant_pool.py)
REQUEST = JobRequest(replicas=2, hours=4.0, checkpoint_minutes=30.0)
LATE_FROM = 3 * 1440  # "late" was first sampled a day before the range's end
OUTAGE = (3500, 3700)  # "outage": no sample of its only pod for 200 minutes, 34 h before the end
BLIP = (3000, 3009)  # "blip": ten minutes without a sample, bridged

SERVICES = [
    RenderedService("chat", BUNDLED, pods=2, engines=1),
    RenderedService("late", BUNDLED, pods=1, engines=1, gap=(0, LATE_FROM)),
    RenderedService("outage", BUNDLED, pods=1, engines=1, gap=OUTAGE),
    RenderedService("blip", BUNDLED, pods=1, engines=1, gap=BLIP),
    RenderedService("noprompt", BUNDLED, pods=1, engines=1, drop=(vllm.PROMPT_TOKENS,)),
]


def gate_config(url: str) -> GateConfig:
    """Every service sized so the trace's peak minute needs 90% of its baseline (so it lends off-peak)."""
    per_replica = float(np.max(BUNDLED.requests)) / 60.0 / (0.9 * BASELINE)
    return parse_config({"metrics": {"prometheus": {"url": url, "timeoutSeconds": 2}},
                         "services": {name: {"capacity": {"requestsPerSecond": per_replica}, "gpusPerReplica": 4}
                                      for name in ("chat", "late", "outage", "blip", "noprompt", "ghost")}})


def estimator_of(url: str, **kwargs: Any) -> HistoryEstimator:
    config = gate_config(url)
    return HistoryEstimator(config, prometheus_history(config, url, days=DAYS, clock=lambda: END), f"Prometheus {url}",
                            **kwargs)


def in_memory(service_trace: Trace) -> Estimate:
    """The estimate of the same request from the trace itself, "now" at its end."""
    config = gate_config("http://unused.invalid")
    return HistoryEstimator(config, lambda _: (service_trace, service_trace.minutes), "memory").estimate(
        "chat", BASELINE, REQUEST, [])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("estimate-history")
    backfill(SERVICES, START, work / "data")
    with running_prometheus([], work, retention="30d") as url:
        yield url


def test_the_estimate_from_prometheus_is_the_estimate_of_the_history_it_holds(prometheus: str) -> None:
    """Four days of chat's counters read back and replayed give the estimate the bundled days give in memory."""
    from_prometheus = estimator_of(prometheus).estimate("chat", BASELINE, REQUEST, [])
    assert from_prometheus.days == 2  # two whole replays of 28 h fit in four days before "now"
    assert from_prometheus == in_memory(BUNDLED)


def test_a_short_hole_is_bridged_and_still_estimated(prometheus: str) -> None:
    """Ten minutes without a sample are drawn across (the counters' total stays exact): still an estimate of 2 days,
    which says that ten minutes of its history were drawn, not read, and that it made 2 of the 4 replays it asks."""
    blip = estimator_of(prometheus).estimate("blip", BASELINE, REQUEST, [])
    assert blip.days == 2
    note = partial_note(blip.missing)
    assert note is not None and note.startswith(PARTIAL), note
    assert "10 minute(s) of its history had no sample of any pod" in note and "2 of the 14 days" in note
    whole = estimator_of(prometheus).estimate("chat", BASELINE, REQUEST, [])
    assert [m.why for m in whole.missing] == ["2 of the 14 days an estimate replays: the history holds 96.0 h before now"]


@pytest.mark.parametrize("service,why", [
    ("ghost", "holds no complete vLLM history of ghost"),  # an empty answer: no series at all
    ("noprompt", "holds no complete vLLM history of noprompt"),  # a counter missing
    # Fault: the days before a service's first sample were drawn flat from it, and replayed as if they happened.
    ("late", "the history holds 24.0 h before now: an estimate needs 50 h"),
    # Fault: an outage of hours was spread evenly and replayed as a day of the service's.
    ("outage", "the history holds 34.3 h before now: an estimate needs 50 h"),
])
def test_a_history_not_worth_replaying_is_a_named_fallback(prometheus: str, service: str, why: str) -> None:
    """No estimate, and the reason names what Prometheus lacks, where a made-up day would have given a number."""
    with pytest.raises(EstimateError, match=re.escape(why)):
        estimator_of(prometheus).estimate(service, BASELINE, REQUEST, [])


def test_a_range_prometheus_holds_nothing_of_is_a_named_fallback(prometheus: str) -> None:
    """An empty answer for the whole range (long before the backfill): named, no number."""
    config = gate_config(prometheus)
    far_back = HistoryEstimator(config, prometheus_history(config, prometheus, days=DAYS, clock=lambda: START - 86400),
                                "old")
    with pytest.raises(EstimateError, match="holds no complete vLLM history of chat"):
        far_back.estimate("chat", BASELINE, REQUEST, [])


def post(client: Any, action: str) -> Any:
    key = hidden(client.get("/request/offhours-job").get_data(as_text=True))
    values = {**GOOD, "replicas": str(REQUEST.replicas)}
    return client.post("/request/offhours-job", data={
        **{f"param:{k}": v for k, v in values.items()}, "estimate-hours": str(REQUEST.hours),
        "estimate-checkpoint-minutes": str(REQUEST.checkpoint_minutes), **key, "action": action})


def console(estimator: HistoryEstimator) -> tuple[Any, Store]:
    store = Store()
    app = create_app(PoolSource(store, interval=0), services=["chat"], person_api=store, estimator=estimator,
                     local_user="operator")
    return app.test_client(), store


def test_the_form_shows_prometheus_numbers(prometheus: str) -> None:
    """The form's estimate from Prometheus is the in-memory replay's, as the page words it."""
    client, _ = console(estimator_of(prometheus))
    page = post(client, "estimate").get_data(as_text=True)
    assert 'id="no-estimate"' not in page
    median = re.search(r'data-field="start-median">([^<]*)<', page)
    assert median and median.group(1) == minutes_text(in_memory(BUNDLED).start_median_minutes)
    # Four days held, fourteen replayed when they are there: the numbers are shown as partial, saying why.
    said = re.search(r'id="estimate-partial">([^<]*)<', page)
    assert said and said.group(1) == partial_note(in_memory(BUNDLED).missing)


def test_prometheus_down_is_no_estimate_and_the_job_is_still_submitted(prometheus: str) -> None:
    """Fault: Prometheus down (nothing listens): the page names it, shows no number, and a submit still parks the job."""
    dead = f"http://127.0.0.1:{free_port()}"
    client, store = console(estimator_of(dead))
    answer = post(client, "estimate")
    page = answer.get_data(as_text=True)
    assert answer.status_code == 200
    assert "no estimate: the history of chat cannot be read" in page and "cannot be reached: connection refused" in page
    assert 'data-field="start-median"' not in page
    assert post(client, "submit").status_code == 302
    ((_, body),) = store.created
    assert ANNOTATION_ESTIMATE not in body["metadata"]["annotations"]  # no number kept that nobody estimated


def query_count(proxy: FaultProxy) -> int:
    return proxy.count("GET", "/api/v1/query_range")


def test_a_hanging_prometheus_costs_one_timeout_not_one_per_page(prometheus: str) -> None:
    """Fault: Prometheus accepts and never answers: each page would wait the whole timeout again.

    The first estimate waits one query's timeout and names it; the pages after it within the retry
    period are answered from that failure without a query; once Prometheus answers again, so does the estimate.
    """
    with fault_proxy(prometheus) as proxy:
        proxy.faults.append(Fault("hang", path="/api/v1/query_range"))
        clock = [0.0]
        config = gate_config(proxy.url)
        estimator = HistoryEstimator(config, prometheus_history(config, proxy.url, days=DAYS, clock=lambda: END),
                                     "proxy", clock=lambda: clock[0])
        client, _ = console(estimator)
        first = post(client, "estimate").get_data(as_text=True)
        assert "no estimate: the history of chat cannot be read" in first and "gave no whole answer in" in first
        asked = query_count(proxy)
        assert asked == 1  # the first query's failure ends the read
        again = post(client, "estimate").get_data(as_text=True)
        assert "no estimate: the history of chat cannot be read" in again
        assert query_count(proxy) == asked
        proxy.faults.clear()
        clock[0] += estimator.retry_seconds
        healed = post(client, "estimate").get_data(as_text=True)
        assert 'id="no-estimate"' not in healed and 'data-field="start-median"' in healed

