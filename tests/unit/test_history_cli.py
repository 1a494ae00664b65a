"""The history verbs refuse what they cannot do in one line, before asking Prometheus anything, and write nothing."""

from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump({"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}}))
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_export_into_a_file_is_refused(tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "taken"
    target.write_text("keep me")
    code, err = _run(["trace", "export", "--config", str(config), "--prometheus", "http://p.invalid", "--out",
                      str(target)], capsys)
    assert code == 2 and "is not a directory" in err and err.count("\n") == 1
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("argv, named", [
    (["simulate", "--prometheus", "http://p.invalid"], "--config: required"),
    (["trace", "export", "--config", "CONFIG", "--out", "OUT"], "--prometheus: required"),
    (["trace", "export", "--config", "CONFIG", "--prometheus", "http://p.invalid", "--service", "nope", "--out", "OUT"],
     "--service: nope not in the gate config (chat)"),
    (["calibrate", "--config", "CONFIG", "--prometheus", "http://p.invalid", "--since", "1y"], "--since"),
    (["tune", "--config", "CONFIG", "--prometheus", "http://p.invalid", "--start", "2020-01-01T00:00:00Z"],
     "longer than"),
])
def test_a_request_that_cannot_be_read_is_one_line(argv: list[str], named: str, tmp_path: Path, config: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(config) if a == "CONFIG" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code, err = _run(argv, capsys)
    assert code == 2 and named in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_simulate_from_prometheus_takes_no_trace(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["simulate", "--config", str(config), "--trace", "m-mid"], capsys)
    assert code == 2 and "give no --trace or --fleet" in err


def test_tune_on_less_than_three_days_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One day cannot be split into rolling folds of days to fit on and days to check on."""
    trace = tmp_path / "day.csv"
    trace.write_text("minute,requests,input_tokens,output_tokens\n" + "".join(f"{m},10,100,10\n" for m in range(1440)))
    code, err = _run(["tune", "--trace", str(trace), "--out", str(tmp_path / "t.yaml")], capsys)
    assert code == 2 and "at least 3 whole days" in err and err.count("\n") == 1
    assert not (tmp_path / "t.yaml").exists()


def test_the_second_bundled_trace_loads_by_name() -> None:
    from offhours.scripts.simulate.trace import load_trace

    mid = load_trace("m-mid")
    assert mid.minutes == 20160 and mid.name == "servegen_m_mid_per_minute.csv"
    assert load_trace("m-small").minutes == load_trace().minutes
