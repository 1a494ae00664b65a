"""Scrape vLLM pods' /metrics directly, concurrently, when no Prometheus is configured."""

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
    return ScrapeResult(readings, errors)
