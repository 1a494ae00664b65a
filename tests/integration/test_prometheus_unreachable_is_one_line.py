"""A Prometheus that cannot be reached, or never answers, is one short line naming it and why, in every reader.

Class: a transport failure reported with the words of whatever query met it (long PromQL, cut by a caller's line
bound before the reason). Mechanism: the history reader turns a failure to get any answer into one line
`Prometheus at URL <problem>` (history/read.py `_grid`). Real sockets: a closed port, a listener that never answers.
"""

import socket
import threading
from collections.abc import Iterator

import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import read_history
from offhours.scripts.metrics.prometheus import PrometheusError
from offhours.scripts.policy.estimate import EstimateError, JobRequest
from offhours.scripts.simulate.estimate import HistoryEstimator, prometheus_history


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent() -> Iterator[str]:
    """A listener that accepts and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def one_short_line(err: BaseException, url: str) -> str:
    text = str(err)
    assert "\n" not in text and len(text) < 160, text
    assert "last_over_time" not in text and "vllm:" not in text, text  # no PromQL for a transport failure
    assert text.startswith(f"Prometheus at {url} "), text
    return text


def test_a_refused_connection_is_one_line() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(PrometheusError) as caught:
        read_history(url, "service", ["chat"], 0.0, 10, timeout=2.0)
    assert one_short_line(caught.value, url).endswith("cannot be reached: connection refused")


def test_a_prometheus_that_never_answers_is_one_line(silent: str) -> None:
    with pytest.raises(PrometheusError) as caught:
        read_history(silent, "service", ["chat"], 0.0, 10, timeout=0.5)
    assert "gave no whole answer in 0.5 s" in one_short_line(caught.value, silent)


def test_the_console_estimate_says_why_in_its_line() -> None:
    """The estimator bounds its line: the reason must be in it, not cut off behind a query."""
    url = f"http://127.0.0.1:{closed_port()}"
    config = parse_config({"metrics": {"prometheus": {"url": url, "timeoutSeconds": 2}},
                           "services": {"chat": {"capacity": {"requestsPerSecond": 5.0}, "gpusPerReplica": 4}}})
    estimator = HistoryEstimator(config, prometheus_history(config, url, days=1), "prometheus")
    with pytest.raises(EstimateError) as caught:
        estimator.estimate("chat", 4, JobRequest(1, 1.0, 30.0, 0), [])
    assert str(caught.value).endswith("cannot be reached: connection refused"), str(caught.value)
