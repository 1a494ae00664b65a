"""The gate's instant queries refuse a partial answer, as the history's range queries do.

A Prometheus-compatible store (Thanos, Cortex, Mimir) that could read only part of the data answers
`"status": "success"` with `warnings`; the series it returns are well formed. Read as whole, the pods
it left out were load that is not there, and the gate lent on it: serving short when they were busy.
What must hold: such an answer is a failed read (the service is not lent on, and its fail-safe runs
after the failed ticks), while an answer with only `infos` (hints about the query) is read.
"""

import pytest

from offhours.scripts.metrics.prometheus import PrometheusError, decode_vector

_RESULT = [{"metric": {"service": "chat"}, "value": [1_700_000_000, "12.5"]}]


def test_a_partial_instant_answer_is_a_failed_read_naming_its_warning() -> None:
    body = {"status": "success", "warnings": ["partial response: store eu-1 unreachable"],
            "data": {"resultType": "vector", "result": _RESULT}}
    with pytest.raises(PrometheusError, match="partial") as err:
        decode_vector(200, body, "sum by (service) (rate(vllm:request_success_total[1m]))")
    assert "store eu-1 unreachable" in str(err.value)


@pytest.mark.parametrize("extra", [{}, {"warnings": []}, {"infos": ["PromQL info: metric might not be a counter"]}])
def test_a_whole_instant_answer_is_read(extra: dict[str, object]) -> None:
    body = {"status": "success", "data": {"resultType": "vector", "result": _RESULT}, **extra}
    assert decode_vector(200, body, "q") == [({"service": "chat"}, 12.5)]


def test_warnings_that_are_not_a_list_are_named() -> None:
    body = {"status": "success", "warnings": "oops", "data": {"resultType": "vector", "result": _RESULT}}
    with pytest.raises(PrometheusError, match="warnings is"):
        decode_vector(200, body, "q")
