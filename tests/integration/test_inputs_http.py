"""The input layer's HTTP reader against a real server on 127.0.0.1 that answers anything, at any pace.

Invariants, in words: whatever the server sends (random bytes, a huge body, a body that says it is huge,
a status line or body trickled one byte at a time), `http_get` returns an Answer or raises InputError
naming the URL; a trickle ends in the deadline error (a total deadline for the whole answer, not per
read); a body past the cap is refused. The time bound is the test's own alarm, never a measurement.
"""

import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.httpget import Answer, http_get
from offhours.scripts.metrics.prometheus import PrometheusError, read_services

GUARD_SECONDS = 60  # a hang, never a slow machine: every answer here is bounded to a few seconds


class Server:
    """A TCP server whose every connection gets `self.reply` (bytes), sent in `self.pieces` with `self.pause` between."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply, self.piece, self.pause = b"", 1 << 20, 0.0
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        reply, piece, pause = self.reply, self.piece, self.pause
        try:
            conn.settimeout(5)
            conn.recv(65536)
            for at in range(0, len(reply), piece):
                if self.stop.is_set():
                    break
                conn.sendall(reply[at:at + piece])
                if pause:
                    time.sleep(pause)
        except OSError:
            pass  # the client gave up: that is what a deadline does
        finally:
            conn.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop.set()
    s.sock.close()


def guarded(call: Any) -> Answer | InputError:
    def overrun(signum: int, frame: Any) -> None:
        raise AssertionError(f"no outcome within {GUARD_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.alarm(GUARD_SECONDS)
    try:
        return call()
    except InputError as err:
        assert "\n" not in str(err)
        return err
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def ok(body: bytes, chunked: bool = False) -> bytes:
    if chunked:
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
            b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7)) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=st.one_of(st.binary(max_size=3000), st.builds(ok, st.binary(max_size=3000), st.booleans()),
                       st.builds(lambda b: ok(b)[:-1], st.binary(min_size=1, max_size=300))),
       cap=st.integers(1, 4000))
def test_any_answer_is_an_answer_or_the_named_error(server: Server, reply: bytes, cap: int) -> None:
    server.reply, server.piece, server.pause = reply, 1 << 20, 0.0
    result = guarded(lambda: http_get(server.url + "/x", 5.0, cap))
    if isinstance(result, InputError):
        assert result.source.startswith(server.url)
    else:
        assert len(result.body) <= cap


@pytest.mark.parametrize("where", ["status line", "body"])
def test_a_trickle_ends_in_the_deadline_error(server: Server, where: str) -> None:
    """Fault class: a socket timeout bounds each read, so one byte a second held a reader for as long as it liked."""
    body = b"x" * 10_000
    server.reply = ok(body)
    server.piece, server.pause = 1, 0.05  # 20 bytes a second: far past the deadline for every part of the answer
    if where == "body":
        head = len(ok(body)) - len(body)
        server.reply = ok(body)
        server.piece = head  # the header at once, then the body at the same pace: pieces of the header's size
        server.pause = 0.2
    result = guarded(lambda: http_get(server.url + "/x", 1.0, 1 << 20))
    assert isinstance(result, InputError) and "gave no whole answer in 1 s" in result.problem


def test_a_body_past_the_cap_is_refused(server: Server) -> None:
    server.reply, server.piece, server.pause = ok(b"x" * 100_000), 1 << 20, 0.0
    result = guarded(lambda: http_get(server.url + "/x", 5.0, 1000))
    assert isinstance(result, InputError) and "more than the 1,000" in result.problem
    server.reply = ok(b"x" * 100_000, chunked=True)  # no Content-Length: counted as it arrives
    result = guarded(lambda: http_get(server.url + "/x", 5.0, 1000))
    assert isinstance(result, InputError) and "more than the 1,000 bytes allowed" in result.problem


def test_a_trickling_prometheus_is_one_short_line(server: Server) -> None:
    """A Prometheus that trickles its answers: every query's deadline error, one line naming the query."""
    server.reply, server.piece, server.pause = ok(b'{"status":"success","data":{"resultType":"vector","result":[]}}'), 1, 0.1
    with pytest.raises(PrometheusError) as err:
        guarded(lambda: read_services(server.url, "service", "1m", timeout=1.0))
    assert "gave no whole answer in 1 s" in str(err.value) and "\n" not in str(err.value)
