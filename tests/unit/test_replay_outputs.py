"""What `tune`, `calibrate` and `simulate` write never lands on what they read, on a folder, or on each other.

`tune --config gate.yaml --out gate.yaml` replaced the gate config (its metrics, namespace, every
other setting) with a fragment of services, after minutes of replays; `--out` naming a folder
failed only then, with nothing written. Each is refused in one line before anything is read.
"""

from pathlib import Path

import pytest

from offhours.scripts.cli.main import main
from tests.support.refused_replay import config_that_reads_no_history

GATE = {"metrics": {"prometheus": {"url": "http://p.invalid"}},
        "services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}}


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return config_that_reads_no_history(tmp_path, monkeypatch, GATE)


@pytest.mark.parametrize("verb", ["tune", "calibrate"])
@pytest.mark.parametrize("target", ["CONFIG", "DIR", "LINK"])
def test_out_onto_the_config_or_a_folder_is_refused(verb: str, target: str, gate: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "link.yaml").symlink_to(gate)
    out = {"CONFIG": gate, "DIR": tmp_path / "dir", "LINK": tmp_path / "link.yaml"}[target]
    before = gate.read_text()
    code = main([verb, "--config", str(gate), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "--out" in err and err.count("\n") == 1, err
    assert gate.read_text() == before and (tmp_path / "dir").is_dir()


def test_tune_out_and_json_on_one_file_is_refused(gate: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = tmp_path / "tuned"
    code = main(["tune", "--config", str(gate), "--out", str(same), "--json", str(same)])
    err = capsys.readouterr().err
    assert code == 2 and "--json" in err and err.count("\n") == 1, err
    assert not same.exists()


def test_tune_out_onto_its_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("minute,requests,input_tokens,output_tokens\n" + "".join(f"{m},1,1,1\n" for m in range(2880)))
    before = trace.read_text()
    code = main(["tune", "--trace", str(trace), "--out", str(trace)])
    err = capsys.readouterr().err
    assert code == 2 and "--out" in err and err.count("\n") == 1, err
    assert trace.read_text() == before


def test_simulate_json_onto_the_config_is_refused(gate: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = gate.read_text()
    code = main(["simulate", "--config", str(gate), "--json", str(gate)])
    err = capsys.readouterr().err
    assert code == 2 and "--json" in err and err.count("\n") == 1, err
    assert gate.read_text() == before
