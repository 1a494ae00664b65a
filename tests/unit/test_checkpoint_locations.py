"""Checkpoint locations: what the parameter check accepts is what the store writes, where it says, never another run's.

File-system stores under a temporary folder (no sockets, no processes); S3 locations are only
parsed here (tests/integration/test_checkpoint_store.py writes them to a real S3 server).
"""

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.runtime.checkpoint import CheckpointError, CheckpointStore, RetryPolicy, latest_progress_time
from offhours.scripts.runtime.parameters import STEP_ENVIRONMENT, check_values, value_problem
from offhours.scripts.runtime.store_uri import parse_store_uri
from offhours.steps import eval as eval_step
from offhours.steps.research_step import research_step

SCHEMA = {"checkpoint-uri": "checkpoint-uri", "run-id": "run-id"}
TRICKY = ["s3://lab/ckpt", "s3://lab/ckpt/", "s3://lab/a#frag", "s3://lab/a?versionId=1", "s3://lab/a%20b",
          "file://tmp/ckpt", "file:///tmp/ckpt", "file://localhost/tmp/ckpt", "file:///tmp/../etc", "file:///tmp//x",
          "gs://lab/ckpt", "S3://lab/x", "s3:///x", "s3://lab", "s3://lab.example/x", "s3://192.168.1.1/x",
          "s3://la..b/x", "s3://lab/données/run", "s3://lab/cafe\u0301", "s3://lab/\u202eevil", "s3://lab/a\tb",
          "s3://lab/step-000000000007/x", "s3://lab/" + "a" * 256, "file:///", "s3://lab/a\\b", "", "s3:/lab/x"]


@pytest.mark.parametrize("uri", TRICKY)
def test_the_check_accepts_exactly_the_uris_the_store_writes(uri: str) -> None:
    """Fault: a URI the check lets through but the store refuses (or writes elsewhere), or the reverse."""
    problem = value_problem("checkpoint-uri", uri)
    try:
        CheckpointStore(uri, run_id="r", policy=RetryPolicy())
        refused = None
    except CheckpointError as err:
        refused = str(err)
    assert (problem is None) == (refused is None), (problem, refused)
    if refused:
        assert refused == f"{uri}: {problem}" and "\n" not in refused


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_text_is_accepted_by_both_or_refused_by_both(tail: str) -> None:
    """Fault: arbitrary text after s3://lab/ or file:///, where the two readers could disagree."""
    for uri in (f"s3://lab/{tail}", f"file:///{tail}", tail):
        problem = value_problem("checkpoint-uri", uri)
        try:
            CheckpointStore(uri, run_id="r", policy=RetryPolicy())
            accepted = True
        except CheckpointError:
            accepted = False
        assert accepted == (problem is None), (uri, problem)


@pytest.mark.parametrize("uri, path", [
    ("file:///{tmp}/ckpt/run/job", "ckpt/run/job"),
    ("file://localhost/{tmp}/données/ünï/job", "données/ünï/job"),
    ("file:///{tmp}/a b/run.v2/job", "a b/run.v2/job"),
])
def test_a_file_store_writes_exactly_at_the_uris_path(tmp_path: Path, uri: str, path: str) -> None:
    """Fault: a store writing anywhere but the literal path the URI names (a host read as a folder, escapes decoded)."""
    if " " in uri:
        with pytest.raises(CheckpointError, match="blank"):
            CheckpointStore(uri.format(tmp=str(tmp_path).lstrip("/")), run_id="run")
        return
    store = CheckpointStore(uri.format(tmp=str(tmp_path).lstrip("/")), run_id="run")
    store.save(3, b"three")
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert [w.rsplit("-", 1)[0] for w in written] == [
        f"{path}/run/_data/000000000000003-000000000001", f"{path}/run/_log/000000000001",
        f"{path}/run/_log/000000000002", f"{path}/run/progress.json"]


def test_a_checkpoint_base_that_names_the_run_id_is_refused() -> None:
    """Fault: base x/a with run a, whose folders would lie where run a of base x keeps a step named a."""
    assert check_values(SCHEMA, {"checkpoint-uri": "s3://lab/x/a", "run-id": "a"}) == [
        "parameter checkpoint-uri='s3://lab/x/a' names the run id 'a' as a folder: steps add /<run-id>/<step> "
        "themselves, and this one's checkpoints could be taken for another run's; leave the run id out"]
    assert check_values(SCHEMA, {"checkpoint-uri": "s3://lab/x/a-1", "run-id": "a"}) == []
    assert check_values(SCHEMA, {"checkpoint-uri": "s3://a/x", "run-id": "a"}) == []  # a bucket is not a folder


def test_a_base_whose_steps_could_not_be_written_is_refused() -> None:
    """Fault: a run id named like a checkpoint folder, or a base too long for /<run-id>/<step> to fit under S3's limit."""
    assert check_values(SCHEMA, {"checkpoint-uri": "s3://lab/x", "run-id": "step-000000000001"}) == [
        "parameter checkpoint-uri='s3://lab/x' cannot hold the steps' checkpoints: with the run id "
        "'step-000000000001' appended, it has a segment 'step-000000000001' named like a checkpoint folder "
        "(step- and 12 digits)"]
    long_base = "s3://lab/" + "/".join(["d" * 220] * 4)
    assert value_problem("checkpoint-uri", long_base) is None  # a store may sit there itself...
    [problem] = check_values(SCHEMA, {"checkpoint-uri": long_base, "run-id": "a"})
    assert "cannot hold the steps' checkpoints" in problem and "longer than 960 bytes" in problem  # ...not a run
    assert check_values(SCHEMA, {"checkpoint-uri": "s3://lab/x", "run-id": "step-1"}) == []  # a plain name


def test_the_env_parameter_cannot_shadow_what_the_step_sets() -> None:
    """Fault: env naming a variable the step sets from its own parameters (the checkpoint URI, the run id)."""
    env = {e.name for e in (research_step("job", "d").env or [])} | {e.name for e in (eval_step.template().env or [])}
    assert env == set(STEP_ENVIRONMENT)
    for name in STEP_ENVIRONMENT:
        assert value_problem("env", json.dumps({name: "x"})) == f"must not set {name}: the step sets it from " \
                                                               f"{STEP_ENVIRONMENT[name]}"


def test_log_entries_are_ascii_digits_only(tmp_path: Path) -> None:
    """Fault: a log entry named with Arabic-Indic digits (which int() reads as 12) taken for the newest."""
    store = CheckpointStore(f"file://{tmp_path}/run/job", run_id="r")
    store.save(5, b"five")
    log = tmp_path / "run" / "job" / "r" / "_log"
    (log / "٠٠٠٠٠٠٠٠٠٠١٢").write_bytes((log / "000000000002").read_bytes())
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (5, b"five")


def test_bad_steps_and_data_are_refused_before_any_write(tmp_path: Path) -> None:
    """Fault: a careless caller passing a negative, boolean or text step, or text data: one error, nothing written."""
    store = CheckpointStore(f"file://{tmp_path}/run/job", run_id="r")
    for step, data in ((-1, b"x"), (True, b"x"), ("7", b"x"), (10**15, b"x"), (1, "text")):
        with pytest.raises(CheckpointError, match="step must be|must be bytes"):
            store.save(step, data)  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()


def test_store_timeouts_and_retries_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: timeouts an operator set by environment ignored, or a bad value taken silently."""
    policy = RetryPolicy.from_env({"OFFHOURS_STORE_CONNECT_TIMEOUT": "1.5", "OFFHOURS_STORE_READ_TIMEOUT": "7",
                                   "OFFHOURS_STORE_ATTEMPTS": "2", "OFFHOURS_STORE_DEADLINE": "30"})
    assert (policy.connect_timeout, policy.read_timeout, policy.attempts, policy.deadline) == (1.5, 7.0, 2, 30.0)
    for var, value in (("OFFHOURS_STORE_READ_TIMEOUT", "0"), ("OFFHOURS_STORE_READ_TIMEOUT", "nan"),
                       ("OFFHOURS_STORE_ATTEMPTS", "1.5"), ("OFFHOURS_STORE_ATTEMPTS", "0"),
                       ("OFFHOURS_STORE_DEADLINE", "soon"), ("OFFHOURS_STORE_CONNECT_TIMEOUT", "-1")):
        with pytest.raises(CheckpointError, match=f"^{var}='{value}' must be"):
            CheckpointStore.from_env({"OFFHOURS_CHECKPOINT_URI": "file:///tmp/x", "OFFHOURS_RUN_ID": "r", var: value})
    for var, value in (("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")):
        monkeypatch.setenv(var, value)  # nothing to look up on an instance-metadata endpoint
    store = CheckpointStore("s3://lab/run/job", endpoint_url="http://127.0.0.1:9", run_id="r",
                            policy=RetryPolicy(read_timeout=4))
    config = store._backend.s3.meta.config  # type: ignore[attr-defined]
    assert (config.connect_timeout, config.read_timeout, config.retries["total_max_attempts"]) == (3.0, 4, 1)


SEGMENTS = st.sampled_from(["a", "b", "a-1", "a.b", "é", "job"])
RUNS = st.sampled_from(["a", "b", "a-1", "job"])


@st.composite
def runs(draw: st.DrawFn) -> tuple[tuple[str, ...], str, str, str]:
    """A run as a pipeline lays it out: base segments, run id, step and an optional fan-out item."""
    return (tuple(draw(st.lists(SEGMENTS, max_size=3))), draw(RUNS), draw(st.sampled_from(["a", "job", "eval"])),
            draw(st.sampled_from(["", "a", "b"])))


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(runs(), runs())
def test_no_run_reads_another_runs_progress_or_checkpoints(one: tuple, other: tuple) -> None:
    """Fault: two runs whose ids or bases are prefixes of each other (a, a-1, a/b, same id at another depth)."""
    with tempfile.TemporaryDirectory() as tmp:
        def base(run: tuple) -> str:
            return f"file://{tmp}/root" + "".join("/" + s for s in run[0])

        def store_uri(run: tuple) -> str:
            return f"{base(run)}/{run[1]}/{run[2]}" + (f"/{run[3]}" if run[3] else "")

        for run in (one, other):
            if check_values(SCHEMA, {"checkpoint-uri": base(run), "run-id": run[1]}):
                return  # the parameter check refuses this run: it never starts
        if (base(one), one[1]) == (base(other), other[1]):
            return  # the same run
        if parse_store_uri(store_uri(one)) == parse_store_uri(store_uri(other)):
            raise AssertionError(f"two runs share a store: {one} {other}")
        CheckpointStore(store_uri(other), run_id=other[1]).save(9, b"other")
        assert latest_progress_time(f"{base(one)}/{one[1]}") is None
        mine = CheckpointStore(store_uri(one), run_id=one[1])
        if not parse_store_uri(store_uri(other)).is_within(parse_store_uri(store_uri(one))):
            assert mine.latest() is None
        mine.save(4, b"mine")
        latest = mine.latest()
        assert latest is not None and latest.data == b"mine"
        assert latest_progress_time(f"{base(one)}/{one[1]}") is not None


def test_a_copied_progress_file_is_not_taken_for_the_runs_own(tmp_path: Path) -> None:
    """Fault: a tenant copies another run's (fresher) progress.json into its own folder to look cheap to stop."""
    CheckpointStore(f"file://{tmp_path}/ckpt/b/job", run_id="b").save(100, b"b")
    (tmp_path / "ckpt" / "a" / "job").mkdir(parents=True)
    (tmp_path / "ckpt" / "a" / "job" / "progress.json").write_bytes(
        (tmp_path / "ckpt" / "b" / "job" / "b" / "progress.json").read_bytes())
    forged = {"step": 1, "time": 1e300, "run": "a", "store": f"file://{tmp_path}/ckpt/b/job/b"}
    (tmp_path / "ckpt" / "a" / "x").mkdir()
    (tmp_path / "ckpt" / "a" / "x" / "progress.json").write_text(json.dumps(forged))
    assert latest_progress_time(f"file://{tmp_path}/ckpt/a") is None


def test_a_store_built_from_the_uri_alone_records_the_steps_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: a job that builds its store from OFFHOURS_CHECKPOINT_URI by hand, without from_env or a run id."""
    monkeypatch.setenv("OFFHOURS_RUN_ID", "r7")
    CheckpointStore(f"file://{tmp_path}/ckpt/r7/train").save(2, b"two")
    assert json.loads((tmp_path / "ckpt" / "r7" / "train" / "r7" / "progress.json").read_text())["run"] == "r7"
    assert latest_progress_time(f"file://{tmp_path}/ckpt/r7") is not None


def test_a_planted_fifo_link_or_huge_progress_file_is_skipped_not_read(tmp_path: Path) -> None:
    """Closes the class "the gate's advisory progress read is unbounded by what a tenant leaves in its folder".

    A FIFO named progress.json blocked the read's open for ever, and a link to a huge (sparse) file was
    read whole; each is now skipped, and the run's real record is still found.
    """
    CheckpointStore(f"file://{tmp_path}/ckpt/a/job", run_id="a").save(3, b"three")
    (tmp_path / "ckpt" / "a" / "fifo").mkdir()
    os.mkfifo(tmp_path / "ckpt" / "a" / "fifo" / "progress.json")
    big = tmp_path / "big"
    with open(big, "wb") as out:
        out.truncate(4 << 30)
    (tmp_path / "ckpt" / "a" / "link").mkdir()
    (tmp_path / "ckpt" / "a" / "link" / "progress.json").symlink_to(big)
    (tmp_path / "ckpt" / "a" / "large").mkdir()
    with open(tmp_path / "ckpt" / "a" / "large" / "progress.json", "wb") as out:
        out.truncate(1 << 30)
    assert latest_progress_time(f"file://{tmp_path}/ckpt/a", timeout=1.0) is not None
