"""`tune` exits 1 when no setting kept the delay budget on every fold, whatever the other folds did.

It exited 0 whenever the validation days stayed within the budget, so a service whose every
setting broke the budget (the text said so, one line among the table) passed a script's
`offhours tune --out tuned.yaml && apply` as a choice within its budget.
"""

from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main


def test_no_setting_within_the_budget_on_the_fitting_days_is_exit_1(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Three days at a tenth of the service; on days 1 and 2 a ten-minute spike to ten times the service's size:
    # day 1's has no precedent in day 0 (told apart), day 2's has day 1's (no knob keeps it within the budget).
    rows = []
    for minute in range(3 * 1440):
        rps = 60.0 if minute >= 1440 and 600 <= minute % 1440 < 610 else 0.6
        rows.append(f"{minute},{rps * 60:.2f},0,0")
    trace = tmp_path / "spike.csv"
    trace.write_text("minute,requests,input_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"services": {"chat": {"baseline": 6, "capacity": {"requestsPerSecond": 1.0},
                                                           "gpusPerReplica": 1}}}))
    out = tmp_path / "tuned.yaml"
    code = main(["tune", "--trace", str(trace), "--fleet", str(fleet), "--out", str(out), "--workers", "1"])
    text = capsys.readouterr().out
    assert "no setting met the budget on every fold" in text
    assert code == 1
