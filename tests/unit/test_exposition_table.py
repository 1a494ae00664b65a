"""The exposition parser on a table of pages: each accepted page's exact samples, each refused one's exact error.

Exact messages matter: the gate puts them in its Events and log, where an operator reads which
line of which pod's page is wrong.
"""

import math

import pytest

from offhours.scripts.metrics.exposition import ExpositionError, parse

LONG = "m" * 117


@pytest.mark.parametrize("page, samples", [
    ('m{a="1"} 1\n', [("m", (("a", "1"),), 1.0)]),
    ('m{ a="1" , b="2" } 1\n', [("m", (("a", "1"), ("b", "2")), 1.0)]),
    ('m{\ta="1"\t,\tb="2"\t} 1\n', [("m", (("a", "1"), ("b", "2")), 1.0)]),
    ('m{b="2",a="1",} 1\n', [("m", (("a", "1"), ("b", "2")), 1.0)]),
    ('m{a="1"}1\n', [("m", (("a", "1"),), 1.0)]),
    ("m{} 1\n", [("m", (), 1.0)]),
    ("m +Inf\n", [("m", (), math.inf)]),
    ("m Inf\n", [("m", (), math.inf)]),
    ("m inf\n", [("m", (), math.inf)]),
    ("m -Inf\n", [("m", (), -math.inf)]),
    ("m -inf\n", [("m", (), -math.inf)]),
    ("m 1e3\n", [("m", (), 1000.0)]),
    ("m 1E-3\n", [("m", (), 0.001)]),
    ("m .5\n", [("m", (), 0.5)]),
    ("m 1.5 1700000000000\n", [("m", (), 1.5)]),
    ("m 1.5 -1\n", [("m", (), 1.5)]),
    ("m 1\r\nn 2\r\n", [("m", (), 1.0), ("n", (), 2.0)]),
    # The careful path (a space inside the braces leaves the one-match path): exponents and timestamps there too.
    ('m{ a="1" } 1E-3\n', [("m", (("a", "1"),), 0.001)]),
    ('m{ a="1" } 1.5 1700000000000\n', [("m", (("a", "1"),), 1.5)]),
])
def test_accepted_pages_read_exactly(page: str, samples: list[tuple[str, tuple[tuple[str, str], ...], float]]) -> None:
    assert [(s.name, s.labels, s.value) for s in parse(page).samples] == samples


def test_nan_is_read_as_nan() -> None:
    for text in ("NaN", "nan", "NAN"):
        (sample,) = parse(f"m {text}\n").samples
        assert math.isnan(sample.value)


@pytest.mark.parametrize("page, error", [
    ('m{1a="x"} 1\n', "line 1: bad label name: 'm{1a=\"x\"} 1'"),
    ('m{a="x} 1\n', "line 1: label a value is not terminated: 'm{a=\"x} 1'"),
    ('m{a="x', "line 1: label a value is not terminated: 'm{a=\"x'"),
    ('m{a="1",a="2"} 1\n', "line 1: label a repeated: 'm{a=\"1\",a=\"2\"} 1'"),
    # Several repeats: the one-match path names the first repeated label in name order.
    ('m{b="1",a="1",b="2",a="2"} 1\n', "line 1: label a repeated: 'm{b=\"1\",a=\"1\",b=\"2\",a=\"2\"} 1'"),
    ('m{a="1",b="1",c="1",c="2"} 1\n', "line 1: label c repeated: 'm{a=\"1\",b=\"1\",c=\"1\",c=\"2\"} 1'"),
    # The careful path (a space after the comma): the label repeated in line order.
    ('m{a="1", a="2"} 1\n', "line 1: label a repeated: 'm{a=\"1\", a=\"2\"} 1'"),
    ('m{b="1", a="1", b="2", a="2"} 1\n', "line 1: label b repeated: 'm{b=\"1\", a=\"1\", b=\"2\", a=\"2\"} 1'"),
    ("m{\n", "line 1: bad label name: 'm{'"),
    ("m{ \n", "line 1: bad label name: 'm{ '"),
    ('m{a="1",\n', "line 1: bad label name: 'm{a=\"1\",'"),
    ('m{a="1"X} 1\n', "line 1: expected ',' or '}' after a label: 'm{a=\"1\"X} 1'"),
    ("m 1 X\n", "line 1: timestamp 'X' is not an integer: 'm 1 X'"),
    # A line is shown as served, less its line ending: trailing blanks stay, a CRLF's CR goes.
    ("m 1 2 3 \t\n", "line 1: expected a value and an optional timestamp: 'm 1 2 3 \\t'"),
    ("m 1 2 3\r\n", "line 1: expected a value and an optional timestamp: 'm 1 2 3'"),
    ("\rm 1\n", "line 1: not a sample, comment, HELP or TYPE line: '\\rm 1'"),
    ('m{a="1" b="2"} 1\n', "line 1: expected ',' or '}' after a label: 'm{a=\"1\" b=\"2\"} 1'"),
    ('m{a="1"', "line 1: expected ',' or '}' after a label: 'm{a=\"1\"'"),
    ("m 1 17.5\n", "line 1: timestamp '17.5' is not an integer: 'm 1 17.5'"),
    ("m 1 2 3\n", "line 1: expected a value and an optional timestamp: 'm 1 2 3'"),
    ("m abc\n", "line 1: value 'abc' is not a number: 'm abc'"),
    ("m 1e\n", "line 1: value '1e' is not a number: 'm 1e'"),
    ("m 0x10\n", "line 1: value '0x10' is not a number: 'm 0x10'"),
    ("# TYPE m bogus\n", "line 1: bad TYPE line: the type must be one of counter, gauge, histogram, summary, untyped: "
                         "'# TYPE m bogus'"),
    ("# HELP m bad \\x escape\n", "line 1: bad HELP line: a backslash may only escape '\\' or 'n': "
                                 "'# HELP m bad \\\\x escape'"),
    ("m 1\nm 1\n", "line 2: duplicate series (same name and labels as an earlier line): 'm 1'"),
    ('{a="1"} 1\n', "line 1: not a sample, comment, HELP or TYPE line: '{a=\"1\"} 1'"),
    (f"{LONG} 1 2 3\n", f"line 1: expected a value and an optional timestamp: '{LONG}...'"),
])
def test_refused_pages_name_the_line_and_the_problem(page: str, error: str) -> None:
    with pytest.raises(ExpositionError) as err:
        parse(page)
    assert str(err.value) == error


def test_a_long_line_is_shown_whole_up_to_120_characters() -> None:
    for length, shown in ((120, None), (121, 117)):
        line = "m" * (length - 6) + " 1 2 3"
        assert len(line) == length
        with pytest.raises(ExpositionError) as err:
            parse(line + "\n")
        expected = line if shown is None else line[:shown] + "..."
        assert str(err.value) == f"line 1: expected a value and an optional timestamp: {expected!r}"
        assert err.value.line_number == 1 and err.value.problem == "expected a value and an optional timestamp"


@pytest.mark.parametrize("page, error", [
    ("m 1\nn 1\nn 1\n", "line 3: duplicate series (same name and labels as an earlier line): 'n 1'"),
    ("m 1\nn 1\nn{} 1\n", "line 3: duplicate series (same name and labels as an earlier line): 'n{} 1'"),
    ('m 1\nn{a="1"} 1\nn{a="1"} 2\n', "line 3: duplicate series (same name and labels as an earlier line): "
                                      "'n{a=\"1\"} 2'"),
])
def test_a_repeat_in_a_family_not_kept_is_refused_with_the_same_error(page: str, error: str) -> None:
    # Lines of families not kept are not decoded, yet their exact repeats get the error a full parse gives.
    for keep in ({"m"}, None):
        with pytest.raises(ExpositionError) as err:
            parse(page, keep=keep)
        assert str(err.value) == error
