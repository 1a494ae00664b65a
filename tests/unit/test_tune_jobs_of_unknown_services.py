"""`tune --jobs` naming a service the replay does not have is refused in one line, as `simulate` refuses it.

The jobs of such a service were dropped without a word and the services tuned with fewer jobs
(or none) than the file held.
"""

from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main


def test_jobs_of_a_service_not_in_the_fleet_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [{"name": "x", "service": "chta", "replicas": 1, "workHours": 1.0}]}))
    trace = tmp_path / "flat.csv"
    trace.write_text("minute,requests,input_tokens,output_tokens\n" + "".join(f"{m},30,0,0\n" for m in range(2880)))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"services": {"chat": {"baseline": 4, "capacity": {"requestsPerSecond": 1.0}}}}))
    out = tmp_path / "tuned.yaml"
    code = main(["tune", "--trace", str(trace), "--fleet", str(fleet), "--jobs", str(jobs), "--out", str(out),
                 "--workers", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "chta" in err and err.count("\n") == 1, err
    assert not out.exists()
