"""The console's return-path page from a real Prometheus scraping the gate's /metrics: the report's numbers.

Real: Debian's Prometheus scraping the gate's own metrics server over loopback, its query API, the
console's Flask app (test client). Six served reclaims of known phases are recorded on the gate's
page; the console's table must show, per phase, the same reclaims served and p50/p95 as `offhours
report --prometheus` prints over the same range (one decoding, policy/return_table.py), and p95 as
Prometheus' own histogram_quantile gives it. A Prometheus that does not answer is one line, no number.
"""

import html
import math
import re
import time

import pytest

from offhours.scripts.cli.report import return_path_lines
from offhours.scripts.console.app import create_app
from offhours.scripts.console.return_path_page import ReturnPathReader
from offhours.scripts.console.source import PoolSource
from offhours.scripts.history.promrange import query_range
from tests.support.fleet import free_port
from tests.support.gate_scrape import record_served_reclaims, scraped_gate_page
from tests.unit.test_console_resubmit import Store

pytestmark = pytest.mark.prometheus


def _cells(text: str) -> dict[str, list[str]]:
    """Phase -> [served, p50, p95] of chat's rows in the page."""
    out = {}
    for phase, body in re.findall(r'<tr data-key="chat/(\w+)">(.*?)</tr>', text, re.S):
        out[phase] = [html.unescape(v) for v in re.findall(r'data-field="\w+">([^<]*)<', body)]
    return out


def test_the_console_shows_the_reports_return_path(tmp_path: pytest.TempPathFactory) -> None:
    with scraped_gate_page(tmp_path, ["chat"]) as (gate_page, url):
        time.sleep(6)  # a history long beside the scrape interval
        record_served_reclaims(gate_page, "chat", 6)
        time.sleep(6)
        end = float(math.floor(time.time()))
        reader = ReturnPathReader(url, days=0.01, now=lambda: end)  # 864 s: all of this Prometheus' history
        app = create_app(PoolSource(Store(), interval=0), services=["chat"], return_path=reader)
        page = app.test_client().get("/return-path")
        text = page.get_data(as_text=True)
        report = {line.split()[1]: line.split()[2:]
                  for line in return_path_lines(url, ["chat"], reader.days * 86400.0, end) if line.startswith("chat")}
        promql = ('histogram_quantile(0.95, sum by (le) (increase(offhours_return_phase_seconds_bucket'
                  f'{{service="chat",phase="serving"}}[{math.ceil(reader.days * 86400.0)}s])))')
        own_p95 = float(next(iter(query_range(url, promql, end, 60.0, 1).values()))[0])
    shown = _cells(text)
    assert page.status_code == 200
    assert set(shown) == {"decision", "victims_exit", "scheduling", "start", "serving", "total"}, text
    assert shown == report  # the same served counts and quantiles as the report, phase by phase
    assert shown["serving"][0] == "6" and shown["serving"][2] == f"{own_p95:.1f}"


def test_a_prometheus_that_does_not_answer_is_named_and_no_number_is_shown() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    app = create_app(PoolSource(Store(), interval=0), services=["chat"], return_path=ReturnPathReader(url))
    page = app.test_client().get("/return-path")
    text = html.unescape(page.get_data(as_text=True))
    assert page.status_code == 200 and f"Prometheus at {url} could not be read" in text
    assert 'id="return-path"' not in text and 'data-field="p95"' not in text
