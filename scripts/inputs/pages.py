"""Fetch many small HTTP pages at once, in one thread: non-blocking sockets and a selector.

Why not a pool of threads running `http.client`: on a 1,000-pod tick the threads' fight over the
GIL cost the gate more CPU than reading the pages (bench/bench_gate.py), and `http.client`'s
timeout bounds each read, not the answer, so a pod that sent a byte every 50 ms held the tick for
minutes. Here every page has one deadline for its whole answer, and a page is done when its
Content-Length (or its last chunk) has arrived, or when the server closes.

HTTP/1.1 GET with `Connection: close`; bodies plain, with Content-Length, chunked, or up to the
close (HTTP/1.0). Nothing else is needed to read a metrics endpoint.
"""

import codecs
import errno
import os
import re
import selectors
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: ([^\r\n]*))?")
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,16}")
_CHARSET = re.compile(r'charset="?([^";\s]+)', re.IGNORECASE)
_HEADER_ALLOWANCE = 64 * 1024  # a metrics answer's status line and headers are far below this


class FetchError(Exception):
    """A page could not be fetched: its address, the connection, the deadline, the answer or its size."""


@dataclass
class _Exchange:
    """One page being fetched: what is left to send, what has arrived, and by when it must be whole."""

    index: int
    sock: socket.socket
    request: bytes
    deadline: float
    received: bytearray = field(default_factory=bytearray)
    body_start: int = -1  # where the body begins in `received`, once the header has arrived
    content_length: int | None = None
    chunked: bool = False


def fetch_pages(urls: Sequence[str], timeout: float, concurrency: int,
                max_bytes: int) -> Iterator[tuple[int, str | FetchError]]:
    """Fetch every URL, at most `concurrency` at a time; yield (index, text or error) as each ends.

    Each page must be whole within `timeout` seconds of its connection starting; a page of more
    than `max_bytes` is refused. Errors are values: one page's fault never stops the others.
    """
    selector = selectors.DefaultSelector()
    waiting = deque(range(len(urls)))
    active: dict[int, _Exchange] = {}
    try:
        while waiting or active:
            while waiting and len(active) < max(1, concurrency):
                index = waiting.popleft()
                try:
                    exchange = _connect(index, urls[index], time.monotonic() + timeout)
                except FetchError as err:
                    yield index, err
                    continue
                active[index] = exchange
                selector.register(exchange.sock, selectors.EVENT_WRITE, exchange)
            if not active:
                continue
            ended: list[tuple[int, str | FetchError]] = []
            pause = min(e.deadline for e in active.values()) - time.monotonic()
            for key, _ in selector.select(max(0.0, pause)):
                exchange = key.data
                outcome = _advance(exchange, selector, max_bytes)
                if outcome is not None:
                    ended.append((exchange.index, outcome))
            now, done = time.monotonic(), {index for index, _ in ended}
            ended += [(e.index, FetchError(f"no whole answer in {timeout:g} s"))
                      for e in active.values() if e.deadline <= now and e.index not in done]
            for index, outcome in ended:
                exchange = active.pop(index)
                selector.unregister(exchange.sock)
                exchange.sock.close()
            yield from ended
    finally:
        for exchange in active.values():
            exchange.sock.close()
        selector.close()


def _connect(index: int, url: str, deadline: float) -> _Exchange:
    try:
        parts = urlsplit(url)
        host, port = unquote(parts.hostname or ""), parts.port or 80
    except ValueError as err:  # a port out of range, a bracket not closed
        raise FetchError(f"bad URL {url!r}: {err}") from None
    if not host:
        raise FetchError(f"bad URL {url!r}: no host")
    try:
        # Pods are addressed by IP: resolving a literal (a zone index too) never waits on DNS.
        address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)[0]
    except socket.gaierror:
        try:
            address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        except (socket.gaierror, UnicodeError) as err:
            raise FetchError(f"cannot resolve {host!r}: {err}") from None
    family, _, _, _, sockaddr = address
    try:  # out of file descriptors, an address family this host lacks: this page's error, not the tick's
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as err:
        raise FetchError(f"cannot open a socket: {err}") from None
    sock.setblocking(False)
    try:
        code = sock.connect_ex(sockaddr)
    except OSError as err:
        code = err.errno or errno.EINVAL
    if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
        sock.close()
        raise FetchError(_describe(code))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = (f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: text/plain\r\n"
               "User-Agent: offhours-gate\r\nConnection: close\r\n\r\n").encode("ascii")
    return _Exchange(index, sock, request, deadline)


def _describe(code: int) -> str:
    return "connection refused" if code == errno.ECONNREFUSED else os.strerror(code).lower()


def _advance(exchange: _Exchange, selector: selectors.BaseSelector, max_bytes: int) -> str | FetchError | None:
    """Do what the socket is ready for; return the page or the error once the exchange has ended."""
    sock = exchange.sock
    try:
        if exchange.request:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                return FetchError(_describe(code))
            exchange.request = exchange.request[sock.send(exchange.request):]
            if not exchange.request:
                selector.modify(sock, selectors.EVENT_READ, exchange)
            return None
        data = sock.recv(256 * 1024)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError as err:
        return FetchError(_describe(err.errno) if err.errno else str(err))
    if data:
        exchange.received += data
        if len(exchange.received) > max_bytes + _HEADER_ALLOWANCE:
            return FetchError(f"page larger than {max_bytes} bytes")
        return _page(exchange, max_bytes) if _is_whole(exchange) else None
    return _page(exchange, max_bytes)  # the server closed: what arrived is all there is


def _is_whole(exchange: _Exchange) -> bool:
    """Tell whether the answer is complete before the server closes (servers may keep the connection)."""
    received = exchange.received
    if exchange.body_start < 0:
        end = received.find(b"\r\n\r\n")
        if end < 0:
            return False
        exchange.body_start = end + 4
        for line in bytes(received[:end]).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length" and value.strip().isdigit():
                exchange.content_length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                exchange.chunked = True
    if exchange.chunked:
        if not received.endswith(b"\r\n0\r\n\r\n"):
            return False
        try:  # the bytes of a last chunk can also end a chunk's data: whole only if the chunks add up
            _dechunk(bytes(received[exchange.body_start:]))
        except ValueError:
            return False
        return True
    return exchange.content_length is not None and len(received) - exchange.body_start >= exchange.content_length


def _page(exchange: _Exchange, max_bytes: int) -> str | FetchError:
    """Check the whole answer and return its body as text, or what is wrong with it."""
    raw = bytes(exchange.received)
    if not raw:
        return FetchError("connection closed before an answer")
    head, separator, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = _STATUS_LINE.fullmatch(lines[0])
    if not separator or not status:
        return FetchError(f"not an HTTP response: {raw[:60]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    code, reason = int(status.group(1)), (status.group(2) or b"").decode("latin-1")
    if code != 200:
        return FetchError(f"HTTP {code} {reason}".rstrip())
    if "chunked" in headers.get("transfer-encoding", "").lower():
        try:
            body = _dechunk(body)
        except ValueError as err:
            return FetchError(f"bad chunked body: {err}")
    elif headers.get("content-length", "").isdigit():
        expected = int(headers["content-length"])
        if len(body) < expected:
            return FetchError(f"page truncated: {len(body)} of {expected} bytes arrived")
        body = body[:expected]
    if len(body) > max_bytes:
        return FetchError(f"page larger than {max_bytes} bytes")
    charset = _CHARSET.search(headers.get("content-type", ""))
    codec = charset.group(1) if charset else "utf-8"
    try:
        # A pod names any codec it likes; a bytes-to-bytes one (base64, rot13) is no charset, so read UTF-8.
        if not getattr(codecs.lookup(codec), "_is_text_encoding", True):
            codec = "utf-8"
        return body.decode(codec, errors="replace")
    # A codec that still fails (idna, "undefined") is this pod's error, never the whole scrape's.
    except (LookupError, UnicodeError, ValueError) as err:
        return FetchError(f"cannot decode the page as charset {codec!r}: {type(err).__name__}")


def _dechunk(body: bytes) -> bytes:
    """Join the chunks of a chunked body (RFC 9112 section 7.1); chunk extensions and trailers are ignored."""
    out = bytearray()
    pos = 0
    while True:
        line_end = body.find(b"\r\n", pos)
        if line_end < 0:
            raise ValueError("a chunk size line is cut off")
        size_text = body[pos:line_end].split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise ValueError(f"chunk size {size_text[:20]!r} is not hexadecimal")
        size = int(size_text, 16)
        if size == 0:
            return bytes(out)
        start = line_end + 2
        if len(body) < start + size + 2 or body[start + size:start + size + 2] != b"\r\n":
            raise ValueError("a chunk is cut off")
        out += body[start:start + size]
        pos = start + size + 2
