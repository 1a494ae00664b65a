"""`simulate --prometheus` replays the research jobs it is given (`--jobs`), and draws the plot it is asked for.

Both options were taken and dropped: the history was replayed with a generated queue whatever
`--jobs` named (a file naming no service of the history passed too) and `--plot` wrote nothing.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from offhours.scripts.cli import history_source
from offhours.scripts.cli.main import main
from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import COLUMNS, History, ServiceHistory

# No spare replica kept before lending (the shipped default keeps 2): of two pods, one can be lent.
GATE = {"services": {"chat": {"capacity": {"requestsPerSecond": 1.0}, "gpusPerReplica": 1, "headroom": 0.3,
                          "lendHysteresis": 0}}}
STEPS = 2 * 1440


def _history() -> History:
    """Two pods of `chat` for two days, needing half a replica (30 requests a minute) throughout: one can be lent."""
    per_pod = {c: np.full(STEPS, 15.0) for c in COLUMNS}
    service = ServiceHistory("chat", work={c: np.full(STEPS, 30.0) for c in COLUMNS},
                             pod_work={"p0": per_pod, "p1": dict(per_pod)},
                             pod_covered={p: np.ones(STEPS, dtype=np.bool_) for p in ("p0", "p1")},
                             pods=np.full(STEPS, 4, dtype=np.int64), complete=True)
    return History(1_767_225_600.0, 60.0, STEPS, {"chat": service}, [])


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(GATE))
    monkeypatch.setattr(history_source, "read", lambda args, saturation=False, step=60.0: (parse_config(GATE), _history()))
    return path


def _jobs(tmp_path: Path, *jobs: dict[str, object]) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"jobs": list(jobs)}))
    return path


def test_the_jobs_given_are_the_jobs_replayed(gate: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _jobs(tmp_path, {"name": "one", "service": "chat", "replicas": 1, "workHours": 1.0},
                 {"name": "two", "service": "chat", "replicas": 1, "workHours": 2.0})
    out = tmp_path / "sim.json"
    code = main(["simulate", "--config", str(gate), "--prometheus", "http://p.invalid", "--jobs", str(jobs),
                 "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["modes"]["gate"]["jobs_completed"] == 2


def test_jobs_of_a_service_not_replayed_are_refused(gate: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    jobs = _jobs(tmp_path, {"name": "x", "service": "nope", "replicas": 1, "workHours": 1.0})
    code = main(["simulate", "--config", str(gate), "--prometheus", "http://p.invalid", "--jobs", str(jobs)])
    err = capsys.readouterr().err
    assert code == 2 and "nope" in err and err.count("\n") == 1, err


def test_the_plot_asked_for_is_drawn(gate: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "out" / "sim.png"
    code = main(["simulate", "--config", str(gate), "--prometheus", "http://p.invalid", "--plot", str(plot)])
    assert code == 0, capsys.readouterr().err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
