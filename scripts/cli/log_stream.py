"""Copy one log to the terminal as it arrives, bounded: a byte cap, a total deadline, one chunk in memory at a time.

A log is anyone's program's output: it may be gigabytes, or trickle for ever. `logs` never holds a whole log;
it writes each chunk as it comes (decoded incrementally, so a UTF-8 character split across two chunks stays
whole) and stops at the cap or the deadline, saying which. Following the newest pod has neither (a person
stops it), but still streams.
"""

import codecs
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

CHUNK_BYTES = 64 * 1024  # what one read asks its source for: the most of a log held at once
LOG_BYTES = 32 * 1024 * 1024  # of one pod's log, at most this much is printed (the rest is named, not read)
LOG_SECONDS = 120.0  # one log's whole read (not per socket read): a trickling source is cut here


@dataclass(frozen=True)
class Copied:
    """What a copy wrote, and why it stopped before the log's end (None: it wrote the whole log)."""

    written: int
    cut: str | None = None


def bounded_chunks(chunks: Iterable[bytes], most: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Yield `chunks` re-cut to at most `most` bytes each (a source that ignores the size it was asked for)."""
    for chunk in chunks:
        for at in range(0, len(chunk), most):
            yield chunk[at:at + most]


def copy_log(chunks: Iterable[bytes], write: Callable[[str], None], cap: int | None = LOG_BYTES,
             seconds: float | None = LOG_SECONDS, clock: Callable[[], float] = time.monotonic) -> Copied:
    """Write the log of `chunks` through `write` as it arrives; stop at `cap` bytes or after `seconds` (None: never).

    The source is read one chunk at a time and never past the chunk that reaches the cap. Text written ends with a
    newline, so the next header starts on a line of its own (an empty log writes nothing).
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    deadline = None if seconds is None else clock() + seconds
    written, cut, last = 0, None, "\n"
    source = iter(chunks)
    while True:
        if deadline is not None and clock() >= deadline:
            cut = f"read for {seconds:g} s: any rest is not shown"
            break
        chunk = next(source, None)
        if chunk is None:
            break
        if cap is not None and written + len(chunk) > cap:
            chunk, cut = chunk[:cap - written], f"longer than {cap} bytes: cut there"
        text = decoder.decode(chunk)
        written += len(chunk)
        if text:
            write(text)
            last = text[-1]
        if cut is not None:
            break
    tail = decoder.decode(b"", final=True) if cut is None else ""
    if tail:
        write(tail)
        last = tail[-1]
    if last != "\n":
        write("\n")
    return Copied(written, cut)
