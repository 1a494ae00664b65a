"""A fleet's pods as Prometheus holds them across a rollout, without a waiting gauge, or with values no counter has.

Real: Debian's Prometheus and promtool (the history backfilled as OpenMetrics), the range-query API,
`offhours simulate --prometheus`, `trace export` and `calibrate` as a user runs them. Every series is
written here sample by sample, so what each verb must read is known:

- `roll`: two pods throughout, one of them replaced at minute ROLL_AT as a rollout replaces it: the
  old pod's last scrape and the new pod's first fall in the same minute (10 s and 30 s into it).
  Two pods served in every minute; the replay must run on two replicas, not three.
- `nowait`: counters but no `vllm:num_requests_waiting` series: calibrate must say the metric is
  missing, not that the service never saturated.
- `young`: first scraped at minute YOUNG_FROM: before it nothing happened that a replay could use.
"""

import math
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.history.read import MISSING
from offhours.scripts.metrics import vllm
from tests.support.prometheus_fixture import running_prometheus

pytestmark = pytest.mark.prometheus

MINUTES = 2 * 1440
START = (math.floor(time.time() / 86400) - 4) * 86400.0  # a UTC midnight, the range ends two days ago
END = START + MINUTES * 60
ROLL_AT = 600
RATE = 30.0  # requests per minute per pod
YOUNG_FROM = 2000  # the minute `young`'s first pod was first scraped


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _counter(lines: list[str], labels: str, minutes: range, offset: float) -> None:
    """A pod's three counters, sampled once a minute `offset` s into it, from zero at its first sample."""
    for metric, per_minute in ((vllm.REQUESTS, RATE), (vllm.PROMPT_TOKENS, RATE * 100), (vllm.GENERATION_TOKENS, RATE * 10)):
        for k, m in enumerate(minutes):
            lines.append(f"{metric}{{{labels}}} {k * per_minute!r} {START + 60 * m + offset:.0f}")


def _gauge(lines: list[str], labels: str, minutes: range, offset: float, value: float) -> None:
    for m in minutes:
        lines.append(f"{vllm.WAITING}{{{labels}}} {value!r} {START + 60 * m + offset:.0f}")


def _render() -> str:
    lines: list[str] = []
    whole = range(0, MINUTES + 1)
    for pod, minutes, offset in (("roll-0", whole, 0.0), ("roll-1", range(0, ROLL_AT + 1), 10.0),
                                 ("roll-2", range(ROLL_AT, MINUTES + 1), 30.0)):
        labels = f'service="roll",instance="{pod}:8000",pod="{pod}"'
        _counter(lines, labels, minutes, offset)
        _gauge(lines, labels, minutes, offset, 0.0)
    _counter(lines, 'service="nowait",instance="nowait-0:8000",pod="nowait-0"', whole, 0.0)
    young = 'service="young",instance="young-0:8000",pod="young-0"'
    _counter(lines, young, range(YOUNG_FROM, MINUTES + 1), 0.0)
    _gauge(lines, young, range(YOUNG_FROM, MINUTES + 1), 0.0, 0.0)
    # OpenMetrics wants one metric family's samples together, each series in time order.
    lines.sort(key=lambda line: (line.split("{")[0], line.split("}")[0], float(line.rsplit(" ", 1)[1])))
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    work = tmp_path_factory.mktemp("pods")
    (work / "history.om").write_text(_render())
    (work / "data").mkdir()
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (make deps does it)"
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "history.om"),
                           str(work / "data")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    config = {"metrics": {"prometheus": {"url": "http://unused.invalid"}},
              "services": {name: {"capacity": {"requestsPerSecond": 1.0}, "gpusPerReplica": 1}
                           for name in ("roll", "nowait", "young")}}
    (work / "gate.yaml").write_text(yaml.safe_dump(config))
    with running_prometheus([], work, retention="30d") as url:
        yield url, work


def _verb(url: str, work: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--prometheus", url, "--config", str(work / "gate.yaml"), "--start", _iso(START),
                 "--end", _iso(END)])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_a_pod_replaced_within_a_minute_is_not_an_extra_replica(prometheus: tuple[str, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Two pods served in every minute of the rollout: the replay has two replicas, the work stays two pods'."""
    url, work = prometheus
    code, out, err = _verb(url, work, capsys, "simulate", "--service", "roll")
    assert code == 0, err
    assert "roll: 2 replicas x 1 GPUs" in out


def test_calibrate_without_the_waiting_gauge_names_it_missing(prometheus: tuple[str, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No waiting series: not "never saturated" but a missing metric, by name; the configured capacity stands."""
    url, work = prometheus
    code, out, err = _verb(url, work, capsys, "calibrate", "--service", "nowait", "--service", "roll")
    assert code == 0, err
    assert f"warning: {MISSING}: nowait: no {vllm.WAITING} series" in err
    assert f"{MISSING}: roll" not in err  # it has the gauge, and was never saturated
    assert "nowait" in out and "(1)" in out  # the configured value, kept


def test_a_service_younger_than_the_range_is_not_replayed_on_load_drawn_for_it(prometheus: tuple[str, Path],
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Its first YOUNG_FROM minutes hold no sample: the replay leaves it out and names the --start that would do."""
    url, work = prometheus
    code, out, err = _verb(url, work, capsys, "simulate", "--service", "young", "--service", "roll")
    assert code == 0, err
    assert "roll: 2 replicas" in out and "young:" not in out
    first_midnight = START + math.ceil(YOUNG_FROM / 1440) * 86400
    assert "young: left out" in err and f"--start {_iso(first_midnight)}" in err, err
    code, out, err = _verb(url, work, capsys, "tune", "--service", "young")
    assert code == 1 and "young: left out" in err
