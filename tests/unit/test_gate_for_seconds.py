"""`offhours gate --for SECONDS`: a length that is no length is one clear error, and nothing runs.

The fault played: a typo'd or scripted `--for nan` (or inf, or a negative number). NaN compared false
with every deadline, so the loop never ended (nor did inf): a gate meant to run a while ran for ever
beside the CronWorkflow's; a negative length ran one tick as if asked. What must hold: exit 2, one
line naming --for and the value, and no configuration read, no tick.
"""

from pathlib import Path

import pytest

import offhours.scripts.gate.loop as loop
from offhours.scripts.cli.main import main


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "1e400", "soon"])
def test_a_for_that_is_not_a_finite_length_is_refused(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[object] = []
    monkeypatch.setattr(loop, "run_from_config", lambda *a, **k: ran.append(a) or 0)
    config = tmp_path / "gate.yaml"
    config.write_text("services: {chat: {capacity: {requestsPerSecond: 10}}}\n")
    with pytest.raises(SystemExit) as exit_:
        main(["gate", "--config", str(config), f"--for={value}"])
    assert exit_.value.code == 2 and not ran
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--for" in last and value in last, last


def test_zero_and_a_length_still_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[object, ...]] = []
    monkeypatch.setattr(loop, "run_from_config", lambda *a, **k: ran.append(a) or 0)
    for value in ("0", "285", "2.5"):
        assert main(["gate", "--config", "gate.yaml", "--for", value]) == 0
    assert [a[1] for a in ran] == [0.0, 285.0, 2.5]
