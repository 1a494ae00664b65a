"""The gate's log: one line per message, a level and fields first, the way klog's structured text logs read.

    level=info service=chat msg="lend lent 0 -> 2 of baseline 8; (load has needed at most 6 of 8 replicas for 600 s); at 6"

`level` is info, warning or error; `service` is there whenever the line concerns one service, so
`grep service=chat` (or a log query on it) shows one service's story; further fields (`job=`,
`workflow=`, `reason=`) follow the message. The message is always quoted; a value only when it has
to be (a space, a quote, an `=`, or nothing).
"""

import sys
from dataclasses import dataclass, field
from typing import TextIO

INFO = "info"
WARNING = "warning"
ERROR = "error"
LEVELS = (INFO, WARNING, ERROR)


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _value(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' ="\\\n\r\t'):
        return _quote(text)
    return text


def format_line(level: str, msg: str, service: str | None = None, **fields: object) -> str:
    """Return one log line: `level=... [service=...] msg="..." [key=value ...]` (fields that are None are left out)."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    parts = [f"level={level}"]
    if service:
        parts.append(f"service={_value(service)}")
    parts.append(f"msg={_quote(msg)}")
    parts += [f"{key}={_value(value)}" for key, value in fields.items() if value is not None]
    return " ".join(parts)


@dataclass(frozen=True)
class Logger:
    """Writes `format_line` lines to `out`, flushed at once (a pod's stdout is not a terminal, so it would buffer)."""

    out: TextIO = field(default_factory=lambda: sys.stdout)

    def log(self, level: str, msg: str, service: str | None = None, **fields: object) -> None:
        """Write one line at `level`."""
        print(format_line(level, msg, service, **fields), file=self.out, flush=True)

    def info(self, msg: str, service: str | None = None, **fields: object) -> None:
        """Write one line at level info: what the gate did or decided."""
        self.log(INFO, msg, service, **fields)

    def warning(self, msg: str, service: str | None = None, **fields: object) -> None:
        """Write one line at level warning: something failed that the gate works around or retries next tick."""
        self.log(WARNING, msg, service, **fields)

    def error(self, msg: str, service: str | None = None, **fields: object) -> None:
        """Write one line at level error: a tick, or a service's tick, did not happen."""
        self.log(ERROR, msg, service, **fields)
