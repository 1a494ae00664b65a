"""A run's provenance: recorded at submit, read back only as that run's, and every resumed copy runs the first digests.

The class: a resumed copy that runs other code than its first run (a tag moved between the stop and the
resume). The mechanism: a parked copy's image arguments are rewritten to `name@sha256:...` from the
first digest recorded for the run (`runtime.provenance.pinned_arguments`, called by `build_parked_copy`
for both cluster adapters). The generated test below moves the tag at every attempt, on the in-memory
cluster and on the Kubernetes adapter (pods read from a fake API server's pod list), and checks after
every park that the copy runs the first attempt's digest.
"""

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.names import ANNOTATION_PROVENANCE
from offhours.scripts.policy.plan import ADMITTED, Job
from offhours.scripts.runtime import provenance as prov
from offhours.scripts.runtime.provenance import MAX_BYTES, Provenance, ProvenanceError, decode, encode, pin
from offhours.workflows.render import manifests
from tests.unit.test_kube_park_copy import Kube, Memory, original

TEMPLATE = manifests()["workflowtemplate-offhours-job.yaml"]
REQUIRED = {"service": "chat", "run-id": "train", "image": "ghcr.io/lab/t:1", "command": '["python","t.py"]',
            "output-uri": "s3://o/x", "checkpoint-uri": "s3://c"}
digests = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: f"sha256:{h}")
names = st.from_regex(r"[a-z0-9]{1,12}(\.[a-z]{2,5}(:[0-9]{2,5})?)?(/[a-z0-9]{1,10}){1,3}", fullmatch=True)
tags = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)


# -- the reference arithmetic ------------------------------------------------------------------
@given(names, st.one_of(st.none(), tags), digests)
def test_a_pinned_reference_names_the_digest_and_its_repository_and_pinning_is_idempotent(
        name: str, tag: str | None, digest: str) -> None:
    ref = name if tag is None else f"{name}:{tag}"
    pinned = pin(ref, digest)
    assert pinned == f"{name}@{digest}"  # the registry's port is kept, the tag is gone
    assert prov.by_digest(pinned) and not prov.by_digest(ref)
    assert pin(pinned, digest) == pinned and pin(pinned, "sha256:" + "0" * 64) == pinned  # a digest is never moved
    assert prov.mutable_tag_warning("image", ref) is not None and prov.mutable_tag_warning("image", pinned) is None


@pytest.mark.parametrize("image_id, digest", [
    ("docker.io/library/busybox@sha256:" + "a" * 64, "sha256:" + "a" * 64),
    ("docker-pullable://busybox@sha256:" + "b" * 64, "sha256:" + "b" * 64),
    ("sha256:" + "c" * 64, None),  # the node's own image id: no registry serves it
    ("", None), ("busybox:latest", None), ("x@sha256:short", None)])
def test_only_a_repository_digest_in_an_image_id_is_used(image_id: str, digest: str | None) -> None:
    assert prov.reported_digest(image_id) == digest


# -- the record: one clear refusal for anything that is not this run's ------------------------------
values = st.dictionaries(st.text(string.ascii_lowercase + "-", min_size=1, max_size=12),
                         st.text(max_size=40), max_size=12)


@given(values, digests)
def test_a_record_reads_back_as_written_for_its_own_run_only(params: dict[str, str], digest: str) -> None:
    params = {**params, "image": "ghcr.io/lab/t:1"}
    record = Provenance("train", "offhours-job", "42", "0.1.0", params, ("image",), (), {"ghcr.io/lab/t:1": digest})
    assert decode(encode(record), "train") == record
    with pytest.raises(ProvenanceError, match="another run's provenance"):
        decode(encode(record), "other")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: "{" + "x" * MAX_BYTES, "over 16384 bytes"),
    (lambda d: "not json", "not JSON"),
    (lambda d: "[" * 16000, "not JSON"),  # deeper than the parser goes: never a crash of the copy or of `why`
    (lambda d: "[]", "not one of format 1"),
    (lambda d: json.dumps({**d, "format": 2}), "not one of format 1"),
    (lambda d: json.dumps({**d, "parameters": {"a": 1}}), "malformed parameters"),
    (lambda d: json.dumps({**d, "digests": {"x": "latest"}}), "malformed digests"),
    (lambda d: json.dumps({**d, "images": ["missing"]}), "malformed images"),
    (lambda d: json.dumps({**d, "template": "offhours-job"}), "malformed template"),
    (lambda d: "", "has no provenance record"),
])
def test_a_bad_record_is_refused_with_one_error_naming_what_is_wrong(mutate: Any, message: str) -> None:
    record = Provenance("train", "offhours-job", "42", "0.1.0", {"image": "x:1"}, ("image",))
    with pytest.raises(ProvenanceError, match=message):
        decode(mutate(json.loads(encode(record))), "train")


def test_an_oversized_record_is_refused_at_submit_naming_the_run() -> None:
    with pytest.raises(SubmitError, match="provenance of run train is .* bytes, over the 16384"):
        parked_workflow(TEMPLATE, {**REQUIRED, "args": json.dumps(["x" * 9000, "y" * 9000])}, "research")


def test_submit_records_every_parameter_with_defaults_the_template_and_the_version() -> None:
    wf = parked_workflow({**TEMPLATE, "metadata": {**TEMPLATE["metadata"], "resourceVersion": "777"}},
                         REQUIRED, "research")
    record = decode(wf["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train")
    declared = {p["name"]: p.get("value") for p in TEMPLATE["spec"]["arguments"]["parameters"]}
    assert record.parameters == {k: REQUIRED.get(k, v) for k, v in declared.items()}
    assert (record.template, record.template_version, record.images) == ("offhours-job", "777", ("image",))
    assert set(record.uris) == {"input-uri", "output-uri", "checkpoint-uri"} and record.offhours
    assert record.digests == {}


# -- every resumed copy runs its first run's digests ---------------------------------------------
def _report(h: Kube | Memory, wf: dict[str, Any], image: str, digest: str) -> None:
    """The kubelet's report for the workflow's pod: what its spec names, the digest it pulled."""
    meta = wf["metadata"]
    if isinstance(h, Memory):
        h.cluster.image_digests[("research", meta["name"])] = {image: digest}
        return
    h.core.pods[meta["name"]] = [client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"{meta['name']}-main", owner_references=[client.V1OwnerReference(
            api_version="argoproj.io/v1alpha1", kind="Workflow", name=meta["name"], uid=meta["uid"])]),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image=image)]),
        status=client.V1PodStatus(container_statuses=[client.V1ContainerStatus(
            name="main", image=image, image_id=f"{image.split('@')[0]}@{digest}", ready=True, restart_count=0)]))]


def _image(wf: dict[str, Any]) -> str:
    return next(p["value"] for p in wf["spec"]["arguments"]["parameters"] if p["name"] == "image")


@pytest.mark.parametrize("kind", [Kube, Memory])
@settings(max_examples=25, deadline=None)
@given(moved=st.lists(st.tuples(digests, st.booleans()), min_size=2, max_size=5, unique_by=lambda t: t[0]),
       recorded=st.booleans())
def test_every_resumed_copy_runs_the_digest_its_first_run_reported_whatever_the_tag_points_to_since(
        kind: type[Kube | Memory], moved: list[tuple[str, bool]], recorded: bool) -> None:
    """Invariant after every park: the copy's image is the first digest ever reported for the run (its pods' report
    may be missing: deleted, or a node that reports none), else the original reference; the record (if any) is
    carried, still this run's, with that digest; every other argument is the original's."""
    h = kind()
    wf = original()
    ref = "ghcr.io/lab/train:latest"
    wf["spec"]["arguments"]["parameters"].append({"name": "image", "value": ref})
    if recorded:
        record = Provenance("train", "offhours-job", "1", "0.1.0", {"run-id": "train", "image": ref}, ("image",))
        wf["metadata"]["annotations"][ANNOTATION_PROVENANCE] = encode(record)
    h.add(wf)
    first = None
    for attempt, (digest, reported) in enumerate(moved):
        running = h.cluster.workflow("research", wf["metadata"]["name"])
        assert running is not None
        image = _image(running)
        # The tag moved since the last attempt; a reference by digest pulls that digest.
        if reported:
            _report(h, running, image, image.split("@")[1] if "@" in image else digest)
            first = first or digest
        made = h.cluster.park_copy("research", Job(name=running["metadata"]["name"], service="chat", replicas=2,
                                                   state=ADMITTED, uid=running["metadata"]["uid"]))
        wf = h.cluster.workflow("research", made.name)
        assert wf is not None
        assert _image(wf) == (f"ghcr.io/lab/train@{first}" if first else ref), (attempt, _image(wf))
        assert [p for p in wf["spec"]["arguments"]["parameters"] if p["name"] != "image"] == [
            {"name": "run-id", "value": "train"}]
        carried = wf["metadata"]["annotations"].get(ANNOTATION_PROVENANCE)
        if recorded:
            assert decode(carried, "train").digests == ({ref: first} if first else {})
        else:
            assert carried is None


@pytest.mark.parametrize("kind", [Kube, Memory])
def test_a_copy_drops_a_record_of_another_run_and_pins_by_what_its_pods_reported(kind: type[Kube | Memory]) -> None:
    h = kind()
    wf = original()
    wf["spec"]["arguments"]["parameters"].append({"name": "image", "value": "x/y:2"})
    forged = Provenance("victim", "offhours-job", "1", "0.1.0", {"image": "x/y:2"}, ("image",),
                        digests={"x/y:2": "sha256:" + "e" * 64})
    wf["metadata"]["annotations"][ANNOTATION_PROVENANCE] = encode(forged)
    h.add(wf)
    _report(h, wf, "x/y:2", "sha256:" + "1" * 64)
    made = h.cluster.park_copy("research", Job(name="train", service="chat", replicas=2, state=ADMITTED, uid="u-train"))
    copy_ = h.cluster.workflow("research", made.name)
    assert copy_ is not None and ANNOTATION_PROVENANCE not in copy_["metadata"]["annotations"]
    assert _image(copy_) == "x/y@sha256:" + "1" * 64


def test_the_first_recorded_digest_wins_over_a_later_report_for_an_argument_still_by_tag() -> None:
    """`argo resubmit` of the first run copies its arguments by tag: its copy still runs the first digest."""
    first, later = "sha256:" + "1" * 64, "sha256:" + "2" * 64
    record = Provenance("train", "t", "1", "0.1.0", {"image": "r/x:v"}, ("image",), digests={"r/x:v": first})
    assert prov.pinned_arguments([{"name": "image", "value": "r/x:v"}], record, {"r/x:v": later}) == [
        {"name": "image", "value": f"r/x@{first}"}]
    assert record.with_digests({"r/x:v": later}).digests == {"r/x:v": first}
    # An image left to the template's default is added, pinned, so the copy runs it by digest too.
    assert prov.pinned_arguments([], record, {}) == [{"name": "image", "value": f"r/x@{first}"}]


# -- what `offhours why` and the console's job page show ----------------------------------------------
def test_why_and_the_job_page_show_the_newest_record_of_the_run_and_name_one_they_cannot_read() -> None:
    ref = "ghcr.io/lab/t:1"
    first = Provenance("train", "offhours-job", "7", "0.1.0", {"image": ref, "output-uri": "s3://o/x"}, ("image",),
                       ("output-uri",))
    copied = first.with_digests({ref: "sha256:" + "f" * 64})
    assert prov.describe("train", [encode(first), encode(copied)]) == [
        "provenance: template offhours-job at resourceVersion 7, offhours 0.1.0",
        f"  image: {ref} (runs as ghcr.io/lab/t@sha256:{'f' * 64})",
        "  output-uri: s3://o/x",
        "  rerun with the same parameters and images: offhours rerun train"]
    assert prov.describe("train", [encode(first)])[1] == (
        f"  image: {ref} (warning: a mutable tag, no digest reported yet: a resumed copy may pull other code; give the "
        "image by digest)")
    # A copy whose record is another run's is never shown: the run's own older record is.
    other = Provenance("victim", "t", "1", "0.1.0", {"image": "evil:1"}, ("image",))
    assert prov.describe("train", [encode(first), encode(other)])[0].startswith("provenance: template offhours-job")
    assert prov.describe("train", [encode(other)]) == [
        "provenance: unreadable (the provenance record on run train is the record of run \"victim\": a run never "
        "reads another run's provenance)"]
    assert prov.describe("train", [None, None]) == ["provenance: none recorded"]


def test_why_ends_with_the_provenance_read_from_the_workflows() -> None:
    from offhours.scripts.cli.jobs import why_text
    from tests.support.pool_fixture import workflow
    from tests.unit.test_states_mean_what_they_say import _pool

    wf = workflow("train", "chat", 2, "parked", "", created=5, run_id="train")
    record = Provenance("train", "offhours-job", "7", "0.1.0", {"image": "r/x@sha256:" + "a" * 64}, ("image",))
    wf["metadata"].setdefault("annotations", {})[ANNOTATION_PROVENANCE] = encode(record)
    pool = _pool([wf])
    assert why_text(pool.runs[0], pool).splitlines()[-4:] == [
        "", "provenance: template offhours-job at resourceVersion 7, offhours 0.1.0",
        f"  image: r/x@sha256:{'a' * 64}", "  rerun with the same parameters and images: offhours rerun train"]


def test_the_consoles_job_page_shows_the_provenance() -> None:
    from offhours.scripts.console.app import create_app
    from offhours.scripts.console.source import PoolSource
    from tests.support.access import may_all
    from tests.support.pool_fixture import workflow
    from tests.unit.test_console_resubmit import Store

    wf = workflow("train", "chat", 2, "parked", "", created=5, run_id="train")
    record = Provenance("train", "offhours-job", "7", "0.1.0", {"image": "r/x:1"}, ("image",),
                        digests={"r/x:1": "sha256:" + "b" * 64})
    wf["metadata"].setdefault("annotations", {})[ANNOTATION_PROVENANCE] = encode(record)
    app = create_app(PoolSource(Store(wf), interval=0), local_access=may_all())
    page = app.test_client().get("/jobs/train").get_data(as_text=True)
    block = page.split('id="provenance">', 1)[1].split("</pre>", 1)[0]
    assert block.splitlines() == [
        "provenance: template offhours-job at resourceVersion 7, offhours 0.1.0",
        f"  image: r/x:1 (runs as r/x@sha256:{'b' * 64})",
        "  rerun with the same parameters and images: offhours rerun train"]


def test_a_stop_records_the_digests_its_pods_report_so_a_copy_made_after_they_are_gone_runs_them() -> None:
    """Fault: the stopped job's pods end and are deleted before the copy is made (its pods' report is gone).

    On the in-memory cluster (this file's Kubernetes fake has no workflow patch); the e2e file
    test_resume_runs_first_digest_e2e runs it on the real API server, where it raced the pods' deletion."""
    h = Memory()
    wf = original()
    ref, digest = "ghcr.io/lab/train:latest", "sha256:" + "a" * 64
    wf["spec"]["arguments"]["parameters"].append({"name": "image", "value": ref})
    record = Provenance("train", "offhours-job", "1", "0.1.0", {"run-id": "train", "image": ref}, ("image",))
    wf["metadata"]["annotations"][ANNOTATION_PROVENANCE] = encode(record)
    h.add(wf)
    running = h.cluster.workflow("research", wf["metadata"]["name"])
    assert running is not None
    _report(h, running, ref, digest)
    job = Job(name=running["metadata"]["name"], service="chat", replicas=2, state=ADMITTED,
              uid=running["metadata"]["uid"])
    h.cluster.stop("research", job)
    h.cluster.image_digests.clear()  # the pods ended and were deleted: nothing reports any more
    made = h.cluster.park_copy("research", job)
    copy = h.cluster.workflow("research", made.name)
    assert copy is not None and _image(copy) == f"ghcr.io/lab/train@{digest}"
    assert decode(copy["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train").digests == {ref: digest}
