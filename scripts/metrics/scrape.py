"""Scrape vLLM pods' /metrics directly, concurrently, when no Prometheus is configured."""

import ipaddress
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

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


def scrape_one(session: requests.Session, target: Target, timeout: float) -> PodMetrics:
    """Fetch and read one pod's metrics page; raise on any failure."""
    response = session.get(target.url, timeout=timeout)
    response.raise_for_status()
    return read_pod_text(response.text)


def scrape(targets: Sequence[Target], timeout: float = 2.0, concurrency: int = 64) -> ScrapeResult:
    """Scrape every target concurrently; a target that fails is reported with its error, never read as zero."""
    readings: dict[str, PodMetrics] = {}
    errors: dict[str, str] = {}
    if not targets:
        return ScrapeResult(readings, errors)
    with requests.Session() as session:
        adapter = requests.adapters.HTTPAdapter(pool_connections=concurrency, pool_maxsize=concurrency)
        session.mount("http://", adapter)
        with ThreadPoolExecutor(max_workers=min(concurrency, len(targets))) as pool:
            futures = {t.pod: pool.submit(scrape_one, session, t, timeout) for t in targets}
            for pod, future in futures.items():
                try:
                    readings[pod] = future.result()
                except (ExpositionError, MetricsIncomplete) as err:
                    errors[pod] = f"{pod}: {err}"
                except requests.RequestException as err:
                    errors[pod] = f"{pod}: scrape failed: {type(err).__name__}: {err}"
                except Exception as err:  # noqa: BLE001 - one pod's fault stays with that pod
                    errors[pod] = f"{pod}: unreadable: {type(err).__name__}: {err}"
    return ScrapeResult(readings, errors)
