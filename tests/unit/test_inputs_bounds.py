"""Every reader of the input layer, fed random, huge, deep, alias-bombed, duplicate-keyed, trickled and
mis-encoded inputs: each outcome is a value or the one named error, within a memory and time bound.

Invariants, in words:
- a reader returns a value or raises InputError (or its caller's own error carrying that line), nothing else;
- the error's line names the file and what is wrong (a duplicate key: the key and both lines);
- reading an input of at most a few hundred KiB never holds more than MEMORY_BOUND bytes at once, and ends
  before the test's own alarm (TIME_BOUND: generous, the guard against a hang, never a measurement);
- what is within every bound reads back as what was written (the bounds refuse only what they name).
"""

import codecs
import json
import os
import signal
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.config.loader import load_config
from offhours.scripts.inputs.csvdoc import csv_rows
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.jsondoc import load_json
from offhours.scripts.inputs.kubeconfig import check_kubeconfig
from offhours.scripts.inputs.limits import CSV_MAX_FIELD_CHARS, MAX_DEPTH, YAML_MAX_ALIAS_NODES
from offhours.scripts.inputs.text import decode, read_bytes, read_text
from offhours.scripts.inputs.yamldoc import load_yaml, load_yaml_all
from offhours.scripts.policy.config import ConfigError
from offhours.scripts.simulate.fleet import FleetError, load_fleet, load_jobs
from offhours.scripts.simulate.trace import TraceError, load_trace
from offhours.scripts.validate.runner import load_documents

MEMORY_BOUND = 64 * 1024 * 1024  # far above what a few hundred KiB of input needs; an alias bomb needs GiB
TIME_BOUND = 60  # seconds: a hang, never a slow machine (each example's input is at most ~1 MiB)
# No per-example deadline: the bound is the alarm below (a hang), never a timing on a shared machine.
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILE_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                HealthCheck.too_slow])


class Overran(Exception):
    """The test's own deadline passed: the reader did not end."""


@contextmanager
def bounded() -> Iterator[None]:
    """Run the body under an alarm (TIME_BOUND) and tracemalloc; fail if its peak passes MEMORY_BOUND."""
    def overrun(signum: int, frame: Any) -> None:
        raise Overran(f"no outcome within {TIME_BOUND} s")

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.alarm(TIME_BOUND)
    tracemalloc.start()
    try:
        yield
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert peak <= MEMORY_BOUND, f"the reader held {peak:,} bytes at once"


def outcome(read: Callable[[], Any], *errors: type[Exception]) -> Any:
    """Return the value read, or the named error (InputError, or the caller's error naming it); anything else fails."""
    with bounded():
        try:
            return read()
        except (InputError, *errors) as err:
            line = str(err)
            assert line and "\n" not in line and "Traceback" not in line, line
            return err


# Text that is YAML-ish: brackets, anchors, aliases, keys, indents, odd bytes.
_YAMLISH = st.lists(st.sampled_from(list("ab:-[]{}&*!|>#'\", \n\t?") + ["k_a", "&x ", "*x", "<<: ", "\n  "]),
                    max_size=300).map("".join)
_MISENCODED = st.one_of(
    st.binary(max_size=600),
    st.builds(lambda t: codecs.BOM_UTF16_LE + t.encode("utf-16-le"), st.text(max_size=100)),
    st.builds(lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"), st.text(max_size=100)),
    st.builds(lambda t: codecs.BOM_UTF32_LE + t.encode("utf-32-le"), st.text(max_size=100)),
    st.builds(lambda t: t.encode("latin-1", errors="replace"), st.text(alphabet="aé:ü\n ", max_size=100)),
    st.builds(lambda t: codecs.BOM_UTF8 + t.encode(), _YAMLISH),
)
_ANY_BYTES = st.one_of(_MISENCODED, _YAMLISH.map(str.encode))


@SETTINGS
@given(data=_ANY_BYTES)
def test_decode_gives_text_or_names_the_encoding(data: bytes) -> None:
    result = outcome(lambda: decode(data, "f.yaml", allow_empty=True))
    if isinstance(result, InputError):
        assert result.source == "f.yaml"
        if data.startswith(codecs.BOM_UTF16_LE) and not data.startswith(codecs.BOM_UTF32_LE):
            assert "UTF-16" in result.problem
    else:
        assert result == data.decode("utf-8-sig")


@SETTINGS
@given(text=_YAMLISH)
def test_random_yaml_is_a_value_or_the_named_error(text: str) -> None:
    outcome(lambda: load_yaml_all(text, "f.yaml"))


@SETTINGS
@given(depth=st.integers(1, 5000), flow=st.booleans())
def test_deep_yaml_is_refused_past_the_bound_and_read_within_it(depth: int, flow: bool) -> None:
    text = ("[" * depth + "]" * depth) if flow else "".join(f"{' ' * i}k_{i}:\n" for i in range(depth)) + \
        f"{' ' * depth}end\n"
    result = outcome(lambda: load_yaml(text, "deep.yaml"))
    written = depth if flow else depth + 1  # a block mapping per level, and the last scalar
    if written > MAX_DEPTH:
        assert isinstance(result, InputError) and "nested too deeply" in result.problem
    else:
        assert not isinstance(result, InputError)


def _laughs(width: int, levels: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@SETTINGS
@given(width=st.integers(2, 12), levels=st.integers(2, 12))
def test_an_alias_bomb_is_refused_past_the_bound(width: int, levels: int) -> None:
    """Fault class: a few hundred bytes of aliases standing for width**levels nodes ("billion laughs")."""
    expanded = width ** levels
    result = outcome(lambda: load_yaml(_laughs(width, levels), "bomb.yaml"))
    if expanded > 2 * YAML_MAX_ALIAS_NODES:
        assert isinstance(result, InputError) and "aliases" in result.problem
    elif expanded * levels < YAML_MAX_ALIAS_NODES // 2:
        assert isinstance(result, dict) and len(result[f"l{levels - 1}"]) == width


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    result = outcome(lambda: load_yaml("a: &a [1, *a]\n", "loop.yaml"))
    assert isinstance(result, InputError) and "its own anchor" in result.problem


_KEYS = st.lists(st.from_regex(r"k_[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=12, unique=True)


@SETTINGS
@given(keys=_KEYS, data=st.data(), parents=st.integers(0, 4))
def test_a_duplicate_key_names_the_key_and_both_lines(keys: list[str], data: st.DataObject, parents: int) -> None:
    """Fault class: a service or a field written twice silently kept only the last one."""
    first = data.draw(st.integers(0, len(keys) - 1))
    at = data.draw(st.integers(first + 1, len(keys)))
    written = keys[:at] + [keys[first]] + keys[at:]
    indent = "  " * parents
    text = "".join(f"{'  ' * i}p_{i}:\n" for i in range(parents)) + \
        "".join(f"{indent}{key}: {n}\n" for n, key in enumerate(written))
    result = outcome(lambda: load_yaml(text, "dup.yaml"))
    assert isinstance(result, InputError)
    assert repr(keys[first]) in result.problem
    assert f"line {parents + first + 1} and line {parents + at + 1}" in result.problem


@SETTINGS
@given(value=st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                              st.from_regex(r"k_[a-z]{1,5}", fullmatch=True), inner, max_size=4),
                          max_leaves=30))
def test_what_is_within_every_bound_reads_back_as_written(value: Any) -> None:
    assert load_yaml(yaml.safe_dump(value), "ok.yaml") == value
    assert load_json(json.dumps(value).encode(), "ok.json") == value


@SETTINGS
@given(data=st.one_of(_ANY_BYTES, st.integers(1, 3000).map(lambda d: b"[" * d + b"]" * d),
                      st.integers(1, 3000).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),
                      st.just(b'{"a": 1, "a": 2}'), st.just(b"1" * 5000)))
def test_json_is_a_value_or_the_named_error(data: bytes) -> None:
    result = outcome(lambda: load_json(data, "answer"))
    if data == b'{"a": 1, "a": 2}':
        assert isinstance(result, InputError) and "'a' twice" in result.problem
    if data.startswith(b"[" * (MAX_DEPTH + 1)):
        assert isinstance(result, InputError) and "nested too deeply" in result.problem


@SETTINGS
@given(text=st.lists(st.sampled_from(list('a1,"\n\r ') + ["x" * 300]), max_size=300).map("".join),
       max_rows=st.integers(1, 50))
def test_csv_rows_are_values_or_the_named_error(text: str, max_rows: int) -> None:
    result = outcome(lambda: list(csv_rows(text, "t.csv", max_rows)))
    if not isinstance(result, InputError):
        assert len(result) <= max_rows
        assert all(len(field) <= CSV_MAX_FIELD_CHARS for _, row in result for field in row)


def _files(tmp_path: Path) -> Iterator[Path]:
    for n in range(10**9):
        yield tmp_path / f"input-{n}"


# Each reader that takes a file a person names, and the errors it may answer with (each carries one line).
READERS: dict[str, tuple[Callable[[Path], Any], tuple[type[Exception], ...]]] = {
    "gate config": (load_config, (ConfigError,)),
    "fleet": (load_fleet, (FleetError,)),
    "jobs": (load_jobs, (FleetError,)),
    "trace": (load_trace, (TraceError,)),
    "manifests": (lambda p: load_documents([p]), ()),
    "kubeconfig": (lambda p: check_kubeconfig(str(p)), ()),
}


_WARMED: set[str] = set()


def warmed(reader: str, tmp_path: Path) -> None:
    """Run a reader once outside the measure: a library's one-time set-up (jsonschema's caches) is not the input's."""
    if reader not in _WARMED:
        read, errors = READERS[reader]
        (tmp_path / "warm").write_text("a: 1\n")
        try:
            read(tmp_path / "warm")
        except (InputError, *errors):
            pass
        _WARMED.add(reader)


@pytest.mark.parametrize("reader", sorted(READERS))
@FILE_SETTINGS
@given(content=st.one_of(
    _ANY_BYTES,
    st.builds(lambda w, d: _laughs(w, d).encode(), st.integers(8, 12), st.integers(8, 10)),
    st.integers(65, 3000).map(lambda d: (" " * 0 + "[" * d + "]" * d).encode()),
    st.just(b"services:\n  chat: {}\n  chat: {}\n"),
    st.just(b"minute,requests,input_tokens,output_tokens\n" + b"0," + b"9" * 5000 + b",1,1\n"),
))
def test_every_file_reader_gives_a_value_or_its_one_line(reader: str, content: bytes, tmp_path: Path) -> None:
    warmed(reader, tmp_path)
    read, errors = READERS[reader]
    path = next(p for p in _files(tmp_path) if not p.exists())
    path.write_bytes(content)
    result = outcome(lambda: read(path), *errors)
    # What the input layer refused names the file (a schema's complaint about a readable value is the caller's line).
    if isinstance(result, InputError) or isinstance(getattr(result, "__context__", None), InputError):
        assert str(path) in str(result)
    if content == b"services:\n  chat: {}\n  chat: {}\n" and reader != "trace":
        assert "twice: line 2 and line 3" in str(result)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_file_reader_refuses_a_file_past_its_size(reader: str, tmp_path: Path) -> None:
    warmed(reader, tmp_path)
    read, errors = READERS[reader]
    path = tmp_path / "huge"
    with path.open("wb") as handle:
        handle.truncate(200 * 1024 * 1024)  # sparse: refused on its size, never read
    result = outcome(lambda: read(path), *errors)
    if reader == "manifests":
        assert "MiB allowed" in str(result[1][0].message)
    else:
        assert isinstance(result, Exception) and "MiB allowed" in str(result)


def test_a_trickling_pipe_is_refused_at_its_deadline(tmp_path: Path) -> None:
    """Fault class: a stream that sends a byte now and then held its reader for as long as it kept sending."""
    fifo = tmp_path / "trickle"
    os.mkfifo(fifo)
    stop = threading.Event()

    def trickle() -> None:
        fd = os.open(fifo, os.O_WRONLY)
        try:
            while not stop.wait(0.05):
                os.write(fd, b"a")
        except OSError:
            pass  # the reader gave up and closed its end
        finally:
            os.close(fd)

    writer = threading.Thread(target=trickle, daemon=True)
    writer.start()
    try:
        result = outcome(lambda: read_bytes(fifo, 1024 * 1024, seconds=0.5))
    finally:
        stop.set()
        writer.join(timeout=5)
    assert isinstance(result, InputError) and "did not end within 0.5 s" in result.problem


def test_a_device_that_never_ends_is_refused_at_its_size() -> None:
    result = outcome(lambda: read_text("/dev/zero", 4096))
    assert isinstance(result, InputError) and "more than the 4 KiB allowed" in result.problem


def test_the_test_guard_itself_fires() -> None:
    """The alarm this file relies on does end a reader that never returns (so a hang fails, not blocks)."""
    with pytest.raises(Overran):
        with bounded():
            signal.alarm(1)
            time.sleep(5)


def test_a_second_merge_key_in_one_mapping_is_a_duplicate_key() -> None:
    """Closes the class "a key written twice is silently read as the last one", for the merge key `<<`."""
    with pytest.raises(InputError, match="merge key '<<' twice: line 4 and line 5"):
        load_yaml("a: &a {k: 1}\nb: &b {k: 2}\nc:\n  <<: *a\n  <<: *b\n", "x")
    # One `<<` with a list merges several mappings, as YAML says; the mapping's own keys still override.
    assert load_yaml("a: &a {k: 1}\nb: &b {k: 2, j: 3}\nc:\n  <<: [*a, *b]\n  j: 4\n", "x")["c"] == {"k": 1, "j": 4}
