"""The gate process's own `/metrics` page (the return path's histograms), served on a port of its pod.

One GET path, `/metrics`; anything else is 404. The page is rendered at each scrape from
`ReturnMetrics`; the server runs in a daemon thread, so it ends with the gate's process.
"""

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def serve_metrics(render: Callable[[], str], port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:  # noqa: S104
    """Serve `render()` at GET /metrics on `port` (0: any free one, read from `server_address`); return the server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - a scrape every 15 s is no news
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gate-metrics", daemon=True).start()
    return server
