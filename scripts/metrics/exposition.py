"""A strict parser of the Prometheus text exposition format (version 0.0.4), as vLLM serves it.

Strict on purpose: a page the gate cannot read exactly must not turn into a silent zero, so any
line that is not a comment, a HELP/TYPE line or a well-formed sample raises `ExpositionError`
naming the line.
"""

import math
import re
from collections.abc import Collection
from dataclasses import dataclass

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_METRIC_NAME = re.compile(_NAME)
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SAMPLE_HEAD = re.compile(rf"^({_NAME})(\{{|\s)")
_DUPLICATE = "duplicate series (same name and labels as an earlier line)"
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
_FAST_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
# The common case, checked in one match: label values without escapes, a plain value, no timestamp
# or an integer one. Anything else takes the careful path below, which names what is wrong.
_FAST_SAMPLE = re.compile(
    rf'^({_NAME})(?:\{{((?:{_FAST_PAIR}(?:,{_FAST_PAIR})*,?)?)\}})?[ \t]+'
    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]?Inf)(?:[ \t]+-?\d+)?[ \t]*$"
)
_FAST_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')
_SPECIAL = {"NaN": math.nan, "+Inf": math.inf, "Inf": math.inf, "-Inf": -math.inf}
# HELP text: any characters, but a backslash only as `\\` or `\n` (the format's two escapes).
_HELP_TEXT = re.compile(r"(?:[^\\]|\\[\\n])*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class ExpositionError(ValueError):
    """A metrics page is not valid exposition format; names the line and what is wrong."""

    def __init__(self, line_number: int, line: str, problem: str) -> None:
        shown = line if len(line) <= 120 else line[:117] + "..."
        super().__init__(f"line {line_number}: {problem}: {shown!r}")
        self.line_number = line_number
        self.problem = problem


@dataclass(frozen=True)
class Sample:
    """One sample: metric name, labels (sorted name/value pairs), value."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, name: str) -> str | None:
        """Return the value of label `name`, or None."""
        for key, value in self.labels:
            if key == name:
                return value
        return None


@dataclass
class Page:
    """A parsed metrics page: samples in order, and the declared type of each family."""

    samples: list[Sample]
    types: dict[str, str]


def _parse_value(text: str) -> float:
    lowered = text.lower()
    if lowered in ("nan",):
        return math.nan
    if lowered in ("+inf", "inf"):
        return math.inf
    if lowered == "-inf":
        return -math.inf
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError(text)
    return float(text)


def _parse_labels(text: str, pos: int, number: int, line: str) -> tuple[tuple[tuple[str, str], ...], int]:
    labels: dict[str, str] = {}
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return tuple(sorted(labels.items())), pos + 1
        match = _LABEL_NAME.match(text, pos)
        if not match:
            raise ExpositionError(number, line, "bad label name")
        name = match.group(0)
        pos = match.end()
        if text[pos:pos + 2] != '="':
            raise ExpositionError(number, line, f"label {name} has no quoted value")
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise ExpositionError(number, line, f"label {name} value is not terminated")
            ch = text[pos]
            if ch == "\\":
                escaped = text[pos + 1:pos + 2]
                if escaped not in _ESCAPES:
                    raise ExpositionError(number, line, f"bad escape in label {name}")
                value.append(_ESCAPES[escaped])
                pos += 2
            elif ch == '"':
                pos += 1
                break
            else:
                value.append(ch)
                pos += 1
        if name in labels:
            raise ExpositionError(number, line, f"label {name} repeated")
        labels[name] = "".join(value)
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "}":
            continue
        else:
            raise ExpositionError(number, line, "expected ',' or '}' after a label")


def _sample(line: str, number: int) -> tuple[str, tuple[tuple[str, str], ...], float]:
    fast = _FAST_SAMPLE.match(line)
    if fast:
        name, body, text_value = fast.groups()
        pairs = _FAST_LABEL.findall(body) if body else []
        ordered = tuple(sorted(pairs))
        if len(ordered) != len({k for k, _ in pairs}):
            repeated = next(k for i, (k, _) in enumerate(ordered) if i and ordered[i - 1][0] == k)
            raise ExpositionError(number, line, f"label {repeated} repeated")
        return name, ordered, _SPECIAL[text_value] if text_value in _SPECIAL else float(text_value)
    head = _SAMPLE_HEAD.match(line)
    if not head:
        raise ExpositionError(number, line, "not a sample, comment, HELP or TYPE line")
    name = head.group(1)
    pos = head.end(1)
    labels: tuple[tuple[str, str], ...] = ()
    if line[pos] == "{":
        labels, pos = _parse_labels(line, pos + 1, number, line)
    rest = line[pos:].split()
    if len(rest) not in (1, 2):
        raise ExpositionError(number, line, "expected a value and an optional timestamp")
    try:
        value = _parse_value(rest[0])
    except ValueError:
        raise ExpositionError(number, line, f"value {rest[0]!r} is not a number") from None
    if len(rest) == 2 and not re.fullmatch(r"-?\d+", rest[1]):
        raise ExpositionError(number, line, f"timestamp {rest[1]!r} is not an integer")
    return name, labels, value


def _check_declaration(parts: list[str], seen: set[str], number: int, line: str) -> None:
    """Check a `# HELP name text` or `# TYPE name type` line (split in at most 4 parts); remember the name."""
    kind = parts[1]
    if len(parts) < 3 or not _METRIC_NAME.fullmatch(parts[2]):
        raise ExpositionError(number, line, f"bad {kind} line: no valid metric name")
    name = parts[2]
    if kind == "TYPE" and (len(parts) != 4 or parts[3].strip() not in _TYPES):
        raise ExpositionError(number, line, f"bad TYPE line: the type must be one of {', '.join(sorted(_TYPES))}")
    if kind == "HELP" and len(parts) == 4 and "\\" in parts[3] and not _HELP_TEXT.fullmatch(parts[3]):
        raise ExpositionError(number, line, "bad HELP line: a backslash may only escape '\\' or 'n'")
    if name in seen:
        raise ExpositionError(number, line, f"bad {kind} line: a second {kind} line for {name}")
    seen.add(name)


def parse(text: str, keep: Collection[str] | None = None) -> Page:
    """Parse a whole metrics page; raise `ExpositionError` at the first line that is not valid.

    With `keep`, only samples of those metric names are returned. Every other line is still checked
    against the line grammar (so a broken page is refused as a whole) and an exact repeat of one is
    refused, but its labels are not decoded, so a label named twice in it goes unnoticed: most of a
    vLLM page is histogram buckets the gate never reads, and decoding them was half of a 1,000-pod
    tick's CPU (bench/bench_gate.py). The samples that are kept get every check.
    """
    samples: list[Sample] = []
    types: dict[str, str] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    skipped: set[str] = set()
    declared: dict[str, set[str]] = {"HELP": set(), "TYPE": set()}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] in declared:
                _check_declaration(parts, declared[parts[1]], number, line)
                if parts[1] == "TYPE":
                    types[parts[2]] = parts[3].strip()
            continue
        if keep is not None:
            fast = _FAST_SAMPLE.match(line)
            if fast and fast.group(1) not in keep:
                series = f"{fast.group(1)}{{{fast.group(2) or ''}}}"
                if series in skipped:
                    raise ExpositionError(number, line, _DUPLICATE)
                skipped.add(series)
                continue
        name, labels, value = _sample(line, number)
        if (name, labels) in seen:
            raise ExpositionError(number, line, _DUPLICATE)
        seen.add((name, labels))
        samples.append(Sample(name, labels, value))
    return Page(samples, types)
