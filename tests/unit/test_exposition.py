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


@pytest.mark.parametrize(
    "line, problem",
    [
        ("# HELP", "bad HELP line: no valid metric name"),
        ("# HELP 9lives Cats.", "bad HELP line: no valid metric name"),
        ("# HELP vllm:x{a=\"1\"} Labels are not a name.", "bad HELP line: no valid metric name"),
        ("# HELP vllm:x Bad \\q escape.", "bad HELP line: a backslash may only escape"),
        ("# HELP vllm:x Ends in a backslash \\", "bad HELP line: a backslash may only escape"),
        ("# HELP vllm:num_requests_running Said twice.", "a second HELP line for vllm:num_requests_running"),
        ("# TYPE vllm:num_requests_running gauge", "a second TYPE line for vllm:num_requests_running"),
        ("# TYPE vllm:x", "bad TYPE line: the type must be one of"),
        ("# TYPE", "bad TYPE line: no valid metric name"),
        ("vllm:x 1 1700000000.5", "timestamp '1700000000.5' is not an integer"),
        ("vllm:x 1 1.7e12", "timestamp '1.7e12' is not an integer"),
        ('vllm:x{a="b"} 1 17e2', "timestamp '17e2' is not an integer"),
        ("vllm:x 1 NaN", "timestamp 'NaN' is not an integer"),
    ],
)
def test_bad_help_type_and_timestamps_are_named(line: str, problem: str) -> None:
    with pytest.raises(ExpositionError) as err:
        parse(V1_DP + line + "\n")
    assert err.value.line_number == V1_DP.count("\n") + 1
    assert problem in str(err.value)


def test_good_help_lines_and_integer_timestamps_parse() -> None:
    page = parse("# HELP a Two escapes: \\\\ and \\n.\n# HELP b\n# TYPE a counter\na 1 -5\nb 2 1700000000000\n")
    assert [(s.name, s.value) for s in page.samples] == [("a", 1.0), ("b", 2.0)] and page.types == {"a": "counter"}


def _render(page_samples: list[tuple[str, tuple[tuple[str, str], ...], float]]) -> str:
    lines = []
    for name, labels, value in page_samples:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
        text = "NaN" if math.isnan(value) else "+Inf" if value == math.inf else "-Inf" if value == -math.inf \
            else repr(value)
        lines.append(f"{name}{{{body}}} {text}")
    return "\n".join(lines) + "\n"


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


# Lines that are each valid, almost valid, or garbage, so that both outcomes are common.
_line = st.one_of(
    st.sampled_from(V1_DP.splitlines() + V0.splitlines()),
    st.builds(lambda n, v: f"{n} {v}", _name, st.sampled_from(["1", "-2.5e3", "NaN", "+Inf", "x", "1 2", "1 2.5"])),
    st.builds(lambda k, n, t: f"# {k} {n} {t}", st.sampled_from(["HELP", "TYPE"]), _name,
              st.sampled_from(["gauge", "counter", "flavour", "say \\\\ hi", "bad \\x", ""])),
    st.text(max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_line, max_size=12).map("\n".join)))
def test_fuzz_any_text_parses_or_names_a_line(text: str) -> None:
    lines = text.split("\n")
    try:
        page = parse(text)
    except ExpositionError as err:
        # The named line exists, and it is the first bad one: everything before it parses.
        assert 1 <= err.line_number <= len(lines)
        assert str(err).startswith(f"line {err.line_number}: ")
        parse("\n".join(lines[:err.line_number - 1]))
        return
    # Parsed: one sample per line that is neither blank nor a comment, in order, and rendering the
    # samples again gives a page that parses to the same samples.
    sample_lines = [raw for raw in lines if raw.rstrip("\r").strip() and not raw.startswith("#")]
    assert len(page.samples) == len(sample_lines)
    for sample, raw in zip(page.samples, sample_lines):
        assert raw.startswith(sample.name)
    again = parse(_render([(s.name, s.labels, s.value) for s in page.samples]))
    assert [(s.name, s.labels) for s in again.samples] == [(s.name, s.labels) for s in page.samples]
    assert all(_same(a.value, b.value) for a, b in zip(again.samples, page.samples))



# The names the gate reads, and one of the lines above in a family it does not read, with its labels reordered.
_KEPT = frozenset({"vllm:num_requests_running", "vllm:kv_cache_usage_perc", "b", "x"})


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_line, max_size=12).map("\n".join)))
def test_fuzz_keeping_some_names_changes_only_what_is_returned(text: str) -> None:
    # A page the full parser accepts gives exactly its kept samples; a page it refuses is refused
    # too, at the same line, unless the full parser's only complaint was labels of an unread line.
    try:
        full = parse(text)
    except ExpositionError as err:
        try:
            kept = parse(text, keep=_KEPT)
        except ExpositionError as kept_err:
            assert kept_err.line_number >= err.line_number
            if kept_err.line_number > err.line_number:
                assert "repeated" in err.problem or "duplicate" in err.problem, err
            return
        assert "repeated" in err.problem or "duplicate" in err.problem, err
        line = text.split("\n")[err.line_number - 1]
        assert not any(line.startswith(name) and line[len(name):len(name) + 1] in "{ \t" for name in _KEPT), err
        return
    kept = parse(text, keep=_KEPT)
    assert kept.samples == [s for s in full.samples if s.name in _KEPT] and kept.types == full.types


@pytest.mark.parametrize(
    "line, problem",
    [
        ("<html><body>502 Bad Gateway</body></html>", "not a sample"),
        ('vllm:time_to_first_token_seconds_bucket{le="0.1" 3', "expected ',' or '}'"),
        ("vllm:time_to_first_token_seconds_count three", "is not a number"),
        ("vllm:time_to_first_token_seconds_count 3 1.5", "timestamp '1.5' is not an integer"),
        ('python_gc_objects_collected_total{generation="0"} 1.0', "duplicate series"),
        ('vllm:num_requests_running{engine="0",engine="1"} 3', "label engine repeated"),
        ("# TYPE vllm:x flavour", "bad TYPE line"),
    ],
)
def test_the_gate_s_reading_refuses_a_page_broken_in_a_family_it_does_not_read(line: str, problem: str) -> None:
    with pytest.raises(ExpositionError) as err:
        read_pod_text(V1_DP + line + "\n")
    assert err.value.line_number == V1_DP.count("\n") + 1 and problem in str(err.value)


def test_a_label_named_twice_in_a_family_the_gate_does_not_read_is_not_decoded() -> None:
    # The one check skipped for unread lines (documented in parse): the reading is that of the intact page.
    assert read_pod_text(V1_DP + 'vllm:time_to_first_token_seconds_count{a="1",a="2"} 3\n') == read_pod_text(V1_DP)
    with pytest.raises(ExpositionError, match="label a repeated"):
        parse(V1_DP + 'vllm:time_to_first_token_seconds_count{a="1",a="2"} 3\n')

_ORIGINAL = read_pod_text(V1_DP)
_QUANTITIES = ("requests_total", "prompt_tokens_total", "generation_tokens_total", "running", "waiting",
               "kv_cache_usage")
_FAMILY = {"requests_total": "vllm:request_success_total", "prompt_tokens_total": "vllm:prompt_tokens_total",
           "generation_tokens_total": "vllm:generation_tokens_total", "running": "vllm:num_requests_running",
           "waiting": "vllm:num_requests_waiting", "kv_cache_usage": "vllm:kv_cache_usage_perc"}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=V1_DP.count("\n") - 1),
       st.one_of(st.text(max_size=40), st.just(""), st.just("# a comment")))
def test_fuzz_corrupting_a_vllm_page_never_reads_as_zero(index: int, garbage: str) -> None:
    lines = V1_DP.splitlines()
    replaced = lines[index]
    lines[index] = garbage
    try:
        pod = read_pod_text("\n".join(lines) + "\n")
    except (ExpositionError, MetricsIncomplete):
        return
    # The page still reads: nothing the gate uses may have silently become zero, and a quantity may
    # differ from the intact page only if the replaced line was one of its samples (a second
    # finished_reason of the same engine), and then by exactly that sample's value.
    try:
        garbage_names = {s.name for s in parse(garbage).samples}
    except ExpositionError:
        garbage_names = set()
    assert not garbage_names & set(_FAMILY.values()), "random text made a vLLM sample: extend the check"
    removed = parse(replaced).samples[0] if replaced and not replaced.startswith("#") else None
    for quantity in _QUANTITIES:
        got, intact = getattr(pod, quantity), getattr(_ORIGINAL, quantity)
        if removed is not None and removed.name == _FAMILY[quantity]:
            assert got == intact - removed.value, quantity
        else:
            assert got == intact, quantity
        if quantity != "waiting":
            assert got > 0, quantity
    assert pod.engines == 2
