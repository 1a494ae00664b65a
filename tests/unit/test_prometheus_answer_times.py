"""Prometheus answers with sample times that are not finite (Python reads NaN, Infinity): a PrometheusError, not a traceback."""

import json

import pytest

from offhours.scripts.history.promrange import decode_matrix, query_range
from offhours.scripts.inputs.httpget import Answer
from offhours.scripts.metrics import prometheus
from offhours.scripts.metrics.prometheus import PrometheusError

NOT_FINITE = [float("nan"), float("inf"), float("-inf")]


def matrix(t: float) -> dict:
    return {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[t, "1"]]}]}}


def answer(text: str) -> Answer:
    """The answer a broken proxy sent, as the input layer's HTTP reader returns it."""
    return Answer(200, "application/json", text.encode())


@pytest.mark.parametrize("t", NOT_FINITE)
def test_a_range_answer_with_a_time_that_is_not_finite_is_named(t: float) -> None:
    """Fault: a sample time NaN or Infinity passed the decoder and broke the grid placement with ValueError/OverflowError."""
    with pytest.raises(PrometheusError, match="not \\[<time>"):
        decode_matrix(200, matrix(t), "q")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_query_range_on_such_an_answer_raises_prometheus_error(literal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: the same answer through query_range was a ValueError or OverflowError traceback out of calibrate/tune."""
    text = json.dumps(matrix(0.0)).replace("[[0.0,", f"[[{literal},")
    monkeypatch.setattr(prometheus, "http_get", lambda *a, **kw: answer(text))
    with pytest.raises(PrometheusError):
        query_range("http://p.invalid", "q", 0.0, 60.0, 3)


def test_an_answer_nested_too_deeply_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: a body nested past the recursion limit raised RecursionError, which only ValueError was caught for."""
    monkeypatch.setattr(prometheus, "http_get", lambda *a, **kw: answer("[" * 100_000))
    with pytest.raises(PrometheusError, match="not JSON"):
        query_range("http://p.invalid", "q", 0.0, 60.0, 3)

