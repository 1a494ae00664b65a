"""The exposition parser and the vLLM reader against vLLM's real formats, fuzzed with hypothesis."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.exposition import ExpositionError, parse
from offhours.scripts.metrics.vllm import MetricsIncomplete, read_pod_text

# A V1 page as vLLM >= 0.12 serves it with data parallelism (two engines), trimmed to what matters.
V1_DP = """\
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 7.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.5
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 1000.0
vllm:prompt_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 3000.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7646e+09
vllm:prompt_tokens_created{engine="1",model_name="Qwen/Qwen3-8B"} 1.7646e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 200.0
vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 300.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 10.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-8B"} 2.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 20.0
vllm:request_success_total{engine="1",finished_reason="abort",model_name="Qwen/Qwen3-8B"} 1.0
# HELP vllm:request_success_created Count of successfully processed requests.
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 1.7646e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="Qwen/Qwen3-8B"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 12.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 12.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 30.5
"""

# An older (V0) server: no engine label, KV-cache as gpu_cache_usage_perc, swapped requests.
V0 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama"} 4.0
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="llama"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama"} 2.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="llama"} 0.4
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="llama"} 500.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="llama"} 50.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="llama"} 9.0
"""


def test_v1_data_parallel_page_sums_engines() -> None:
    pod = read_pod_text(V1_DP)
    assert pod.requests_total == 33.0  # every engine and finished_reason; _created ignored
    assert pod.prompt_tokens_total == 4000.0 and pod.generation_tokens_total == 500.0
    assert pod.running == 12.0 and pod.waiting == 1.0
    assert pod.kv_cache_usage == 0.5  # the fullest engine
    assert pod.engines == 2


def test_v0_page_reads_the_legacy_kv_name() -> None:
    pod = read_pod_text(V0)
    assert pod.kv_cache_usage == 0.4 and pod.running == 4.0 and pod.engines == 1


def test_new_kv_name_wins_over_legacy() -> None:
    page = V1_DP + 'vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.99\n'
    assert read_pod_text(page).kv_cache_usage == 0.5


@pytest.mark.parametrize("family", ["vllm:request_success_total", "vllm:num_requests_waiting",
                                    "vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc"])
def test_missing_family_is_named_never_zero(family: str) -> None:
    page = "\n".join(line for line in V1_DP.splitlines() if not line.startswith(family + "{"))
    with pytest.raises(MetricsIncomplete, match=family.replace(":", ":")):
        read_pod_text(page)


def test_nan_and_inf_parse_but_cannot_be_read_as_load() -> None:
    page = parse('a 1\nb NaN\nc +Inf\nd -Inf\ne 1e3 1700000000000\n')
    values = [s.value for s in page.samples]
    assert values[0] == 1 and math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
    assert values[4] == 1000
    with pytest.raises(MetricsIncomplete, match="vllm:num_requests_running has the value nan"):
        read_pod_text(V1_DP.replace('vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 5.0',
                                    'vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} NaN'))


@pytest.mark.parametrize(
    "line, problem",
    [
        ("<html><body>502 Bad Gateway</body></html>", "not a sample"),
        ('vllm:num_requests_running{engine="0" 3', "expected ',' or '}'"),
        ('vllm:num_requests_running{engine=0} 3', "no quoted value"),
        ("vllm:num_requests_running 3 4 5", "expected a value and an optional timestamp"),
        ("vllm:num_requests_running three", "is not a number"),
        ('vllm:x{a="1",a="2"} 1', "label a repeated"),
        ("# TYPE vllm:x flavour", "bad TYPE line"),
        ('vllm:x{a="\\q"} 1', "bad escape"),
        ('vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 9.0', "duplicate series"),
    ],
)
def test_malformed_line_is_named(line: str, problem: str) -> None:
    with pytest.raises(ExpositionError) as err:
        parse(V1_DP + line + "\n")
    assert err.value.line_number == V1_DP.count("\n") + 1
    assert problem in str(err.value)
    assert f"line {err.value.line_number}:" in str(err.value)


def test_escaped_label_values() -> None:
    page = parse('m{path="a\\\\b",q="say \\"hi\\"",n="x\\ny"} 1\n')
    assert page.samples[0].labels == (("n", "x\ny"), ("path", "a\\b"), ("q", 'say "hi"'))


def test_emulator_pages_read_back_exactly() -> None:
    for legacy, engines in ((False, 1), (False, 4), (True, 1)):
        server = EmulatedServer(engines=engines, legacy=legacy)
        server.feed(1200, 146400, 18000, 60)
        pod = read_pod_text(server.render())
        assert pod.requests_total == pytest.approx(1200)
        assert pod.prompt_tokens_total == pytest.approx(146400)
        assert pod.engines == engines


_label_value = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_name = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
_label_name = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_name, st.dictionaries(_label_name, _label_value, max_size=4),
                          st.floats(allow_nan=False, allow_infinity=True, width=64)), max_size=20,
                unique_by=lambda s: (s[0], tuple(sorted(s[1].items())))))
def test_fuzz_valid_pages_round_trip(samples: list[tuple[str, dict[str, str], float]]) -> None:
    lines = []
    for name, labels, value in samples:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        text = "+Inf" if value == math.inf else "-Inf" if value == -math.inf else repr(value)
        lines.append(f"{name}{{{body}}} {text}" if labels else f"{name} {text}")
    page = parse("\n".join(lines) + "\n")
    assert [(s.name, dict(s.labels), s.value) for s in page.samples] == [(n, lab, v) for n, lab, v in samples]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_any_text_parses_or_names_a_line(text: str) -> None:
    try:
        parse(text)
    except ExpositionError as err:
        assert err.line_number >= 1


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=V1_DP.count("\n") - 1), st.text(min_size=1, max_size=40))
def test_fuzz_corrupting_a_vllm_page_never_reads_as_zero(index: int, garbage: str) -> None:
    lines = V1_DP.splitlines()
    lines[index] = garbage
    try:
        pod = read_pod_text("\n".join(lines) + "\n")
    except (ExpositionError, MetricsIncomplete):
        return
    # If the page still reads, every counter is a real number and requests were not zeroed silently.
    assert all(math.isfinite(c) and c >= 0 for c in pod.counters)
