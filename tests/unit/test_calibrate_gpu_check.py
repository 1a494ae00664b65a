"""`offhours calibrate --gpu-check FILE`: a GPU check's figures become the fleet file's start, wake and grace times.

The sample documents have the shape bench/gpu/gpu_check.py writes (tests/integration/test_gpu_check.py runs the
script itself). Bad input is one line naming what is wrong, exit 2, and nothing written.
"""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.main import main
from offhours.scripts.simulate.fleet import load_fleet
from offhours.scripts.simulate.gpu_times import GpuCheckError, return_times

FLEET = {"services": {"chat": {"baseline": 4, "capacity": {"requestsPerSecond": 2.0}}}, "tickMinutes": 1,
         "coldStartMinutes": 4.0, "gpuHourPrice": 3.5}


def _check(vllm: bool = True) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "offhours-gpu-check/1", "gpu": {"name": "NVIDIA H200", "totalGiB": 139.8},
        "context": {"contextGiB": 0.52, "contextCreateSeconds": 0.41},
        "modelLoad": {"modelGiB": 4.0, "coldSeconds": 2.5, "warmSeconds": 1.0, "coldGiBPerSecond": 1.6,
                      "warmGiBPerSecond": 4.0},
        "pinnedTransfer": {"gib": 8.0, "sleepSeconds": 0.4, "wakeSeconds": 0.45, "wakeGiBPerSecond": 20.0},
        "referenceJob": {"medianSeconds": 0.2, "maxSeconds": 0.3, "allExited75": True},
        "vllm": {"skipped": "vllm is not importable here (this script never installs it)"},
    }
    if vllm:
        doc["vllm"] = {"coldStartSeconds": 50.0, "sleepSeconds": 1.5, "wakeSeconds": 3.0}
    return doc


def _run(tmp_path: Path, doc: Any, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str, Path]:
    check, fleet, out = tmp_path / "check.json", tmp_path / "fleet.yaml", tmp_path / "measured.yaml"
    check.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    fleet.write_text(yaml.safe_dump(FLEET))
    code = main(["calibrate", "--gpu-check", str(check), "--fleet", str(fleet), "--out", str(out), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


def test_a_check_with_vllm_sets_start_wake_and_grace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, written = _run(tmp_path, _check(), capsys, "--model-gib", "16")
    assert code == 0, err
    fleet = load_fleet(written)
    assert fleet.cold_start_minutes == pytest.approx((50.0 + 16 / 1.6) / 60, abs=1e-4)  # engine + 16 GiB cold
    assert fleet.wake_minutes == pytest.approx(3.0 / 60, abs=1e-4)
    assert fleet.grace_minutes == pytest.approx(0.3 / 60, abs=1e-4)
    assert fleet.gpu_hour_price == 3.5 and [s.name for s in fleet.services] == ["chat"]  # the rest as it was
    assert "(was 4)" in out and "dummy weights 50 s + 16 GiB read cold" in out


def test_without_vllm_the_start_stays_as_configured_and_says_why(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, written = _run(tmp_path, _check(vllm=False), capsys)
    assert code == 0, err
    fleet = load_fleet(written)
    assert fleet.cold_start_minutes == 4.0  # not guessed: the engine's own start was not measured
    assert fleet.wake_minutes == pytest.approx(4.0 / 20.0 / 60, abs=1e-4)  # the check's 4 GiB at 20 GiB/s
    assert "kept as configured: vLLM's own start was not measured (skipped: vllm is not importable" in out


@pytest.mark.parametrize("doc, words", [
    ({"schema": "offhours-gpu-check/1", "gpu": False, "reason": "no GPU: PyTorch is not installed"},
     "found no GPU (no GPU: PyTorch is not installed)"),
    ({"schema": "something else"}, "not a GPU check document"),
    ("{not json", "is not valid JSON"),  # the input layer's one wording
    ({**_check(), "referenceJob": {"maxSeconds": -1}}, "referenceJob.maxSeconds: -1 is not a number"),
    ({**_check(), "vllm": {"coldStartSeconds": 5000.0, "wakeSeconds": 1.0}}, "coldStartMinutes: 83.4 minutes"),
])
def test_bad_input_is_one_line_and_nothing_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: Any,
                                                   words: str) -> None:
    code, out, err, written = _run(tmp_path, doc, capsys)
    assert code == 2 and words in err and err.count("\n") == 1, err
    assert not written.exists()


def test_gpu_check_needs_the_fleet_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check = tmp_path / "check.json"
    check.write_text(json.dumps(_check()))
    assert main(["calibrate", "--gpu-check", str(check)]) == 2
    assert "give --fleet FILE" in capsys.readouterr().err


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 50.0), st.floats(0.01, 50.0), st.floats(0.1, 64.0), st.floats(0.0, 600.0))
def test_a_faster_disk_never_lengthens_the_start(rate: float, faster: float, gib: float, engine: float) -> None:
    """Invariants: the start is the engine's plus the cold read, so it falls as the measured rate rises; it is >= 0."""
    doc = _check()
    doc["vllm"]["coldStartSeconds"] = engine

    def start(r: float) -> float:
        doc["modelLoad"]["coldGiBPerSecond"] = r
        value = return_times(doc, gib).cold_start_minutes
        assert value is not None and value >= engine / 60
        return value

    assert start(rate + faster) <= start(rate)
    with pytest.raises(GpuCheckError):
        return_times(doc, -gib)
