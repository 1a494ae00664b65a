"""Per-minute serving traces (requests, input and output tokens per minute) and the bundled one.

Two traces are bundled, each 14 days of real LLM serving load (ServeGen, Apache-2.0): `m-small`, the
default (scripts/simulate/data/SOURCE.md), and `m-mid` (SOURCE-m-mid.md there). A malformed trace is
refused with an error naming the line and column.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from offhours.scripts.inputs.csvdoc import csv_rows
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import TRACE_BYTES, TRACE_MAX_ROWS
from offhours.scripts.inputs.text import package_text, read_text

BUNDLED = "servegen_m_small_per_minute.csv"
# The bundled traces by the name `--trace` accepts (a file of that name, if there is one, wins).
BUNDLED_TRACES = {"m-small": BUNDLED, "m-mid": "servegen_m_mid_per_minute.csv"}
COLUMNS = ("minute", "requests", "input_tokens", "output_tokens")


class TraceError(ValueError):
    """A trace file is malformed; names the line and what is wrong."""


@dataclass(frozen=True)
class Trace:
    """Per-minute load: arrays indexed by minute since the trace's start (local midnight)."""

    requests: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    name: str = "trace"

    @property
    def minutes(self) -> int:
        """Number of minutes the trace covers."""
        return int(self.requests.shape[0])

    def scaled(self, factor: float) -> "Trace":
        """Return the trace with every quantity multiplied by `factor` (e.g. one service's share)."""
        return Trace(self.requests * factor, self.input_tokens * factor, self.output_tokens * factor,
                     f"{self.name} x{factor:g}")


def parse_trace(text: str, name: str = "trace") -> Trace:
    """Parse CSV text with the header minute,requests,input_tokens,output_tokens; minutes 0, 1, 2, ..."""
    try:
        return _parse_rows(text, name)
    except InputError as err:
        raise TraceError(str(err)) from None


def _parse_rows(text: str, name: str) -> Trace:
    reader = csv_rows(text, name, TRACE_MAX_ROWS + 1)  # the header, and at most TRACE_MAX_ROWS minutes
    try:
        _, header = next(reader)
    except StopIteration:
        raise TraceError(f"{name}: empty file") from None
    if tuple(h.strip() for h in header) != COLUMNS:
        raise TraceError(f"{name}: line 1: header must be {','.join(COLUMNS)}, got {','.join(header)[:200]}")
    rows: list[tuple[float, float, float]] = []
    for line_no, row in reader:
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 4:
            raise TraceError(f"{name}: line {line_no}: expected 4 columns, got {len(row)}")
        values = []
        for column, cell in zip(COLUMNS, row):
            try:
                value = float(cell)
            except ValueError:
                raise TraceError(f"{name}: line {line_no}: {column} {cell!r} is not a number") from None
            if math.isnan(value) or math.isinf(value) or value < 0:
                raise TraceError(f"{name}: line {line_no}: {column} {cell!r} must be a finite number >= 0")
            values.append(value)
        if values[0] != len(rows):
            raise TraceError(f"{name}: line {line_no}: minute {row[0].strip()} out of order (expected {len(rows)})")
        rows.append((values[1], values[2], values[3]))
    if not rows:
        raise TraceError(f"{name}: no data rows")
    data = np.array(rows, dtype=np.float64)
    return Trace(data[:, 0], data[:, 1], data[:, 2], name)


def load_trace(path: str | Path | None = None) -> Trace:
    """Load a trace file, or a bundled trace by name (`m-small`, `m-mid`); the default one when `path` is None."""
    if path is None or (str(path) in BUNDLED_TRACES and not Path(path).exists()):
        file = BUNDLED if path is None else BUNDLED_TRACES[str(path)]
        text = package_text("offhours.scripts.simulate", "data", file)
        return parse_trace(text, file)
    try:
        text = read_text(path, TRACE_BYTES)
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err.strerror}") from None
    except InputError as err:
        raise TraceError(str(err)) from None
    return parse_trace(text, str(path))


def format_trace(trace: Trace) -> str:
    """Write a trace as CSV in the bundled trace's rounding: requests to 0.01, tokens to whole tokens.

    Rounding is the only change: reading the text back gives each value within half a unit of it.
    """
    lines = [",".join(COLUMNS)]
    for minute, (req, inp, out) in enumerate(zip(trace.requests.tolist(), trace.input_tokens.tolist(),
                                                 trace.output_tokens.tolist())):
        lines.append(f"{minute},{req:.2f},{round(inp)},{round(out)}")
    return "\n".join(lines) + "\n"


def days_of(trace: Trace, first: int, last: int) -> Trace:
    """Return whole days `first` .. `last - 1` of the trace (minute 0 stays a midnight)."""
    lo, hi = first * 1440, min(trace.minutes, last * 1440)
    if not 0 <= lo < hi:
        raise TraceError(f"{trace.name}: days {first}..{last} are outside its {trace.minutes / 1440:.1f} days")
    return Trace(trace.requests[lo:hi], trace.input_tokens[lo:hi], trace.output_tokens[lo:hi],
                 f"{trace.name} days {first}-{last - 1}")
