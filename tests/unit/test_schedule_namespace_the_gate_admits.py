"""`offhours schedule NAME ...` creates no schedule in a namespace the gate does not admit from.

The gate admits the workflows of its configuration's `workflowNamespace` only: a schedule elsewhere
parks a run every night that no gate ever admits. With the installed configuration readable, such a
schedule is refused (exit 2, one line naming the namespace the gate admits from) and nothing is created.
"""

from pathlib import Path

import pytest

from offhours.scripts.cli import connect as connect_module
from offhours.scripts.cli.main import main
from tests.unit.test_submit_mistakes import GATE, REQUIRED, ClusterApi


def _schedule(monkeypatch: pytest.MonkeyPatch, api: ClusterApi, namespace: str) -> int:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.setattr(connect_module, "connect", lambda *a, **k: api)
    params = [x for k, v in REQUIRED.items() for x in ("-p", f"{k}={v}")]
    return main(["schedule", "nightly", "--template", "offhours-llm-pipeline", "--cron", "0 21 * * *", *params,
                 "-n", namespace])


def test_a_schedule_in_a_namespace_the_gate_does_not_admit_from_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = ClusterApi(GATE)
    assert _schedule(monkeypatch, api, "team-x") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "namespace team-x" in err and "workflowNamespace research" in err, err
    assert api.created == []
    assert _schedule(monkeypatch, api, "research") == 0
    assert [b["kind"] for b in api.created] == ["CronWorkflow"]


def test_without_an_installed_configuration_the_schedule_is_created(monkeypatch: pytest.MonkeyPatch) -> None:
    api = ClusterApi(None)
    assert _schedule(monkeypatch, api, "team-x") == 0
    assert len(api.created) == 1
