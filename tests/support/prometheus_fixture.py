"""A real Prometheus (Debian's package) scraping emulated vLLM pods on loopback."""

import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests
import yaml

from tests.support.fleet import EmulatedService, free_port, wait_until_serving


@contextmanager
def running_prometheus(services: Sequence[EmulatedService], workdir: Path, interval: str = "1s",
                       extra_scrape_configs: Sequence[dict] = (), rule_files: Sequence[str] = (),
                       retention: str = "1h") -> Iterator[str]:
    """Start Prometheus scraping every emulated pod (label service=<name>) and any extra targets; yield its URL.

    Blocks already in `workdir/data` (backfilled with promtool) are served too, if within `retention`.
    """
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: apt-get install prometheus (make deps does it)"
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{
            "job_name": "vllm",
            "static_configs": [{"targets": [f"{ip}:{s.port}" for ip in s.ips], "labels": {"service": s.name}}
                               for s in services],
        }, *extra_scrape_configs],
        "rule_files": list(rule_files),
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.retention.time={retention}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, f"{url}/-/ready", workdir / "prometheus.log", "prometheus", 60,
                           ready=lambda r: r.status_code == 200)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_for_targets(url: str, count: int, timeout: float = 60) -> None:
    """Wait until `count` targets are up."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            active = requests.get(f"{url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        except requests.RequestException:
            continue  # a busy Prometheus answers late: ask again until the deadline
        if sum(t["health"] == "up" for t in active) >= count:
            return
        time.sleep(0.5)
    raise AssertionError(f"fewer than {count} targets up after {timeout} s")


def wait_for_samples(url: str, selector: str, series: int, samples: int, window: str, timeout: float = 90) -> None:
    """Wait until Prometheus holds `series` series matching `selector`, each with >= `samples` samples in `window`.

    Synchronises on what Prometheus has stored (its own API), not on the wall clock.
    """
    deadline, seen = time.time() + timeout, "no answer"
    while time.time() < deadline:
        body = requests.get(f"{url}/api/v1/query", params={"query": f"count_over_time({selector}[{window}])"},
                            timeout=5).json()
        counts = [float(r["value"][1]) for r in body["data"]["result"]]
        seen = f"{len(counts)} series, fewest samples {min(counts, default=0):.0f}"
        if len(counts) >= series and min(counts) >= samples:
            return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus: wanted {series} series of {selector} with {samples} samples in {window}; "
                         f"after {timeout} s: {seen}")
