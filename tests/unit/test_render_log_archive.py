"""`offhours render --log-archive`: Argo keeps every research pod's main log where `offhours logs` finds it.

The rendered repository ConfigMap and the `archiveLogs`/`artifactRepositoryRef` of the research WorkflowTemplates
pass the Argo v4.0.5 CRD schemas (unknown fields forbidden) and the lint; what `logs` reads back from the ConfigMap
is the location render was given, for any bucket and prefix (generated); a location that is not one is refused with
one line and nothing is written; without the flag the install is unchanged (the goldens).
"""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.main import main
from offhours.scripts.cluster.log_archive import (
    KEY_LAYOUT,
    ArchiveError,
    archive_of,
    parse_archive_uri,
    repository_configmap,
)
from offhours.scripts.names import LOG_ARCHIVE_CONFIGMAP, LOG_ARCHIVE_KEY
from offhours.scripts.validate.runner import validate_documents
from offhours.workflows.render import manifests

ARCHIVE = ("s3://lab-logs/offhours/runs", "minio.storage:9000", "s3-cred", True)
TEMPLATES = ("workflowtemplate-offhours-llm-pipeline.yaml", "workflowtemplate-offhours-job.yaml")


def test_the_archiving_install_passes_the_crd_schemas_and_the_lint() -> None:
    docs = manifests(log_archive=ARCHIVE)
    for name in TEMPLATES:
        spec = docs[name]["spec"]
        assert spec["archiveLogs"] is True
        assert spec["artifactRepositoryRef"] == {"configMap": LOG_ARCHIVE_CONFIGMAP, "key": LOG_ARCHIVE_KEY}
    problems = validate_documents([(name, 0, doc) for name, doc in docs.items() if "argoproj" in doc["apiVersion"]])
    assert problems == []
    archive = archive_of(docs[f"configmap-research-{LOG_ARCHIVE_CONFIGMAP}.yaml"]["data"], "rendered")
    assert (archive.bucket, archive.prefix, archive.endpoint_url(None)) == ("lab-logs", "offhours/runs",
                                                                           "http://minio.storage:9000")
    assert archive.endpoint_url("http://127.0.0.1:9") == "http://127.0.0.1:9"  # OFFHOURS_S3_ENDPOINT_URL first


def test_without_the_flag_nothing_archives() -> None:
    docs = manifests()
    assert not any("archiveLogs" in (doc.get("spec") or {}) for doc in docs.values())
    assert not any(LOG_ARCHIVE_CONFIGMAP in name for name in docs)


segment = st.text(st.sampled_from("abcxyz019._-"), min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@given(st.from_regex(r"[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", fullmatch=True), st.lists(segment, min_size=1, max_size=4))
def test_what_logs_reads_back_is_where_render_put_it(bucket: str, parts: list[str]) -> None:
    prefix = "/".join(parts)
    archive = archive_of(repository_configmap("research", f"s3://{bucket}/{prefix}")["data"], "cm")
    assert (archive.bucket, archive.prefix) == (bucket, prefix)
    assert archive.folder("research", "train-z") == f"{prefix}/research/train-z/"


@pytest.mark.parametrize("uri", ["lab/logs", "s3://lab", "s3://Lab_Bad/x", "s3://lab/a//b", "s3://lab/{{x}}"])
def test_a_location_that_is_not_one_is_refused_and_nothing_written(uri: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ArchiveError):
        parse_archive_uri(uri)
    assert main(["render", "--out", str(tmp_path / "out"), "--log-archive", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("render: --log-archive") and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_repository_not_in_offhours_layout_is_named_not_guessed() -> None:
    data = repository_configmap("research", "s3://lab/logs")["data"]
    other = {LOG_ARCHIVE_KEY: data[LOG_ARCHIVE_KEY].replace(KEY_LAYOUT, "/{{workflow.name}}")}
    with pytest.raises(ArchiveError, match="is not PREFIX"):
        archive_of(other, "ConfigMap research/offhours-log-archive")
    with pytest.raises(ArchiveError, match="no 's3' key"):
        archive_of({}, "ConfigMap research/offhours-log-archive")
