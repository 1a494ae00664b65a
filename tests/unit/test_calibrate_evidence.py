"""`offhours calibrate` on evidence it cannot turn into a capacity: one line and the configured value, never a traceback."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from offhours.scripts.cli import history_source
from offhours.scripts.cli.main import main
from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.calibrate import estimate
from offhours.scripts.history.read import COLUMNS, History, ServiceHistory

GATE = {"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}}


def history(saturated: bool, work: float, steps: int = 30) -> History:
    """One pod of `chat`, covered throughout, saturated (or not) in every step, doing `work` per step."""
    service = ServiceHistory("chat", pod_work={"p": {c: np.full(steps, work) for c in COLUMNS}},
                             pod_covered={"p": np.ones(steps, dtype=np.bool_)},
                             saturated={"p": np.full(steps, saturated)}, complete=True)
    return History(0.0, 60.0, steps, {"chat": service}, [])


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(GATE))
    return path


def _calibrate(monkeypatch: pytest.MonkeyPatch, seen: History, argv: list[str]) -> int:
    monkeypatch.setattr(history_source, "read", lambda args, saturation=False, step=60.0: (parse_config(GATE), seen))
    return main(["calibrate", "--prometheus", "http://p.invalid", *argv])


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_min_steps_below_one_is_refused_in_one_line(steps: str, gate: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Fault: --min-steps 0 (or below) with no saturated step divided by zero: a traceback instead of one line."""
    with pytest.raises(SystemExit) as exit_:
        _calibrate(monkeypatch, history(False, 1.0), ["--config", str(gate), "--min-steps", steps])
    assert exit_.value.code == 2 and "--min-steps" in capsys.readouterr().err


def test_no_saturated_step_is_never_an_estimate_whatever_min_steps() -> None:
    """Fault: estimate() with min_steps 0 and no saturated pod-step divided by zero."""
    assert estimate(history(False, 1.0).services["chat"], 60.0, min_steps=0).rates is None


def test_saturated_replicas_that_finished_nothing_keep_the_configured_capacity(gate: Path, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              capsys) -> None:
    """Fault: wedged replicas (requests waiting, nothing served) made calibrate blame the gate config and write nothing."""
    out = tmp_path / "fragment.yaml"
    assert _calibrate(monkeypatch, history(True, 0.0), ["--config", str(gate), "--out", str(out)]) == 0
    written = yaml.safe_load(out.read_text())
    assert written["services"]["chat"]["capacity"] == {"requestsPerSecond": 5.0}
    assert "finished nothing" in capsys.readouterr().out
