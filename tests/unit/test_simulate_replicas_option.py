"""`simulate --replicas SERVICE=N` names a service that is replayed, or is refused in one line before any read.

A misspelt name (or one left out by --service, or given to a trace replay, which takes its replicas
from the fleet file) was dropped without a word: the replay ran on the most pods seen, and its table
read as the answer for the replicas the user asked about.
"""

from pathlib import Path

import pytest

from offhours.scripts.cli.main import main
from tests.support.refused_replay import config_that_reads_no_history

GATE = {"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}, "code": {"capacity": {"requestsPerSecond": 5.0}}}}


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return config_that_reads_no_history(tmp_path, monkeypatch, GATE)


@pytest.mark.parametrize("extra, named", [
    (["--replicas", "chta=3"], "chta"),
    (["--service", "chat", "--replicas", "code=3"], "code"),
])
def test_replicas_of_a_service_not_replayed_is_refused(extra: list[str], named: str, gate: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--config", str(gate), "--prometheus", "http://p.invalid", *extra])
    err = capsys.readouterr().err
    assert code == 2 and "--replicas" in err and named in err and err.count("\n") == 1, err


def test_replicas_of_a_trace_replay_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", "m-small", "--replicas", "chat=3"])
    err = capsys.readouterr().err
    assert code == 2 and "--replicas" in err and err.count("\n") == 1, err
