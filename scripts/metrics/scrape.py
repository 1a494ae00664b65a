"""Scrape vLLM pods' /metrics directly, concurrently, when no Prometheus is configured."""

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from offhours.scripts.inputs.limits import METRICS_PAGE_BYTES
from offhours.scripts.inputs.pages import FetchError, fetch_pages
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


MAX_PAGE_BYTES = METRICS_PAGE_BYTES


def scrape(targets: Sequence[Target], timeout: float = 2.0, concurrency: int = 64) -> ScrapeResult:
    """Scrape every target concurrently; a target that fails is reported with its error, never read as zero."""
    readings: dict[str, PodMetrics] = {}
    errors: dict[str, str] = {}
    # One thread: the pages are parsed here as they arrive, while the other sockets fill.
    for index, page in fetch_pages([t.url for t in targets], timeout, concurrency, MAX_PAGE_BYTES):
        pod = targets[index].pod
        if isinstance(page, FetchError):
            errors[pod] = f"{pod}: scrape failed: {page}"
            continue
        try:
            readings[pod] = read_pod_text(page)
        except (ExpositionError, MetricsIncomplete) as err:
            errors[pod] = f"{pod}: {err}"
        except Exception as err:  # noqa: BLE001 - one pod's fault stays with that pod
            errors[pod] = f"{pod}: unreadable: {type(err).__name__}: {err}"
    return ScrapeResult(readings, errors)
