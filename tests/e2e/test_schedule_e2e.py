"""End to end: `offhours schedule` on the real Argo v4.0.5 controller, firing every minute.

Real: API server, Argo controller (its CronWorkflow controller creates the runs and resolves
`{{workflow.scheduledTime}}`), the `offhours schedule` CLI against the API server. No pod runs:
every run stays parked (the gate is not ticking in this test), which is the point.
"""

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cli.main import main
from offhours.scripts.cluster.workflow import build_parked_copy

from .conftest import RESEARCH, wait

GROUP, VERSION = "argoproj.io", "v1alpha1"
PARAMS = ["-p", "service=chat", "-p", "replicas=2", "-p", "image=ghcr.io/lab/eval:1", "-p", "output-uri=s3://lab/out",
          "-p", "checkpoint-uri=s3://lab/ckpt", "-p", "run-pretrain=false"]
FORBID, ALLOW = "e2e-forbid", "e2e-allow"


def runs(custom: Any, schedule: str) -> list[dict[str, Any]]:
    items = custom.list_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows",
                                                 label_selector=f"offhours.io/schedule={schedule}")["items"]
    return sorted(items, key=lambda w: w["metadata"]["creationTimestamp"])


def cron_runs(custom: Any, schedule: str) -> list[dict[str, Any]]:
    """The runs Argo's CronWorkflow controller created (a parked copy is not among them)."""
    return [w for w in runs(custom, schedule) if w["metadata"]["labels"].get("workflows.argoproj.io/cron-workflow")]


def night(scheduled: str) -> str:
    """The run-id suffix the schedule promises: the firing's date and minute as Argo records it (UTC)."""
    return datetime.fromisoformat(scheduled.replace("Z", "+00:00")).strftime("%Y%m%d-%H%M")


def list_block(out: str, schedule: str) -> tuple[str, str]:
    """Return a schedule's row of `offhours schedule list` and the run lines indented under it."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [schedule])
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return lines[start], "\n".join(lines[start + 1:end])


def terminate_parked(custom: Any, name: str) -> None:
    """Finish a parked run without an exit pod: Terminate, unsuspended in the same patch.

    Argo v4.0.5 does not operate a suspended workflow at all (its operator returns on `suspend`
    before it looks at `shutdown`), so a Terminate alone leaves a parked run Running for ever.
    """
    custom.patch_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name,
                                          {"spec": {"shutdown": "Terminate", "suspend": None}})


def after_next_minute(extra: float = 25.0) -> None:
    """Sleep past the next minute boundary, leaving the controller `extra` seconds to act on it."""
    time.sleep(60 - time.time() % 60 + extra)


@pytest.fixture
def cli(cluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    monkeypatch.setenv("KUBECONFIG", cluster_env["KUBECONFIG"])

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["schedule", *argv])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


@pytest.fixture
def custom(api: client.ApiClient, installed: Path) -> Iterator[Any]:
    custom = client.CustomObjectsApi(api)
    yield custom
    for name in (FORBID, ALLOW):
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, RESEARCH, "cronworkflows", name)
        except client.ApiException:
            pass
        for wf in runs(custom, name):
            try:
                custom.delete_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", wf["metadata"]["name"])
            except client.ApiException as err:
                if err.status != 404:  # the garbage collector deletes a cron run with its CronWorkflow
                    raise


def test_bad_input_is_refused_and_nothing_is_created(cli: Callable[..., tuple[int, str, str]], custom: Any) -> None:
    before = custom.list_namespaced_custom_object(GROUP, VERSION, RESEARCH, "cronworkflows")["items"]
    base = ["e2e-bad", "-n", RESEARCH, "--cron", "* * * * *"]
    cases = [
        ([*base, "--template", "no-such-template", *PARAMS], "WorkflowTemplate 'no-such-template' not found"),
        ([*base, "--template", "offhours-llm-pipeline", *PARAMS, "-p", "sft-gpu=8"], "has no parameter sft-gpu"),
        ([*base, "--template", "offhours-llm-pipeline", *PARAMS[:2], "-p", "replicas=two", *PARAMS[4:]],
         "replicas must be a whole"),
        ([*base, "--template", "offhours-llm-pipeline", *PARAMS, "-p", "replicas=two"], "replicas given twice"),
        ([*base, "--template", "offhours-llm-pipeline", *PARAMS[2:]], "needs -p service=..."),
        (["e2e-bad", "-n", RESEARCH, "--cron", "* * 32 * *", "--template", "offhours-llm-pipeline", *PARAMS],
         "day of month '32': out of range 1-31"),
        ([*base, "--timezone", "Europe/Atlantis", "--template", "offhours-llm-pipeline", *PARAMS],
         "time zone 'Europe/Atlantis'"),
        (["suspend", "no-such-schedule", "-n", RESEARCH], "no schedule 'no-such-schedule'"),
    ]
    for argv, message in cases:
        code, out, err = cli(*argv)
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1 and message in err, err
    after = custom.list_namespaced_custom_object(GROUP, VERSION, RESEARCH, "cronworkflows")["items"]
    assert [c["metadata"]["name"] for c in after] == [c["metadata"]["name"] for c in before]
    assert runs(custom, "e2e-bad") == []


def test_every_minute_runs_are_parked_forbid_skips_while_parked_suspend_creates_nothing(
        cli: Callable[..., tuple[int, str, str]], custom: Any) -> None:
    # Created just after a minute boundary so that no firing races the creation.
    time.sleep((62 - time.time() % 60) % 60)
    for name, policy in ((FORBID, "Forbid"), (ALLOW, "Allow")):
        code, out, err = cli(name, "-n", RESEARCH, "--template", "offhours-llm-pipeline", "--cron", "* * * * *",
                             "--timezone", "Asia/Seoul", "--concurrency", policy, "--keep", "1", "--priority", "3",
                             *PARAMS)
        assert code == 0 and out.startswith(f"{name} created: next run "), err

    # 1. The first firing creates a parked run carrying exactly what the gate admits on.
    first = wait("the first run", lambda: cron_runs(custom, FORBID), timeout=100)[0]
    name = first["metadata"]["name"]
    scheduled = first["metadata"]["annotations"]["workflows.argoproj.io/scheduled-time"]
    assert scheduled.endswith("Z")  # Argo v4.0.5 records the firing in UTC, whatever the schedule's zone
    run = wait("the controller to set the night's run id",
               lambda: (lambda w: w if w["metadata"]["labels"]["offhours.io/run-id"] != FORBID else None)(
                   custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name)), timeout=30)
    labels = run["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("offhours.io/")} == {
        "offhours.io/service": "chat", "offhours.io/replicas": "2", "offhours.io/managed": "true",
        "offhours.io/state": "parked", "offhours.io/schedule": FORBID,
        "offhours.io/run-id": f"{FORBID}-{night(scheduled)}"}
    assert run["metadata"]["annotations"]["offhours.io/priority"] == "3"
    assert run["spec"]["suspend"] is True and run["spec"]["workflowTemplateRef"] == {"name": "offhours-llm-pipeline"}
    assert run["status"]["phase"] == "Running"
    assert not any(n.get("type") == "Pod" for n in (run["status"].get("nodes") or {}).values())

    # 2. A parked copy of it (what the gate makes on preemption) resolves the same night's run id.
    copy = build_parked_copy(run)
    custom.create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", copy)
    copied = wait("the copy's run id", lambda: (lambda w: w if w["metadata"]["labels"].get("offhours.io/run-id")
                                                 == labels["offhours.io/run-id"] and w.get("status") else None)(
        custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", copy["metadata"]["name"])),
        timeout=30)
    assert copied["spec"]["suspend"] is True
    assert "workflows.argoproj.io/cron-workflow" not in copied["metadata"]["labels"]

    # 3. Next firing: Forbid skips it (the parked run is active for Argo); Allow queues a second run.
    after_next_minute()
    assert [w["metadata"]["name"] for w in cron_runs(custom, FORBID)] == [name]
    cron = custom.get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "cronworkflows", FORBID)
    assert [a["name"] for a in cron["status"]["active"]] == [name]
    queued = wait("a second Allow run", lambda: (lambda r: r if len(r) >= 2 else None)(cron_runs(custom, ALLOW)),
                  timeout=30)
    ids = [w["metadata"]["annotations"]["workflows.argoproj.io/scheduled-time"] for w in queued]
    assert len(set(ids)) == len(ids) and all(w["spec"]["suspend"] is True for w in queued)

    # 4. `list` shows the next firing in the schedule's zone and the last runs with their states.
    code, out, _ = cli("list", "-n", RESEARCH)
    assert code == 0
    row, block = list_block(out, FORBID)
    assert row.split()[:2] == [FORBID, "offhours-llm-pipeline"] and row.split()[-2:] == ["Asia/Seoul", "Forbid"]
    assert f"    {name}  {labels['offhours.io/run-id']}  parked" in block
    assert f"    {copy['metadata']['name']}  {labels['offhours.io/run-id']}  parked" in block

    # 5. Suspended, the schedule creates nothing, even with no run active any more.
    assert cli("suspend", ALLOW, "-n", RESEARCH)[0] == 0
    assert cli("suspend", FORBID, "-n", RESEARCH)[0] == 0
    allow_runs = len(cron_runs(custom, ALLOW))
    # Finish the parked original the only way a test can without an exit pod: Terminate (it never held GPUs).
    terminate_parked(custom, name)
    wait("the original to finish", lambda: custom.get_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows", name).get("status", {}).get("phase") == "Failed", timeout=60)
    after_next_minute()
    assert [w["metadata"]["name"] for w in cron_runs(custom, FORBID)] == [name]
    assert len(cron_runs(custom, ALLOW)) == allow_runs

    # 6. Resumed: the parked copy is not Argo's (documented), so the next firing creates tonight's run.
    assert cli("resume", FORBID, "-n", RESEARCH)[0] == 0
    after_next_minute()
    created = [w for w in cron_runs(custom, FORBID) if w["metadata"]["name"] != name]
    assert len(created) == 1 and created[0]["spec"]["suspend"] is True

    # 7. --keep 1: of two failed runs Argo keeps the newest.
    terminate_parked(custom, created[0]["metadata"]["name"])
    assert cli("suspend", FORBID, "-n", RESEARCH)[0] == 0
    wait("the older failed run to be deleted by the history limit",
         lambda: [w["metadata"]["name"] for w in cron_runs(custom, FORBID)] == [created[0]["metadata"]["name"]],
         timeout=90)

    # 8. delete removes the schedule and keeps its runs.
    code, out, _ = cli("delete", FORBID, "-n", RESEARCH)
    assert code == 0 and out == f"{FORBID} deleted; its runs are kept\n"
    time.sleep(5)
    assert {w["metadata"]["name"] for w in runs(custom, FORBID)} == {created[0]["metadata"]["name"],
                                                                     copy["metadata"]["name"]}
