"""How long one checkpoint-store call may take: socket timeouts, bounded retries with backoff, a deadline.

Every store call (list, get, put, delete, on S3 or a file system) runs through `RetryPolicy.call`:
a transient failure (a timeout, a reset connection, a 5xx or throttling answer, a transient
OSError such as EIO or ENOSPC) is retried after an exponential backoff with jitter, until the
attempts or the deadline run out. Anything else fails at once. With the defaults a hung endpoint
costs at most about `attempts * (connect or read timeout) + backoff`, well under a minute.

Configurable per store (`RetryPolicy(...)`) or by environment (`RetryPolicy.from_env`):

    OFFHOURS_STORE_CONNECT_TIMEOUT   seconds to open a connection (S3)           default 3
    OFFHOURS_STORE_READ_TIMEOUT      seconds one socket read or write may wait   default 10
    OFFHOURS_STORE_ATTEMPTS          tries per call, the first included          default 4
    OFFHOURS_STORE_DEADLINE          no new try starts after this many seconds   default 60
"""

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

T = TypeVar("T")

ENV = {
    "connect_timeout": "OFFHOURS_STORE_CONNECT_TIMEOUT",
    "read_timeout": "OFFHOURS_STORE_READ_TIMEOUT",
    "attempts": "OFFHOURS_STORE_ATTEMPTS",
    "deadline": "OFFHOURS_STORE_DEADLINE",
}
_LIMITS = {"connect_timeout": 600.0, "read_timeout": 3600.0, "attempts": 20, "deadline": 86400.0}


class StoreFailure(RuntimeError):
    """A store call failed for good: the last error, how many tries, over how long.

    `transient`: the last error was one that passes by itself (the retries ran out, not the hope).
    """

    def __init__(self, message: str, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class ConditionalPutsIgnored(RuntimeError):
    """The storage took a second exclusive create of one name: it cannot fence a run's writers."""


@dataclass(frozen=True)
class RetryPolicy:
    """Timeouts and the bounded retry of every store call."""

    connect_timeout: float = 3.0
    read_timeout: float = 10.0
    attempts: int = 4
    deadline: float = 60.0
    backoff: float = 0.25  # first pause; doubled after each failed try, up to backoff_cap
    backoff_cap: float = 4.0

    def __post_init__(self) -> None:
        for field, limit in _LIMITS.items():
            value = getattr(self, field)
            low = 1 if field == "attempts" else 0
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= limit or (field != "attempts" and value == 0):
                raise ValueError(f"{field} must be a number in ({low}, {limit}], not {value!r}")
        if not isinstance(self.attempts, int):
            raise ValueError(f"attempts must be a whole number, not {self.attempts!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str], base: "RetryPolicy | None" = None) -> "RetryPolicy":
        """Read the OFFHOURS_STORE_* variables over `base` (the defaults); a bad value is one error naming it."""
        policy = base or cls()
        for field, var in ENV.items():
            text = env.get(var, "").strip()
            if not text:
                continue
            try:
                policy = replace(policy, **{field: int(text) if field == "attempts" else float(text)})  # type: ignore[arg-type]
            except ValueError:
                limit = _LIMITS[field]
                kind = "a whole number from 1 to" if field == "attempts" else "a number of seconds above 0, at most"
                raise ValueError(f"{var}={text!r} must be {kind} {limit:g}") from None
        return policy

    def bounded_by(self, seconds: float) -> "RetryPolicy":
        """Return this policy with its deadline and socket timeouts no longer than `seconds` (for advisory reads)."""
        return replace(self, deadline=min(self.deadline, seconds), read_timeout=min(self.read_timeout, seconds),
                       connect_timeout=min(self.connect_timeout, seconds))

    def call(self, what: str, fn: Callable[[], T], transient: Callable[[BaseException], bool],
             sleep: Callable[[float], None] = time.sleep) -> T:
        """Run `fn`, retrying transient failures; raise StoreFailure naming `what` when it gives up."""
        start = time.monotonic()
        pause = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except Exception as err:  # noqa: BLE001 - classified just below
                elapsed = time.monotonic() - start
                wait = min(pause, self.backoff_cap) * random.uniform(0.5, 1.0)
                passing = transient(err)
                if not passing or attempt == self.attempts or elapsed + wait >= self.deadline:
                    tries = f"{attempt} {'try' if attempt == 1 else 'tries'}"
                    raise StoreFailure(f"{what} failed ({tries}, {elapsed:.1f} s): {type(err).__name__}: {err}",
                                       passing) from err
                sleep(wait)
                pause *= 2
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
