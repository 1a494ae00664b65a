"""A range answer that says it is partial is refused: a missing store's pods would read as less load, silently.

Prometheus-compatible stores (Thanos, Cortex, Mimir) answer `"status": "success"` with `warnings`
when part of the data could not be read (a store down, a limit hit). The series that did come back
are well formed, so nothing else in the answer shows that a pod or a day is missing.
"""

import pytest

from offhours.scripts.history.promrange import decode_matrix
from offhours.scripts.metrics.prometheus import PrometheusError

_SERIES = [{"metric": {"service": "chat", "instance": "chat-0:8000"}, "values": [[60, "1"], [120, "3"]]}]


def test_a_partial_answer_is_refused_naming_its_warning() -> None:
    body = {"status": "success", "warnings": ["No StoreAPIs matched for this query", "partial response"],
            "data": {"resultType": "matrix", "result": _SERIES}}
    with pytest.raises(PrometheusError, match="partial") as err:
        decode_matrix(200, body, "q")
    assert "No StoreAPIs matched for this query" in str(err.value)


@pytest.mark.parametrize("extra", [{}, {"warnings": []}, {"infos": ["PromQL info: metric might not be a counter"]}])
def test_an_answer_without_warnings_is_read(extra: dict[str, object]) -> None:
    """An empty warnings list, or only infos (hints about the query, not missing data), is a whole answer."""
    body = {"status": "success", "data": {"resultType": "matrix", "result": _SERIES}, **extra}
    assert decode_matrix(200, body, "q") == [({"service": "chat", "instance": "chat-0:8000"}, [(60.0, 1.0), (120.0, 3.0)])]


def test_warnings_that_are_not_a_list_are_named() -> None:
    body = {"status": "success", "warnings": "oops", "data": {"resultType": "matrix", "result": _SERIES}}
    with pytest.raises(PrometheusError, match="warnings"):
        decode_matrix(200, body, "q")
