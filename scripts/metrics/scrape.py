"""Scrape vLLM pods' /metrics directly, concurrently, when no Prometheus is configured."""

import http.client
import ipaddress
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from offhours.scripts.metrics.exposition import ExpositionError
from offhours.scripts.metrics.vllm import MetricsIncomplete, PodMetrics, read_pod_text


@dataclass(frozen=True)
class Target:
    """One endpoint to scrape: the pod's name and its metrics URL."""

    pod: str
    url: str


@dataclass(frozen=True)
class ScrapeResult:
    """The readings of the pods that answered, and why each other pod did not."""

    readings: dict[str, PodMetrics]
    errors: dict[str, str]


def metrics_url(ip: str, port: int, path: str) -> str:
    """Return the URL of a pod's metrics page; an IPv6 address is written as a bracketed literal (RFC 3986)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return f"http://{ip}:{port}{path}"
    if address.version == 6:
        # A zone index (fe80::1%eth0) is percent-encoded inside the brackets (RFC 6874).
        return f"http://[{ip.replace('%', '%25')}]:{port}{path}"
    return f"http://{ip}:{port}{path}"


MAX_PAGE_BYTES = 16 * 1024 * 1024  # a vLLM page is ~16 KB; anything this big is not one


class ScrapeError(Exception):
    """A pod's page could not be fetched: connection, timeout, HTTP status or size."""


def fetch_page(url: str, timeout: float) -> str:
    """GET one metrics page with the standard library's HTTP client.

    Not `requests`: its per-request overhead was most of a 1,000-pod tick's CPU (bench/bench_gate.py).
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(unquote(parts.hostname or ""), parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/", headers={"Accept": "text/plain"})
        response = conn.getresponse()
        if response.status != 200:
            raise ScrapeError(f"HTTP {response.status} {response.reason}")
        body = response.read(MAX_PAGE_BYTES + 1)
        if len(body) > MAX_PAGE_BYTES:
            raise ScrapeError(f"page larger than {MAX_PAGE_BYTES} bytes")
        charset = response.headers.get_content_charset() or "utf-8"
        return body.decode(charset, errors="replace")
    except (OSError, http.client.HTTPException, LookupError) as err:
        raise ScrapeError(f"{type(err).__name__}: {err}") from None
    finally:
        conn.close()


def scrape(targets: Sequence[Target], timeout: float = 2.0, concurrency: int = 64) -> ScrapeResult:
    """Scrape every target concurrently; a target that fails is reported with its error, never read as zero."""
    readings: dict[str, PodMetrics] = {}
    errors: dict[str, str] = {}
    if not targets:
        return ScrapeResult(readings, errors)
    # The threads only wait on sockets; pages are parsed here, one at a time, as they arrive. Parsing
    # in 64 threads made them fight over the GIL: that fight cost more CPU than the parsing itself.
    with ThreadPoolExecutor(max_workers=min(concurrency, len(targets))) as pool:
        futures = {pool.submit(fetch_page, t.url, timeout): t.pod for t in targets}
        for future in as_completed(futures):
            pod = futures[future]
            try:
                readings[pod] = read_pod_text(future.result())
            except (ExpositionError, MetricsIncomplete) as err:
                errors[pod] = f"{pod}: {err}"
            except ScrapeError as err:
                errors[pod] = f"{pod}: scrape failed: {err}"
            except Exception as err:  # noqa: BLE001 - one pod's fault stays with that pod
                errors[pod] = f"{pod}: unreadable: {type(err).__name__}: {err}"
    return ScrapeResult(readings, errors)
