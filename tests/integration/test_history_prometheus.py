"""History from a real Prometheus: days of vLLM counters backfilled with promtool, exported minute by minute.

Real: Debian's Prometheus and promtool, the HTTP range-query API, `offhours trace export` and
`offhours simulate --prometheus` as a user runs them. The history is the bundled trace rendered as
vLLM's counters (V1 pods with engines, one V0 service without the engine label), so every expected
minute is known: the export must equal the bundled CSV line for line. A gap, a counter reset and a
missing metric are each rendered into one service and must come out as a named warning.
"""

import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.history.read import FILLED, GAP, MISSING, RESET, read_history
from offhours.scripts.metrics import vllm
from offhours.scripts.simulate.trace import days_of, format_trace, load_trace
from tests.support.backfill import RenderedService, backfill
from tests.support.prometheus_fixture import running_prometheus

pytestmark = pytest.mark.prometheus

DAYS = 3
BUNDLED = days_of(load_trace(), 0, DAYS)
START = (math.floor(time.time() / 86400) - DAYS - 2) * 86400.0  # a UTC midnight, the range ends two days ago
END = START + DAYS * 86400
GAP_SAMPLES = (1000, 1004)  # five samples missing in one series of "gappy"
RESET_MINUTE = 2000


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


SERVICES = [
    RenderedService("chat", BUNDLED, pods=2, engines=2),
    RenderedService("legacy", BUNDLED.scaled(0.5), pods=1, engines=0),
    RenderedService("gappy", BUNDLED.scaled(0.25), pods=2, engines=1, gap=GAP_SAMPLES, reset_at=RESET_MINUTE),
    RenderedService("noprompt", BUNDLED.scaled(0.1), pods=1, engines=1, drop=(vllm.PROMPT_TOKENS,)),
]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    work = tmp_path_factory.mktemp("history")
    backfill(SERVICES, START, work / "data")
    config = {"metrics": {"prometheus": {"url": "http://unused.invalid"}},
              "services": {s.name: {"capacity": {"requestsPerSecond": 1000.0}, "gpusPerReplica": 2} for s in SERVICES}}
    (work / "gate.yaml").write_text(yaml.safe_dump(config))
    with running_prometheus([], work, retention="30d") as url:
        yield url, work


def _export(url: str, work: Path, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["trace", "export", "--prometheus", url, "--config", str(work / "gate.yaml"), "--start", _iso(START),
                 "--end", _iso(END), "--out", str(out), *extra])
    return code, capsys.readouterr().err


def test_export_equals_the_source_minute_by_minute(prometheus: tuple[str, Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """V1 (2 pods x 2 engines) and V0 (no engine label) series come back as the trace they were rendered from."""
    url, work = prometheus
    code, err = _export(url, work, tmp_path, capsys, "--service", "chat", "--service", "legacy")
    assert code == 0, err
    assert err == ""  # nothing to warn about
    assert (tmp_path / "chat.csv").read_text() == format_trace(BUNDLED)
    assert (tmp_path / "legacy.csv").read_text() == format_trace(BUNDLED.scaled(0.5))
    assert len((tmp_path / "chat.csv").read_text().splitlines()) == DAYS * 1440 + 1


def test_split_queries_give_the_same_history(prometheus: tuple[str, Path]) -> None:
    """Queries cut at 1,000 points (Prometheus refuses more than 11,000) are put back on one grid, no minute lost."""
    url, _ = prometheus
    whole = read_history(url, "service", ["chat"], START, DAYS * 1440)
    split = read_history(url, "service", ["chat"], START, DAYS * 1440, max_points=1000)
    for column, values in whole.services["chat"].work.items():
        assert np.array_equal(values, split.services["chat"].work[column])
    assert np.allclose(whole.services["chat"].work["requests"], BUNDLED.requests, atol=1e-6)
    assert int(whole.services["chat"].pods.max()) == 2


def test_gap_reset_and_missing_metric_are_named(prometheus: tuple[str, Path], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A stretch without samples, a restarted process and an absent counter: each a named warning, no wrong number."""
    url, work = prometheus
    code, err = _export(url, work, tmp_path, capsys, "--service", "gappy", "--service", "noprompt")
    assert code == 0
    assert f"warning: {GAP}: gappy: " in err and "spread evenly" in err
    assert f"warning: {RESET}: gappy: " in err and f"step {RESET_MINUTE} " in err
    assert f"warning: {MISSING}: noprompt: no {vllm.PROMPT_TOKENS} series" in err
    assert FILLED not in err  # the other pods had samples throughout
    assert not (tmp_path / "noprompt.csv").exists()  # left out, not written with zeros
    got = np.loadtxt(tmp_path / "gappy.csv", delimiter=",", skiprows=1)
    want = BUNDLED.scaled(0.25)
    # Outside the gap every minute is exact (the reset included); across it the total is.
    gap = slice(GAP_SAMPLES[0] - 1, GAP_SAMPLES[1] + 1)
    outside = np.ones(want.minutes, dtype=bool)
    outside[gap] = False
    assert np.allclose(got[outside, 1], want.requests[outside], atol=0.0051)
    assert np.allclose(got[outside, 3], want.output_tokens[outside], atol=0.51)
    assert got[gap, 1].sum() == pytest.approx(want.requests[gap].sum(), abs=0.01 * 6)


def test_simulate_replays_each_service_with_its_own_pods(prometheus: tuple[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`simulate --prometheus` replays the history's services with their own replicas (pods seen) and GPUs."""
    url, work = prometheus
    code = main(["simulate", "--prometheus", url, "--config", str(work / "gate.yaml"), "--start", _iso(START),
                 "--end", _iso(END), "--service", "chat", "--service", "legacy"])
    out = capsys.readouterr().out
    assert code == 0
    assert "chat: 2 replicas x 2 GPUs" in out and "legacy: 1 replicas x 2 GPUs" in out
    assert "share of the fixed reference" in out


def test_an_unreachable_prometheus_is_one_line(tmp_path: Path, prometheus: tuple[str, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listening: one line naming Prometheus and why (no query text: it is no query's fault), exit 1,
    nothing written."""
    _, work = prometheus
    code, err = _export("http://127.0.0.1:9", work, tmp_path / "out", capsys)
    assert code == 1 and err.count("\n") == 1
    assert err.endswith("Prometheus at http://127.0.0.1:9 cannot be reached: connection refused\n"), err
    assert "range query" not in err and "last_over_time" not in err
    assert not (tmp_path / "out").exists()


def test_tune_from_prometheus_writes_a_valid_fragment(prometheus: tuple[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`tune --prometheus`: two rolling folds over the three days (fit on one, validate on the next); a valid fragment."""
    url, work = prometheus
    out = tmp_path / "tuned.yaml"
    code = main(["tune", "--prometheus", url, "--config", str(work / "gate.yaml"), "--start", _iso(START),
                 "--end", _iso(END), "--service", "chat", "--out", str(out), "--workers", "2"])
    text = capsys.readouterr().out
    assert "chat: 2 rolling folds (fit on 1 days, validate on the 1 after)" in text
    assert "largest rise of the whole trace within one reaction time" in text and "(apart)" in text
    from offhours.scripts.config.loader import load_config

    tuned = load_config(out).service("chat")
    assert tuned.capacity.requests_per_second == 1000.0 and tuned.gpus_per_replica == 2
    assert code in (0, 1)  # 1: no setting kept the budget on every fold, or the best was refused, as said
    assert ("REFUSED" in text or "no setting met the budget" in text) == (code == 1)
