"""One HTTP(S) GET within a total deadline for the whole answer and a cap on its bytes.

A socket timeout bounds each read, not the answer: a server that sends a byte every second holds a
client with a 10 s timeout for as long as it likes. Here every read from the socket first checks the
monotonic clock against the one deadline and sets the socket's timeout to the time left, so status
line, headers and body together end by the deadline; the body is counted as it arrives and refused
past its cap (a Content-Length past it is refused before the body is read).
"""

import base64
import http.client
import io
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from offhours.scripts.inputs.errors import InputError

_READ_SIZE = 64 * 1024


class _DeadlinePassed(Exception):
    pass


class _DeadlineReader(io.RawIOBase):
    """The socket as a file whose every read ends by the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError:
            raise _DeadlinePassed from None


class _DeadlineSocket:
    """What http.client needs of a socket: `sendall` and `makefile`, each bounded by the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _DeadlinePassed
        self._sock.settimeout(left)
        try:
            self._sock.sendall(data)
        except TimeoutError:
            raise _DeadlinePassed from None

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        pass  # http.client closes the connection while its answer is still read (as a real socket's file keeps it open)


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read whole: its status, its Content-Type and its body."""

    status: int
    content_type: str
    body: bytes


def http_get(url: str, timeout: float, max_bytes: int, params: dict[str, str] | None = None,
             accept: str = "application/json") -> Answer:
    """GET `url` (with `params` added to its query); the whole answer within `timeout` seconds and `max_bytes`.

    Any status is an answer (the caller judges it); InputError naming the URL for anything else: an
    address that cannot be reached, no whole answer by the deadline, a body past the cap, a malformed answer.
    """
    deadline = time.monotonic() + timeout
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise InputError(url, f"is not a valid URL: {err}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(url, "is not an http:// or https:// URL")
    query = "&".join(q for q in (parts.query, urlencode(params or {})) if q)
    target = (parts.path or "/") + (f"?{query}" if query else "")
    headers = {"Accept": accept, "User-Agent": "offhours", "Connection": "close"}
    if parts.username is not None:  # user:password@host, as requests read it
        token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode("ascii")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, port, timeout=max(0.001, timeout))
    raw: socket.socket | None = None
    shown = f"{parts.scheme}://{parts.hostname}{f':{port}' if port else ''}{parts.path}"  # no password, no query
    try:
        connection.connect()
        if time.monotonic() >= deadline:
            raise _DeadlinePassed
        raw = connection.sock
        connection.sock = _DeadlineSocket(raw, deadline)
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        length = response.getheader("Content-Length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise InputError(shown, f"answered {int(length):,} bytes, more than the {max_bytes:,} allowed")
        body = bytearray()
        while chunk := response.read(_READ_SIZE):
            body += chunk
            if len(body) > max_bytes:
                raise InputError(shown, f"answered more than the {max_bytes:,} bytes allowed")
        return Answer(response.status, response.getheader("Content-Type", ""), bytes(body))
    except (_DeadlinePassed, TimeoutError):
        raise InputError(shown, f"gave no whole answer in {timeout:g} s") from None
    except http.client.HTTPException as err:
        raise InputError(shown, f"gave a malformed HTTP answer ({type(err).__name__})") from None
    except ConnectionRefusedError:
        raise InputError(shown, "cannot be reached: connection refused") from None
    except OSError as err:
        raise InputError(shown, f"cannot be reached: {err.strerror or err}") from None
    finally:
        connection.close()
        if raw is not None:
            raw.close()
