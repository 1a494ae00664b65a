"""The console's return-path page without a Prometheus URL: one line, no table (tests/integration reads a real one)."""

import html

from offhours.scripts.console.app import create_app
from offhours.scripts.console.return_path_page import NO_PROMETHEUS
from offhours.scripts.console.source import PoolSource
from tests.unit.test_console_resubmit import Store


def test_without_a_prometheus_url_the_page_says_so_in_one_line() -> None:
    page = create_app(PoolSource(Store(), interval=0), services=["chat"]).test_client().get("/return-path")
    text = html.unescape(page.get_data(as_text=True))
    assert page.status_code == 200 and NO_PROMETHEUS in text
    assert 'id="return-path"' not in text

