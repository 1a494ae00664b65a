"""`offhours logs` copies a log as it arrives, within a byte cap and a total deadline, one chunk in memory.

Class: a log read whole into memory (a program's output may be gigabytes, or trickle for ever). Mechanism:
every log, from the API server or the log archive, goes through `copy_log`, which pulls one bounded chunk at a
time and stops at the cap or the deadline, saying which. Invariants, over generated logs, chunkings, caps and
clocks: never more than the cap written; the source never read past the chunk that reaches the cap; what is
written is exactly the log's first bytes, decoded (a character split across chunks stays whole); a cut is said
exactly when the log was longer than the cap or outlasted the deadline; the text ends with a newline (or is empty).
"""

import codecs
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.log_stream import bounded_chunks, copy_log

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


class Source:
    """Chunks handed out one at a time, counting how many bytes were pulled."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks, self.pulled, self.biggest = chunks, 0, max((len(c) for c in chunks), default=0)

    def __iter__(self) -> Iterator[bytes]:
        for c in self.chunks:
            self.pulled += len(c)
            yield c


@settings(max_examples=300, deadline=None)
@given(texts, st.lists(st.integers(0, 10_000), max_size=30), st.integers(0, 1500))
def test_a_copy_never_writes_past_the_cap_nor_reads_past_its_chunk(text: str, cuts: list[int], cap: int) -> None:
    data = text.encode()
    source = Source(chunked(data, cuts))
    out: list[str] = []
    copied = copy_log(source, out.append, cap=cap, seconds=None)
    written = "".join(out)
    assert copied.written == min(len(data), cap)
    assert source.pulled <= cap + source.biggest  # never more than the chunk that reached the cap
    assert (copied.cut is not None) == (len(data) > cap)
    # Exactly the log's first bytes decoded; cut, a character the cap split is left out, never made up.
    shown = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data[:cap], final=copied.cut is None)
    assert written == shown + ("\n" if shown and not shown.endswith("\n") else "")
    assert len(written.encode()) <= cap + 1
    assert written == "" or written.endswith("\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=50), min_size=1, max_size=40), st.integers(1, 40),
       st.floats(0.5, 20.0))
def test_a_trickling_log_is_cut_at_the_deadline(chunks: list[bytes], seconds_per_chunk: int, limit: float) -> None:
    """A clock that moves `seconds_per_chunk` per chunk pulled: the copy stops at the deadline, whole-time, never per read."""
    now = [0.0]

    def trickle() -> Iterator[bytes]:
        for c in chunks:
            now[0] += seconds_per_chunk
            yield c

    pulled = 0
    out: list[str] = []

    def counting() -> Iterator[bytes]:
        nonlocal pulled
        for c in trickle():
            pulled += 1
            yield c

    copied = copy_log(counting(), out.append, cap=None, seconds=limit, clock=lambda: now[0])
    allowed = int(-(-limit // seconds_per_chunk))  # chunks pulled before the clock reached the deadline
    assert pulled <= max(1, allowed)
    # Cut exactly when the deadline came before the source said it had ended (its end is not waited for past it).
    assert (copied.cut is not None) == (len(chunks) * seconds_per_chunk >= limit)
    assert "".join(out) == "" or "".join(out).endswith("\n")


@given(st.binary(max_size=3000), st.integers(1, 100))
def test_chunks_are_re_cut_to_the_size_asked(data: bytes, most: int) -> None:
    pieces = list(bounded_chunks([data, data], most))
    assert b"".join(pieces) == data + data and all(0 < len(p) <= most for p in pieces)
