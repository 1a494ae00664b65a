"""`offhours rerun`: a new run with exactly the first run's parameters and image references, or one clear refusal."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.main import main
from offhours.scripts.cli.rerun import RerunError, new_run_id, rerun_parameters, run_record
from offhours.scripts.cluster.parked import parked_workflow
from offhours.scripts.names import ANNOTATION_PROVENANCE
from offhours.scripts.runtime.provenance import decode, encode, pin
from offhours.workflows.render import manifests

TEMPLATE = manifests()["workflowtemplate-offhours-job.yaml"]
REQUIRED = {"service": "chat", "run-id": "train", "image": "ghcr.io/lab/t:1", "command": '["python","t.py"]',
            "output-uri": "s3://o/x", "checkpoint-uri": "s3://c"}
DIGEST = "sha256:" + "d" * 64


def submitted(params: dict[str, str] = REQUIRED, name: str = "train-abcde", at: str = "2026-01-01T00:00:00Z",
              ) -> dict[str, Any]:
    wf = parked_workflow(TEMPLATE, params, "research")
    wf["metadata"].update(name=name, uid=f"u-{name}", creationTimestamp=at)
    return wf


def records(*wfs: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The workflows as the resolver hands a run's to `run_record`: oldest first, each with its record."""
    ordered = sorted(wfs, key=lambda w: (w["metadata"]["creationTimestamp"], w["metadata"]["name"]))
    return [(w["metadata"]["name"], w["metadata"]["annotations"].get(ANNOTATION_PROVENANCE)) for w in ordered]


def with_digest(wf: dict[str, Any]) -> dict[str, Any]:
    note = wf["metadata"]["annotations"]
    note[ANNOTATION_PROVENANCE] = encode(decode(note[ANNOTATION_PROVENANCE], "train").with_digests(
        {"ghcr.io/lab/t:1": DIGEST}))
    return wf


cli_values = st.fixed_dictionaries({
    "gpus": st.integers(1, 8).map(str), "args": st.lists(st.text("abc-=", max_size=5), max_size=3).map(json.dumps),
    "input-uri": st.sampled_from(["", "s3://in/a", "gs://in/b"]), "retry-limit": st.integers(0, 9).map(str)})


@settings(max_examples=30, deadline=None)
@given(cli_values)
def test_a_rerun_submits_every_parameter_as_the_first_run_had_it_with_images_by_digest_under_a_new_run_id(
        given_values: dict[str, str]) -> None:
    first = with_digest(submitted({**REQUIRED, **given_values}))
    record = run_record("train", records(first))
    params = rerun_parameters(record, "train-again")
    again = parked_workflow(TEMPLATE, params, "research")
    new = decode(again["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train-again")
    old = decode(first["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train")
    # Invariant: the same value for every parameter but the run id, and the image is the first run's digest.
    assert {k: v for k, v in new.parameters.items() if k not in ("run-id", "image")} == {
        k: v for k, v in old.parameters.items() if k not in ("run-id", "image")}
    assert new.parameters["image"] == pin("ghcr.io/lab/t:1", DIGEST) == f"ghcr.io/lab/t@{DIGEST}"
    assert new.parameters["run-id"] == "train-again" and new.template == old.template


def test_the_record_is_the_first_workflows_with_the_digests_its_copies_recorded() -> None:
    first = submitted()
    copied = with_digest(submitted(name="train-p1", at="2026-01-02T00:00:00Z"))  # the copy carries the digest
    assert run_record("train", records(copied, first)).digests == {"ghcr.io/lab/t:1": DIGEST}
    # A later copy's record of other parameters never changes the run's: only digests of its own images are added.
    forged = submitted({**REQUIRED, "image": "evil/x:1"}, name="train-p2", at="2026-01-03T00:00:00Z")
    assert run_record("train", records(forged, first)).parameters["image"] == "ghcr.io/lab/t:1"
    # A copy without a record (or with another run's) adds nothing.
    bare = submitted(name="train-p3", at="2026-01-04T00:00:00Z")
    bare["metadata"]["annotations"][ANNOTATION_PROVENANCE] = "{"
    assert run_record("train", records(first, bare, copied)).digests == {"ghcr.io/lab/t:1": DIGEST}


@pytest.mark.parametrize("annotation, message", [
    (None, "run train has no provenance record on its first workflow train-abcde"),
    ("{", "not JSON"),
    (json.dumps({"format": 1, "run": "someone-else"}), "is the record of run \"someone-else\": a run never reads another run's"),
    ("x" * 20000, "over 16384 bytes"),
])
def test_a_missing_or_unreadable_record_is_refused_and_nothing_is_created(annotation: str | None, message: str) -> None:
    wf = submitted()
    wf["metadata"]["annotations"].pop(ANNOTATION_PROVENANCE)
    if annotation is not None:
        wf["metadata"]["annotations"][ANNOTATION_PROVENANCE] = annotation
    with pytest.raises(RerunError, match=message) as caught:
        run_record("train", records(wf))
    assert "nothing was created" in str(caught.value)


def test_no_workflow_and_the_same_run_id_are_refused() -> None:
    with pytest.raises(RerunError, match="no workflow of run train"):
        run_record("train", [])
    with pytest.raises(RerunError, match="a rerun is a new run"):
        rerun_parameters(run_record("train", records(submitted())), "train")


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?", fullmatch=True))
def test_a_new_run_id_is_a_label_of_at_most_50_characters_and_another_run(run: str) -> None:
    new = new_run_id(run)
    assert len(new) <= 50 and new != run and new[0].isalnum() and new[-1].isalnum() and "--" not in new[-8:]


def test_rerun_is_a_verb_of_the_command_line(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "submit a new run with exactly the parameters and image digests" in " ".join(capsys.readouterr().out.split())
