"""A stand-in for the one part that cannot run here, a GPU vLLM server: its /metrics page.

`EmulatedServer` keeps the counters and gauges of a vLLM V1 server (or an older V0 one) and
renders them in vLLM's exposition format: the same family names, HELP/TYPE lines, `model_name`
and `engine` labels, `_total` counters with their `_created` twins, and histograms. Load is fed
in per interval (requests, prompt and generation tokens), e.g. from a real traffic trace;
`serve_fleet` exposes many servers on loopback addresses for Prometheus and the direct scraper.
"""

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                    240.0, 480.0, 960.0, 1920.0, 7680.0)


def _fmt(value: float) -> str:
    return repr(float(value))


@dataclass
class _Engine:
    success: dict[str, float] = field(default_factory=lambda: {"stop": 0.0, "length": 0.0, "abort": 0.0})
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    running: float = 0.0
    waiting: float = 0.0
    kv: float = 0.0
    ttft: list[float] = field(default_factory=lambda: [0.0] * (len(_TTFT_BUCKETS) + 1))
    ttft_sum: float = 0.0
    e2e: list[float] = field(default_factory=lambda: [0.0] * (len(_LATENCY_BUCKETS) + 1))
    e2e_sum: float = 0.0


@dataclass
class EmulatedServer:
    """One vLLM server (one pod): `engines` data-parallel engines, V1 format unless `legacy`."""

    model_name: str = "meta-llama/Llama-3.1-8B-Instruct"
    engines: int = 1
    legacy: bool = False
    max_running_per_engine: float = 256.0
    created: float = field(default_factory=time.time)
    page: str | None = None  # served instead of the rendered page: a broken or hostile exporter
    failing: bool = False  # answer 503 Service Unavailable: a failed scrape
    clock: Callable[[], float] = time.time
    _engines: list[_Engine] = field(default_factory=list)
    _steady: tuple[float, float, float] | None = None
    _since: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._engines = [_Engine() for _ in range(self.engines)]

    def feed(self, requests: float, prompt_tokens: float, generation_tokens: float, seconds: float,
             latency_s: float = 2.0, waiting: float = 0.0) -> None:
        """Account `requests` finished over `seconds`, spread evenly over the engines.

        Running requests follow Little's law (arrival rate x latency); `waiting` is the queue.
        """
        share = 1.0 / len(self._engines)
        with self._lock:
            for engine in self._engines:
                finished = requests * share
                engine.success["stop"] += finished * 0.9
                engine.success["length"] += finished * 0.1
                engine.prompt_tokens += prompt_tokens * share
                engine.generation_tokens += generation_tokens * share
                engine.running = min(self.max_running_per_engine, finished / max(seconds, 1e-9) * latency_s)
                engine.waiting = waiting * share
                engine.kv = min(1.0, engine.running / self.max_running_per_engine)
                for buckets, counts, observed in ((_TTFT_BUCKETS, engine.ttft, latency_s / 10),
                                                  (_LATENCY_BUCKETS, engine.e2e, latency_s)):
                    for i, bound in enumerate((*buckets, float("inf"))):
                        if observed <= bound:
                            counts[i] += finished
                engine.ttft_sum += finished * latency_s / 10
                engine.e2e_sum += finished * latency_s

    def steady(self, requests_per_second: float, prompt_tokens_per_second: float,
               generation_tokens_per_second: float) -> None:
        """Count work continuously at these rates from now on (gauges untouched).

        Whenever the page is rendered, the counters hold exactly the work of the time elapsed, so a
        reader's rate depends on when it reads, not on a feeding thread's timing.
        """
        with self._lock:
            self._advance()
            self._steady = (requests_per_second, prompt_tokens_per_second, generation_tokens_per_second)
            self._since = self.clock()

    def _advance(self) -> None:
        if self._steady is None:
            return
        now = self.clock()
        elapsed, self._since = now - self._since, now
        requests, prompt, generation = (rate * elapsed / len(self._engines) for rate in self._steady)
        for engine in self._engines:
            engine.success["stop"] += requests
            engine.prompt_tokens += prompt
            engine.generation_tokens += generation

    def set_gauges(self, running: float, waiting: float, kv: float) -> None:
        """Set the gauges directly (e.g. to emulate gauges stuck after aborted requests)."""
        with self._lock:
            for engine in self._engines:
                engine.running, engine.waiting, engine.kv = running / self.engines, waiting / self.engines, kv

    def restart(self, engine: int | None = None) -> None:
        """Restart one engine (its counters and gauges start again from zero), or every engine."""
        with self._lock:
            for i in range(len(self._engines)) if engine is None else (engine,):
                self._engines[i] = _Engine()

    def _labels(self, engine: int, extra: str = "") -> str:
        if self.legacy:
            return f'{{{extra}model_name="{self.model_name}"}}'
        return f'{{engine="{engine}",{extra}model_name="{self.model_name}"}}'

    def render(self) -> str:
        """Render the /metrics page (or the page set in `page`)."""
        if self.page is not None:
            return self.page
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")

        with self._lock:
            self._advance()
            engines = list(enumerate(self._engines))
            family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
            out += [f"vllm:num_requests_running{self._labels(i)} {_fmt(e.running)}" for i, e in engines]
            family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
            out += [f"vllm:num_requests_waiting{self._labels(i)} {_fmt(e.waiting)}" for i, e in engines]
            if self.legacy:
                family("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.")
                out += [f"vllm:gpu_cache_usage_perc{self._labels(i)} {_fmt(e.kv)}" for i, e in engines]
            else:
                family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
                out += [f"vllm:kv_cache_usage_perc{self._labels(i)} {_fmt(e.kv)}" for i, e in engines]
            for name, help_text, attr in (
                ("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
                ("vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens"),
            ):
                family(f"{name}_total", "counter", help_text)
                out += [f"{name}_total{self._labels(i)} {_fmt(getattr(e, attr))}" for i, e in engines]
                family(f"{name}_created", "gauge", help_text)
                out += [f"{name}_created{self._labels(i)} {_fmt(self.created)}" for i, _ in engines]
            help_text = "Count of successfully processed requests."
            family("vllm:request_success_total", "counter", help_text)
            for i, e in engines:
                for reason, count in e.success.items():
                    labels = self._labels(i, 'finished_reason="' + reason + '",')
                    out.append(f"vllm:request_success_total{labels} {_fmt(count)}")
            family("vllm:request_success_created", "gauge", help_text)
            for i, e in engines:
                for reason in e.success:
                    labels = self._labels(i, 'finished_reason="' + reason + '",')
                    out.append(f"vllm:request_success_created{labels} {_fmt(self.created)}")
            for name, help_text, buckets, attr in (
                ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                 _TTFT_BUCKETS, "ttft"),
                ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                 _LATENCY_BUCKETS, "e2e"),
            ):
                family(name, "histogram", help_text)
                for i, e in engines:
                    counts = getattr(e, attr)
                    for bound, count in zip((*buckets, float("inf")), counts):
                        le = "+Inf" if bound == float("inf") else _fmt(bound)
                        labels = self._labels(i, 'le="' + le + '",')
                        out.append(f"{name}_bucket{labels} {_fmt(count)}")
                    out.append(f"{name}_count{self._labels(i)} {_fmt(counts[-1])}")
                    out.append(f"{name}_sum{self._labels(i)} {_fmt(getattr(e, attr + '_sum'))}")
                family(f"{name}_created", "gauge", help_text)
                out += [f"{name}_created{self._labels(i)} {_fmt(self.created)}" for i, _ in engines]
        return "\n".join(out) + "\n"


class Fleet:
    """Serve many emulated servers over HTTP on loopback, each at its own (host, port)."""

    def __init__(self, servers: Sequence[tuple[str, int, EmulatedServer]]) -> None:
        self.servers = list(servers)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._started: list[asyncio.base_events.Server] = []
        self._at: dict[tuple[str, int], asyncio.base_events.Server] = {}  # what listens where, for remove()

    async def _handle(self, server: EmulatedServer, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            path = request.split(b" ", 2)[1] if b" " in request else b""
            if server.failing:
                body, head = b"unavailable\n", b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
            elif path == b"/metrics":
                body = server.render().encode()
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            else:
                body, head = b"not found\n", b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
            writer.write(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _start(self) -> None:
        for host, port, server in self.servers:
            async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, s: EmulatedServer = server) -> None:
                await self._handle(s, r, w)
            self._started.append(await asyncio.start_server(handler, host, port, backlog=256))
            self._at[(host, port)] = self._started[-1]

    def add(self, host: str, port: int, server: EmulatedServer) -> None:
        """Serve one more emulated server while running (a pod that appeared)."""
        async def start_one() -> None:
            async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                await self._handle(server, r, w)
            self._started.append(await asyncio.start_server(handler, host, port, backlog=256))
            self._at[(host, port)] = self._started[-1]

        self.servers.append((host, port, server))
        asyncio.run_coroutine_threadsafe(start_one(), self._loop).result(timeout=30)

    def remove(self, host: str, port: int) -> None:
        """Stop serving at (host, port): its pod went away (its address may be given to a new pod). Nothing there: no-op."""
        async def close_one() -> None:
            listener = self._at.pop((host, port), None)
            if listener is not None:
                self._started.remove(listener)
                listener.close()
                await listener.wait_closed()

        self.servers = [entry for entry in self.servers if entry[:2] != (host, port)]
        asyncio.run_coroutine_threadsafe(close_one(), self._loop).result(timeout=30)

    def start(self) -> "Fleet":
        """Start serving in a background thread."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=60)
        return self

    def stop(self) -> None:
        """Stop serving and close every socket."""
        async def close() -> None:
            for srv in self._started:
                srv.close()
                await srv.wait_closed()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> "Fleet":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
