"""Research schedules: cron expressions and their firings, the CronWorkflow, `offhours schedule` offline."""

import contextlib
import io
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.cronworkflows.cronexpr import CronError, next_firings, parse_cron, time_zone
from offhours.cronworkflows.research_schedule import (
    NIGHT_EXPRESSION,
    ScheduleError,
    night_label_expression,
    night_run_id,
    research_cron_workflow,
)
from offhours.scripts.cli.main import main
from offhours.scripts.cli.schedule import next_firing, render_rows, run_state, schedule_rows
from offhours.scripts.validate import validate_documents
from offhours.workflows.render import manifests, to_yaml

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "examples"
TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
REQUIRED = {"service": "chat", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o", "checkpoint-uri": "s3://c"}
UTC = timezone.utc


# -- cron expressions ------------------------------------------------------------------------
def _fires_at(expr: str, local: datetime) -> bool:
    s = parse_cron(expr)
    return local.minute in s.minutes and local.hour in s.hours and s.matches_day(local.date())


fields = st.tuples(
    st.sampled_from(["*", "0", "30", "*/15", "5-10", "0,45", "7/20"]),
    st.sampled_from(["*", "21", "0-3", "*/6", "9,17"]),
    st.sampled_from(["*", "1", "13", "1-7", "?"]),
    st.sampled_from(["*", "2", "1-6", "*/3"]),
    st.sampled_from(["*", "0", "1-5", "6", "?"]),
)


@settings(max_examples=40, deadline=None)
@given(fields, st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31)))
def test_firings_are_exactly_the_matching_minutes(parts: tuple[str, ...], start: datetime) -> None:
    # Invariant: within two days of UTC time, the firings returned are every minute the
    # expression matches, in order, each strictly after the start; none is missed, none invented.
    expr = " ".join(parts)
    after = start.replace(second=0, microsecond=0, tzinfo=UTC)
    brute = [after + timedelta(minutes=i) for i in range(1, 2 * 24 * 60 + 1)
             if _fires_at(expr, after + timedelta(minutes=i))]
    got = next_firings(parse_cron(expr), ZoneInfo("UTC"), after, count=len(brute) + 1)
    assert got[:len(brute)] == brute
    assert len(got) == len(brute) + 1 and got[-1] > after + timedelta(days=2)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["Asia/Seoul", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"]),
       st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31)))
def test_nightly_fires_at_21_local_every_day(zone_name: str, start: datetime) -> None:
    # Invariant: "0 21 * * *" fires once per local calendar day at 21:00 wall clock in its zone.
    zone = ZoneInfo(zone_name)
    got = next_firings(parse_cron("0 21 * * *"), zone, start.replace(tzinfo=UTC), count=5)
    assert [(f.hour, f.minute) for f in got] == [(21, 0)] * 5
    days = [f.date() for f in got]
    assert days == [days[0] + timedelta(days=i) for i in range(5)]


def test_seoul_21_is_12_utc() -> None:
    got = next_firings(parse_cron("0 21 * * *"), time_zone("Asia/Seoul"), datetime(2025, 1, 13, 11, 59, tzinfo=UTC))
    assert got == [datetime(2025, 1, 13, 12, 0, tzinfo=UTC)]


def test_clocks_going_forward_skip_the_missing_time_and_going_back_fire_once() -> None:
    berlin = time_zone("Europe/Berlin")
    spring = next_firings(parse_cron("30 2 * * *"), berlin, datetime(2025, 3, 29, 12, tzinfo=UTC), count=2)
    assert [f.date().isoformat() for f in spring] == ["2025-03-31", "2025-04-01"]  # 02:30 on 30 March never happens
    autumn = next_firings(parse_cron("30 2 * * *"), berlin, datetime(2025, 10, 25, 12, tzinfo=UTC), count=2)
    assert [f.astimezone(UTC) for f in autumn] == [datetime(2025, 10, 26, 0, 30, tzinfo=UTC),  # first 02:30 (CEST)
                                                    datetime(2025, 10, 27, 1, 30, tzinfo=UTC)]


def test_day_of_month_or_day_of_week_as_robfig_cron() -> None:
    # Both restricted: either matches (Mondays or the 13th); one a star: both must.
    either = next_firings(parse_cron("0 0 13 * 1"), time_zone("UTC"), datetime(2025, 1, 1, tzinfo=UTC), count=3)
    assert [f.day for f in either] == [6, 13, 20]
    both = next_firings(parse_cron("0 0 * * 1"), time_zone("UTC"), datetime(2025, 1, 1, tzinfo=UTC), count=2)
    assert [f.day for f in both] == [6, 13]


def test_descriptors() -> None:
    assert parse_cron("@daily") == parse_cron("0 0 * * *").__class__(
        "@daily", *list(parse_cron("0 0 * * *").__dict__.values())[1:])
    assert parse_cron("@hourly").minutes == frozenset({0}) and len(parse_cron("@hourly").hours) == 24


@pytest.mark.parametrize("expr, message", [
    ("0 21 * *", "expected 5 fields"),
    ("0 21 * * * *", "expected 5 fields"),
    ("60 21 * * *", "minute '60': out of range 0-59"),
    ("0 24 * * *", "hour '24': out of range 0-23"),
    ("0 21 0 * *", "day of month '0': out of range 1-31"),
    ("0 21 * 13 *", "month '13': out of range 1-12"),
    ("0 21 * * 7", "day of week '7': out of range 0-6"),
    ("0 21 * * MON", "day of week 'MON': expected a number"),
    ("*/0 21 * * *", "the step must be a whole number above 0"),
    ("0 23-21 * * *", "the range starts after it ends"),
    ("@every 24h", "@every is not supported"),
    ("@nightly", "unknown descriptor"),
])
def test_bad_cron_is_refused_naming_the_field(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=re.escape(message)):
        parse_cron(expr)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "asia/seoul ", "../etc/passwd", "/etc/localtime"])
def test_bad_time_zone_is_refused(zone: str) -> None:
    with pytest.raises(CronError, match="is not an IANA time zone"):
        time_zone(zone)


# -- the CronWorkflow ------------------------------------------------------------------------
def example_schedule() -> dict:
    return research_cron_workflow(
        "eval-nightly", TEMPLATE, "0 21 * * *",
        {**REQUIRED, "replicas": "2", "run-preprocess": "false", "eval-suites": '["mmlu","gsm8k"]'},
        "research", timezone="Asia/Seoul", priority=4, keep=5, starting_deadline_seconds=1800)


def test_runs_are_created_parked_with_what_the_gate_reads() -> None:
    spec = example_schedule()["spec"]
    assert spec["schedules"] == ["0 21 * * *"] and "schedule" not in spec
    assert spec["timezone"] == "Asia/Seoul" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] == 1800
    assert spec["successfulJobsHistoryLimit"] == 5 and spec["failedJobsHistoryLimit"] == 5
    assert spec["workflowMetadata"] == {
        "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "2", "offhours.io/run-id": "eval-nightly",
                   "offhours.io/state": "parked", "offhours.io/managed": "true", "offhours.io/schedule": "eval-nightly"},
        "annotations": {"offhours.io/priority": "4"},
    }
    wf = spec["workflowSpec"]
    assert wf["suspend"] is True and wf["workflowTemplateRef"] == {"name": "offhours-llm-pipeline"}
    args = {p["name"]: p["value"] for p in wf["arguments"]["parameters"]}
    assert args == {**REQUIRED, "replicas": "2", "run-preprocess": "false", "eval-suites": '["mmlu","gsm8k"]',
                    "run-id": "eval-nightly-{{=" + NIGHT_EXPRESSION + "}}"}
    # The label is computed from the scheduled time as the argument is, never read from the argument:
    # Argo v4.0.5 gives labelsFrom the argument unresolved (the `{{=...}}` text, an invalid label).
    assert wf["workflowMetadata"] == {"labelsFrom": {"offhours.io/run-id": {
        "expression": "'eval-nightly-' + " + NIGHT_EXPRESSION}}}
    assert "workflow.parameters" not in wf["workflowMetadata"]["labelsFrom"]["offhours.io/run-id"]["expression"]


def test_run_id_prefix_is_the_given_run_id() -> None:
    cron = research_cron_workflow("eval-nightly", TEMPLATE, "0 21 * * *", {**REQUIRED, "run-id": "llama-eval"}, "r")
    args = {p["name"]: p["value"] for p in cron["spec"]["workflowSpec"]["arguments"]["parameters"]}
    assert args["run-id"] == night_run_id("llama-eval") == "llama-eval-{{=" + NIGHT_EXPRESSION + "}}"
    labels_from = cron["spec"]["workflowSpec"]["workflowMetadata"]["labelsFrom"]
    assert labels_from["offhours.io/run-id"]["expression"] == night_label_expression("llama-eval")
    assert night_label_expression("llama-eval") == "'llama-eval-' + " + NIGHT_EXPRESSION
    assert cron["spec"]["workflowMetadata"]["labels"]["offhours.io/run-id"] == "llama-eval"


def test_night_expression_gives_the_local_date_and_minute() -> None:
    # What the expression does, step by step, on the two forms of RFC 3339 Argo writes.
    def night(scheduled: str) -> str:
        return scheduled[:16].replace("-", "").replace(":", "").replace("T", "-")
    assert night("2025-01-13T21:00:00+09:00") == "20250113-2100"
    assert night("2025-01-13T12:00:00Z") == "20250113-1200"
    assert "sprig.substr(0, 16, workflow.scheduledTime)" in NIGHT_EXPRESSION


def test_example_schedule_passes_validate_and_matches_its_golden(regen_golden: bool, tmp_path: Path) -> None:
    text = to_yaml(example_schedule())
    golden = GOLDEN / "cronworkflow-eval-nightly.yaml"
    before = golden.read_text() if golden.exists() else None
    if regen_golden and before != text:
        # Rewritten, so not compared: this run fails; the next one compares the new file (as test_golden.py does).
        GOLDEN.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        pytest.fail(f"{golden.name}: golden {'written' if before is None else 'rewritten'}: review `git diff tests/golden`")
    assert text == before, "the example schedule differs from its golden: run `make golden` and review"
    # Valid; its image is a tag, so validate warns (a resumed copy could pull other code) and passes.
    found = validate_documents([("cron.yaml", 0, yaml.safe_load(text))])
    assert [(p.severity, p.path) for p in found] == [("warning", "spec.workflowSpec.arguments.parameters[1].value")]
    assert "image=ghcr.io/lab/t:1 is a mutable tag" in found[0].message
    assert main(["validate", str(golden)]) == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"params": {**REQUIRED, "sft-gpu": "8"}}, "has no parameter sft-gpu"),
    ({"params": {k: v for k, v in REQUIRED.items() if k != "image"}}, "needs -p image=..."),
    ({"params": {**REQUIRED, "replicas": "two"}}, "replicas must be a whole number"),
    ({"params": {**REQUIRED, "run-id": "Night_Eval"}}, "run-id must be a DNS label"),
    ({"params": {**REQUIRED, "run-id": "x" * 50}}, "is longer than 49 characters"),
    ({"schedules": "0 25 * * *"}, "hour '25': out of range 0-23"),
    ({"schedules": []}, "at least one cron expression"),
    ({"timezone": "Asia/Sejong"}, "time zone 'Asia/Sejong' is not an IANA time zone"),
    ({"concurrency": "Replace"}, "concurrency Replace is refused"),
    ({"concurrency": "forbid"}, "concurrency must be one of Forbid, Allow"),
    ({"keep": -1}, "keep must be 0 or more"),
    ({"starting_deadline_seconds": -5}, "starting deadline must be 0 or more"),
    ({"name": "Eval_Nightly"}, "schedule name must be a DNS label"),
    ({"name": "e" * 53}, "at most 52 characters"),
])
def test_bad_schedule_is_refused_naming_what_is_wrong(kwargs: dict, message: str) -> None:
    args = {"name": "eval-nightly", "template": TEMPLATE, "schedules": "0 21 * * *", "params": REQUIRED,
            "namespace": "research", **kwargs}
    options = {k: args.pop(k) for k in ("timezone", "concurrency", "keep", "starting_deadline_seconds") if k in args}
    with pytest.raises(ScheduleError, match=re.escape(message)):
        research_cron_workflow(args["name"], args["template"], args["schedules"], args["params"], args["namespace"],
                               **options)


# -- the Python API and the documentation's example (docs/researchers/nightly.md) ---------------------------------
def readme_nightly_example() -> str:
    section = (REPO / "docs" / "researchers" / "nightly.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Nightly runs page has one Python example"
    return blocks[0]


def test_readme_nightly_example_runs() -> None:
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(readme_nightly_example(), scope)  # noqa: S102 - the README's own example
    template, cron = yaml.safe_load_all(out.getvalue())
    assert template["kind"] == "WorkflowTemplate" and template["metadata"]["name"] == "eval-newest"
    assert cron["kind"] == "CronWorkflow" and cron["metadata"] == scope["nightly"]["metadata"]
    assert cron["metadata"]["name"] == "eval-newest-nightly" and cron["metadata"]["namespace"] == "research"
    spec = cron["spec"]
    assert spec["schedules"] == ["0 21 * * *"] and spec["timezone"] == "Asia/Seoul"
    assert spec["workflowSpec"]["workflowTemplateRef"] == {"name": "eval-newest"}
    assert spec["workflowSpec"]["suspend"] is True
    assert spec["workflowMetadata"]["labels"]["offhours.io/service"] == "chat-llama"
    # The pipeline's template and its schedule, checked together (the ref resolves, parameters exist).
    assert validate_documents([("t.yaml", 0, template), ("t.yaml", 1, cron)]) == []


def test_cron_workflow_refuses_an_unknown_argument_of_a_pipeline() -> None:
    from offhours.workflows.compose import Pipeline, cron_workflow

    p = Pipeline("eval-newest")
    p.step("eval", image="i", command=["e"])
    shared = {k: v for k, v in REQUIRED.items() if k != "image"}  # a composed pipeline has no image parameter
    with pytest.raises(ScheduleError, match=r"^eval-newest has no parameter suites \(none of its 13 parameters is close\)$"):
        cron_workflow(p, "n", "0 21 * * *", {**shared, "suites": "x"})
    cron = cron_workflow(TEMPLATE, "n", "0 21 * * *", {**REQUIRED, "run-sft": False, "eval-suites": ["a", "b"]})
    args = {p["name"]: p["value"] for p in cron["spec"]["workflowSpec"]["arguments"]["parameters"]}
    assert args["run-sft"] == "false" and args["eval-suites"] == '["a","b"]'


# -- `offhours schedule list`, pure parts -----------------------------------------------------
def _run(name: str, schedule: str, scheduled: str, phase: str | None, suspend: bool, run_id: str,
         shutdown: str | None = None) -> dict:
    return {"metadata": {"name": name, "labels": {"offhours.io/schedule": schedule, "offhours.io/run-id": run_id},
                         "annotations": {"workflows.argoproj.io/scheduled-time": scheduled},
                         "creationTimestamp": scheduled},
            "spec": {"suspend": suspend, **({"shutdown": shutdown} if shutdown else {})},
            "status": {"phase": phase} if phase else {}}


def test_list_shows_next_firing_and_the_last_runs_newest_first() -> None:
    cron = example_schedule()
    suspended = research_cron_workflow("pre-nightly", TEMPLATE, "30 1 * * 1-5", REQUIRED, "research")
    suspended["spec"]["suspend"] = True
    runs = [
        _run("eval-nightly-1736769600", "eval-nightly", "2025-01-13T21:00:00+09:00", "Succeeded", False, "n-13"),
        _run("eval-nightly-1736856000", "eval-nightly", "2025-01-14T21:00:00+09:00", "Failed", False, "n-14"),
        _run("eval-nightly-1736856000-p1", "eval-nightly", "2025-01-14T21:00:00+09:00", "Running", True, "n-14"),
        _run("eval-nightly-1736942400", "eval-nightly", "2025-01-15T21:00:00+09:00", "Running", False, "n-15"),
        _run("other-1", "other", "2025-01-15T21:00:00+09:00", "Running", True, "o"),
    ]
    now = datetime(2025, 1, 15, 13, 0, tzinfo=UTC)  # 22:00 in Seoul: tonight's firing has passed
    rows = schedule_rows([suspended, cron], runs, now)
    assert [r.name for r in rows] == ["eval-nightly", "pre-nightly"]
    assert rows[0].next == "2025-01-16 21:00 Asia/Seoul" and rows[0].policy == "Forbid"
    assert rows[0].template == "offhours-llm-pipeline" and rows[0].cron == "0 21 * * *"
    assert rows[0].runs[0] == ("eval-nightly-1736942400", "n-15", "running")
    assert {r[0]: r[2] for r in rows[0].runs[1:]} == {"eval-nightly-1736856000": "Failed",
                                                     "eval-nightly-1736856000-p1": "parked"}
    assert rows[1].next == "suspended" and rows[1].runs == []
    text = render_rows(rows)
    assert text.splitlines()[0].split() == ["NAME", "TEMPLATE", "CRON", "NEXT", "POLICY"]
    assert "    eval-nightly-1736942400  n-15  running" in text


def test_run_states() -> None:
    assert run_state(_run("a", "s", "t", "Running", True, "r")) == "parked"
    assert run_state(_run("a", "s", "t", None, True, "r")) == "parked"
    assert run_state(_run("a", "s", "t", "Running", False, "r")) == "running"
    assert run_state(_run("a", "s", "t", "Running", False, "r", shutdown="Stop")) == "stopping"
    assert run_state(_run("a", "s", "t", "Succeeded", False, "r")) == "Succeeded"
    assert run_state(_run("a", "s", "t", "Error", True, "r")) == "Error"


def test_next_firing_of_several_schedules_is_the_soonest() -> None:
    cron = research_cron_workflow("twice", TEMPLATE, ["0 21 * * *", "0 3 * * *"], REQUIRED, "r", timezone="UTC")
    assert next_firing(cron, datetime(2025, 1, 1, 22, tzinfo=UTC)) == datetime(2025, 1, 2, 3, tzinfo=ZoneInfo("UTC"))


# -- the command line, offline: bad input is one line and no cluster is asked ----------------
@pytest.mark.parametrize("argv, message", [
    (["x", "--template", "offhours-llm-pipeline", "--cron", "0 21 * *"], "expected 5 fields"),
    (["x", "--template", "offhours-llm-pipeline", "--cron", "0 21 * * *", "--timezone", "Moon/Base"],
     "time zone 'Moon/Base'"),
    (["x", "--template", "offhours-llm-pipeline", "--cron", "0 21 * * *", "-p", "novalue"], "expected name=value"),
    (["x", "--template", "offhours-llm-pipeline", "--cron", "0 21 * * *", "--concurrency", "Replace"],
     "concurrency Replace is refused"),
    (["x", "--cron", "0 21 * * *"], "needs --template and --cron"),
    (["suspend"], "needs the schedule's name"),
    (["list", "--template", "t"], "'list' is a verb of offhours schedule"),
])
def test_cli_refuses_bad_input_in_one_line_before_any_cluster_call(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")  # a cluster call would fail differently
    assert main(["schedule", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("schedule: ") and message in err, err


JOB_PARAMS = ["-p", "service=chat", "-p", "image=busybox", "-p", 'command=["true"]',
              "-p", "checkpoint-uri=s3://bucket/ckpt", "-p", "output-uri=s3://bucket/out"]


def test_dry_run_prints_the_cron_workflow_with_no_cluster(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: no kubeconfig and no in-cluster account; the dry run still prints, checked against the library."""
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["schedule", "nightly", "--template", "offhours-job", "--cron", "0 21 * * *", "--dry-run",
                 *JOB_PARAMS]) == 0
    out = capsys.readouterr()
    body = yaml.safe_load(out.out)
    assert (body["kind"], body["metadata"]["name"], body["spec"]["schedules"]) == ("CronWorkflow", "nightly",
                                                                                  ["0 21 * * *"])
    assert out.err == ("schedule: note: no cluster to read offhours-job from: checked against the library's own "
                       "template\n")


@pytest.mark.parametrize(("extra", "message"), [
    (["-p", "mesage=hi"], "offhours-job has no parameter mesage"),
    (["-p", "replicas=0"], "replicas must be a whole number >= 1"),
])
def test_dry_run_with_no_cluster_checks_parameters_against_the_library(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["schedule", "nightly", "--template", "offhours-job", "--cron", "0 21 * * *", "--dry-run",
                 *JOB_PARAMS, *extra]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and message in out.err, out.err


def test_dry_run_of_a_template_the_library_lacks_needs_a_cluster(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["schedule", "nightly", "--template", "my-own", "--cron", "0 21 * * *", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.splitlines()[-1].startswith(
        "schedule: 'my-own' is not a template of the library, and no cluster: no Kubernetes configuration in "
        "/nonexistent/kubeconfig"), err
    assert "make cluster-up" in err  # and how to get one
