"""A fault-injecting HTTP proxy on loopback, in front of a real server (s3proxy): hang, 5xx, reset, slow.

Each client connection carries one request (the proxy makes it `Connection: close`), so every
request is seen and can be hit by a fault. A `Fault` matches requests by method and a substring of
the path and hits the first `times` of them; requests no fault hits are forwarded untouched.
"""

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Fault:
    """What to do to matching requests.

    kind: "hang" (read the request, never answer), "status" (answer `status` with an S3 error body),
    "reset" (forward, then reset the connection after `after_bytes` of the response), "slow" (forward,
    but wait `delay` seconds before the response and `trickle` seconds between its 1 KiB pieces).
    """

    kind: str
    method: str = ""
    path: str = ""
    times: int = 1_000_000
    status: int = 503
    after_bytes: int = 0
    delay: float = 0.0
    trickle: float = 0.0
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (not self.method or method == self.method) and self.path in path and self.hits < self.times


@dataclass
class FaultProxy:
    """The running proxy: its URL, the faults to apply (edit freely) and every request line it saw."""

    url: str
    faults: list[Fault] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)

    def count(self, method: str, path: str = "") -> int:
        """How many requests with `method` and `path` in their path reached the proxy."""
        return sum(1 for m, p in self.seen if m == method and path in p)


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before sending a request")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _close_after(head: bytes) -> bytes:
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith((b"connection:", b"keep-alive:"))]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
    conn.close()


class _Handler:
    def __init__(self, proxy: FaultProxy, upstream: tuple[str, int], lock: threading.Lock) -> None:
        self.proxy, self.upstream, self.lock = proxy, upstream, lock

    def __call__(self, conn: socket.socket) -> None:
        try:
            head, rest = _read_head(conn)
        except OSError:
            conn.close()
            return
        method, path = (head.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + ["", ""])[:2]
        with self.lock:
            self.proxy.seen.append((method, path))
            fault = next((f for f in self.proxy.faults if f.matches(method, path)), None)
            if fault:
                fault.hits += 1
        if fault and fault.kind == "hang":
            time.sleep(3600)  # never answers; the daemon thread dies with the test process
            return
        if fault and fault.kind == "status":
            code = {503: "SlowDown", 403: "AccessDenied", 404: "NoSuchKey"}.get(fault.status, "InternalError")
            body = f"<Error><Code>{code}</Code></Error>".encode()
            conn.sendall(f"HTTP/1.1 {fault.status} Injected\r\nContent-Type: application/xml\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            conn.close()
            return
        up = socket.create_connection(self.upstream)
        up.sendall(_close_after(head) + rest)
        threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()  # the rest of the request body
        sent = 0
        try:
            if fault and fault.kind == "slow":
                time.sleep(fault.delay)
            while chunk := up.recv(1024 if fault and fault.kind in ("slow", "reset") else 65536):
                if fault and fault.kind == "reset" and sent + len(chunk) > fault.after_bytes:
                    conn.sendall(chunk[:max(0, fault.after_bytes - sent)])
                    _reset(conn)
                    return
                conn.sendall(chunk)
                sent += len(chunk)
                if fault and fault.kind == "slow" and fault.trickle:
                    time.sleep(fault.trickle)
        except OSError:
            pass
        finally:
            up.close()
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        conn.close()


@contextmanager
def fault_proxy(upstream_url: str) -> Iterator[FaultProxy]:
    """Listen on 127.0.0.1 and forward to `upstream_url` (http://host:port), applying the proxy's faults."""
    host, port = upstream_url.removeprefix("http://").rstrip("/").split(":")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = FaultProxy(f"http://127.0.0.1:{listener.getsockname()[1]}")
    handler = _Handler(proxy, (host, int(port)), threading.Lock())
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handler, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        listener.close()
