"""The direct scraper's HTTP client against pods that misbehave the ways real ones do.

Real sockets on loopback: each "pod" below is a listening socket whose answer is one fault. A
fault stays with its pod (an error naming it), every other pod is read, and no pod can hold the
tick past the timeout, not even one that keeps sending a byte at a time.
"""

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.inputs.pages import FetchError, fetch_pages
from offhours.scripts.metrics import scrape as scrape_module
from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.scrape import Target, scrape

Behaviour = Callable[[socket.socket, threading.Event], None]


def _page() -> bytes:
    server = EmulatedServer(engines=2)
    server.feed(120, 1200, 120, 60)
    return server.render().encode()


PAGE = _page()


def _answer(head: str, body: bytes) -> Behaviour:
    def behave(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head.encode() + b"\r\n\r\n" + body)
    return behave


def _chunked(conn: socket.socket, stop: threading.Event) -> None:
    thirds = [PAGE[:5000], PAGE[5000:5001], PAGE[5001:]]
    body = b"".join(f"{len(c):x};note=x\r\n".encode() + c + b"\r\n" for c in thirds) + b"0\r\n\r\n"
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n" + body)


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait()  # accepts, reads nothing, answers nothing: a hung process


def _drip(conn: socket.socket, stop: threading.Event) -> None:
    # A slow loris: a byte every 50 ms, each well inside any per-read timeout, never the whole page.
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(PAGE)}\r\n\r\n".encode())
    for byte in PAGE:
        if stop.wait(0.05):
            return
        try:
            conn.sendall(bytes([byte]))
        except OSError:
            return


def _truncated(conn: socket.socket, stop: threading.Event) -> None:
    # The pod dies mid-page, at a line boundary: what arrived parses, but it is not the page.
    cut = PAGE.rindex(b"\n", 0, len(PAGE) // 2) + 1
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(PAGE)}\r\n\r\n".encode() + PAGE[:cut])


def _endless(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
    try:
        while not stop.is_set():
            conn.sendall(b"# filler " + b"x" * 1000 + b"\n")
    except OSError:
        return


BEHAVIOURS: dict[str, Behaviour] = {
    "ok": _answer(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                  f"Content-Length: {len(PAGE)}", PAGE),
    "ok-http10-until-close": _answer("HTTP/1.0 200 OK", PAGE),
    "ok-chunked": _chunked,
    "error-500": _answer("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4", b"oops"),
    "not-http": _answer("SSH-2.0-OpenSSH_9.2", b""),
    "closed": lambda conn, stop: None,  # reads the request, closes without a word
    "silent": _silent,
    "drip": _drip,
    "truncated": _truncated,
    "endless": _endless,
}


class Pods:
    """One listening socket per behaviour; each connection gets its pod's behaviour in a thread."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.listeners: dict[str, socket.socket] = {}
        self.threads: list[threading.Thread] = []

    def add(self, name: str, behave: Behaviour) -> Target:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.2)
        self.listeners[name] = listener
        thread = threading.Thread(target=self._serve, args=(listener, behave), daemon=True)
        thread.start()
        self.threads.append(thread)
        return Target(name, f"http://127.0.0.1:{listener.getsockname()[1]}/metrics")

    def _serve(self, listener: socket.socket, behave: Behaviour) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                try:
                    conn.recv(65536)
                    behave(conn, self.stop)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=5)
        for listener in self.listeners.values():
            listener.close()


@pytest.fixture
def pods() -> Iterator[Pods]:
    running = Pods()
    yield running
    running.close()


def _refused_target() -> Target:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    return Target("refused", f"http://127.0.0.1:{port}/metrics")  # nothing listens there any more


def test_every_fault_stays_with_its_pod_and_none_holds_the_tick(pods: Pods, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scrape_module, "MAX_PAGE_BYTES", 256 * 1024)
    targets = [pods.add(name, behave) for name, behave in BEHAVIOURS.items()] + [_refused_target()]
    timeout = 0.5
    started = time.monotonic()
    result = scrape(targets, timeout=timeout, concurrency=4)
    elapsed = time.monotonic() - started

    assert sorted(result.readings) == ["ok", "ok-chunked", "ok-http10-until-close"]
    reference = result.readings["ok"]
    assert result.readings["ok-chunked"] == reference and result.readings["ok-http10-until-close"] == reference
    assert reference.engines == 2 and reference.requests_total == 120
    errors = result.errors
    assert sorted(errors) == ["closed", "drip", "endless", "error-500", "not-http", "refused", "silent", "truncated"]
    assert errors["closed"] == "closed: scrape failed: connection closed before an answer"
    assert errors["error-500"] == "error-500: scrape failed: HTTP 500 Internal Server Error"
    assert errors["not-http"].startswith("not-http: scrape failed: not an HTTP response")
    assert errors["refused"] == "refused: scrape failed: connection refused"
    assert errors["silent"] == "silent: scrape failed: no whole answer in 0.5 s"
    assert errors["drip"] == "drip: scrape failed: no whole answer in 0.5 s"
    assert errors["truncated"].startswith("truncated: scrape failed: page truncated: ")
    assert errors["endless"] == f"endless: scrape failed: page larger than {256 * 1024} bytes"
    # The deadline is per page and whole: three rounds of 4 at most (11 targets), not a per-read timeout.
    assert elapsed < 3 * timeout + 1.0, f"the scrape took {elapsed:.1f} s with a {timeout} s timeout"


def test_a_page_in_a_charset_other_than_utf8_is_decoded_by_its_header(pods: Pods) -> None:
    page = "# Zähler über alle Engines\n".encode("iso-8859-1") + PAGE
    target = pods.add("latin1", _answer(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=iso-8859-1\r\n"
                                        f"Content-Length: {len(page)}", page))
    [(index, text)] = list(fetch_pages([target.url], timeout=2.0, concurrency=1, max_bytes=1 << 20))
    assert index == 0 and isinstance(text, str) and text.startswith("# Zähler über alle Engines\n")


# Closes the class "one pod's answer raises out of the scrape and every pod's reading is lost":
# a charset whose codec fails on decode (undefined, idna) or is no text codec (base64).
@pytest.mark.parametrize("charset, problem", [
    ("undefined", "cannot decode the page as charset 'undefined'"),
    ("idna", None),
    ("base64", None),
])
def test_a_pods_bad_charset_is_that_pods_error_and_the_others_are_read(pods: Pods, charset: str,
                                                                       problem: str | None) -> None:
    good = pods.add("good", _answer("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                    f"Content-Length: {len(PAGE)}", PAGE))
    bad = pods.add("bad", _answer(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset={charset}\r\n"
                                  f"Content-Length: {len(PAGE)}", PAGE))
    result = scrape([good, bad], timeout=2)
    assert "good" in result.readings
    if problem:
        assert problem in result.errors["bad"]
    else:
        assert "bad" in result.readings or "bad" in result.errors


@pytest.mark.parametrize("body, problem", [
    (b"5\r\nabcde\r\n0\r\n\r\n", None),
    (b"-5\r\nabcde\r\n0\r\n\r\n", "bad chunked body: chunk size b'-5' is not hexadecimal"),
    (b"1_0\r\nabcde\r\n0\r\n\r\n", "bad chunked body: chunk size b'1_0' is not hexadecimal"),
    (b"9\r\nabcde\r\n0\r\n\r\n", "bad chunked body: a chunk is cut off"),
    (b"5\r\nabcde\r\n", "bad chunked body: a chunk size line is cut off"),
])
def test_a_chunked_body_is_joined_or_refused_by_name(pods: Pods, body: bytes, problem: str | None) -> None:
    target = pods.add("chunked", _answer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", body))
    [(_, outcome)] = list(fetch_pages([target.url], timeout=2.0, concurrency=1, max_bytes=1 << 20))
    assert (outcome == "abcde") if problem is None else (str(outcome) == problem and isinstance(outcome, FetchError))


@pytest.mark.parametrize("url, problem", [
    ("http://no-such-pod.invalid:8000/metrics", "cannot resolve 'no-such-pod.invalid'"),
    ("http://10.0.0.1:99999/metrics", "bad URL 'http://10.0.0.1:99999/metrics': Port out of range"),
    ("http://:8000/metrics", "bad URL 'http://:8000/metrics': no host"),
])
def test_an_address_that_cannot_be_reached_is_named_and_the_others_are_read(pods: Pods, url: str, problem: str) -> None:
    good = pods.add("ok", BEHAVIOURS["ok"])
    outcomes = dict(fetch_pages([url, good.url], 1.0, 2, 1 << 20))
    assert isinstance(outcomes[0], FetchError) and str(outcomes[0]).startswith(problem)
    assert outcomes[1] == PAGE.decode()


def test_no_targets_no_connections() -> None:
    assert scrape([], timeout=0.1).readings == {}


class _Scripted:
    """One listening socket that answers each connection with the next script: (pieces of bytes, pause between)."""

    def __init__(self) -> None:
        self.script: tuple[list[bytes], float] = ([], 0.0)
        self.pods = Pods()
        self.target = self.pods.add("scripted", self._behave)

    def _behave(self, conn: socket.socket, stop: threading.Event) -> None:
        pieces, pause = self.script
        for piece in pieces:
            conn.sendall(piece)
            if pause:
                time.sleep(pause)


@pytest.fixture(scope="module")
def scripted() -> Iterator[_Scripted]:
    server = _Scripted()
    yield server
    server.pods.close()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=3000), framing=st.sampled_from(["length", "chunked", "close"]),
       cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_a_well_formed_answer_split_anywhere_reads_exactly_its_body(scripted: _Scripted, body: bytes, framing: str,
                                                                    cuts: list[int]) -> None:
    """However the network cuts an answer into pieces, and however it is framed, the page is its body."""
    if framing == "length":
        raw = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    elif framing == "chunked":
        chunks = _split(body, cuts[::-1])
        raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"".join(f"{len(c):X}\r\n".encode() + c + b"\r\n" for c in chunks if c) + b"0\r\n\r\n")
    else:
        raw = b"HTTP/1.0 200 OK\r\n\r\n" + body
    scripted.script = (_split(raw, cuts), 0.002)
    [(_, page)] = list(fetch_pages([scripted.target.url], 5.0, 1, 1 << 20))
    assert page == body.decode("utf-8", errors="replace")


_HEADS = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
          b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"HTTP/1.1 302 Found\r\n\r\n",
          b"HTTP/1.1 200 OK\r\nContent-Type: x;charset=nope\r\n\r\n"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=400),
                     st.builds(lambda head, rest: head + rest, st.sampled_from(_HEADS), st.binary(max_size=200))))
def test_any_bytes_answer_give_a_page_or_a_named_error_never_an_exception(scripted: _Scripted, raw: bytes) -> None:
    """A proxy, a port reused by another program, a broken server: whatever comes back, one outcome per pod."""
    scripted.script = ([raw], 0.0)
    [(index, outcome)] = list(fetch_pages([scripted.target.url], 2.0, 1, 1 << 20))
    assert index == 0 and isinstance(outcome, (str, FetchError))
    if isinstance(outcome, str):
        assert raw.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200"))


def test_a_chunk_whose_data_looks_like_the_last_chunk_is_not_taken_for_the_end(scripted: _Scripted) -> None:
    data = b"x\r\n0\r\n"  # a chunk's data that, with the chunk's own CRLF, ends like the last chunk
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    scripted.script = ([head + b"6\r\n" + data + b"\r\n", b"2\r\nyz\r\n0\r\n\r\n"], 0.05)
    [(_, page)] = list(fetch_pages([scripted.target.url], 5.0, 1, 1 << 20))
    assert page == "x\r\n0\r\nyz"


def test_out_of_file_descriptors_is_each_pages_error_not_the_ticks(pods: Pods, monkeypatch: pytest.MonkeyPatch) -> None:
    good = pods.add("ok", BEHAVIOURS["ok"])
    real_socket = socket.socket
    opened = []

    def one_socket_only(*args: object, **kwargs: object) -> socket.socket:
        if "fileno" not in kwargs:  # a new client socket (the test pods' accepted ones wrap a descriptor)
            if opened:
                raise OSError(24, "Too many open files")
            opened.append(1)
        return real_socket(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "socket", one_socket_only)
    outcomes = dict(fetch_pages([good.url, good.url], 2.0, 2, 1 << 20))
    assert outcomes[0] == PAGE.decode()
    assert isinstance(outcomes[1], FetchError) and str(outcomes[1]) == "cannot open a socket: [Errno 24] Too many open files"
