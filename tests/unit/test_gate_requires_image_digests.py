"""`research.requireImageDigests`: the gate admits only jobs whose images name a digest, and says why it waits.

Played through the real `Gate` on the in-memory cluster. Invariants, in words: with the option on, a parked
job whose image argument is a tag (`:latest`, a version, none at all) is never admitted, nothing is lent for
it, and its waiting reason names the image and the fix; a job by digest beside it is admitted; with the
option off (the default) both are admitted. The same refusal is what `offhours submit` says before creating it.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.submit_admission import never_admitted
from offhours.scripts.cluster.parked import parked_workflow
from offhours.scripts.config.loader import parse_config
from offhours.scripts.names import ANNOTATION_WAITING_REASON
from offhours.scripts.policy.boundary import unpinned_image_problem
from offhours.scripts.policy.config import ResearchBoundary
from tests.unit.test_gate_controller import World, config
from tests.unit.test_gate_undeclared_arguments import JOB, world

DIGEST = "sha256:" + "9" * 64
tags = st.sampled_from(["ghcr.io/lab/t:latest", "ghcr.io/lab/t", "ghcr.io/lab/t:v1", "localhost:5000/t:1",
                        "ghcr.io/lab/t@sha256:short"])


def _gated(require: bool) -> World:
    cfg = config()
    w = world()
    w.gate.config = dataclasses.replace(cfg, research=dataclasses.replace(cfg.research, require_image_digests=require))
    return w


def _park(w: World, name: str, image: str) -> None:
    w.park(name, replicas=2)
    spec = w.wf(name)["spec"]
    spec["workflowTemplateRef"] = {"name": JOB["metadata"]["name"]}
    spec["arguments"]["parameters"] += [{"name": "image", "value": image}, {"name": "command", "value": '["x"]'},
                                        {"name": "output-uri", "value": "s3://o"},
                                        {"name": "checkpoint-uri", "value": "s3://c"}]


@settings(max_examples=10, deadline=None)
@given(tags, st.booleans())
def test_a_job_by_tag_waits_naming_its_image_while_one_by_digest_is_admitted(tag: str, require: bool) -> None:
    w = _gated(require)
    _park(w, "by-tag", tag)
    _park(w, "by-digest", f"ghcr.io/lab/t@{DIGEST}")
    for _ in range(7):
        w.tick()
    assert w.state("by-digest") == "admitted"
    if not require:
        assert w.state("by-tag") == "admitted"
        return
    assert w.state("by-tag") == "parked" and w.replicas() == 6  # lent for the one by digest only
    reason = w.wf("by-tag")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason == (f"not admitted: image={tag} is a mutable tag and research.requireImageDigests is on: submit it "
                      "again with the image by digest (name@sha256:...)")


def test_the_option_is_read_from_the_configuration_and_off_by_default() -> None:
    base = {"namespace": "s", "tickSeconds": 60, "metrics": {"source": "direct"},
            "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}}
    assert parse_config(base).research.require_image_digests is False
    assert parse_config({**base, "research": {"requireImageDigests": True}}).research.require_image_digests is True


@pytest.mark.parametrize("spec", [None, [], {"arguments": "x"}, {"arguments": {"parameters": [1, {"name": 2}]}},
                                  {"arguments": {"parameters": [{"name": "image", "value": None}]}}])
def test_a_malformed_spec_is_no_refusal_and_never_an_error(spec: object) -> None:
    assert unpinned_image_problem(spec, ResearchBoundary(require_image_digests=True)) is None


def test_submit_refuses_it_in_the_gates_words_before_creating_it() -> None:
    cfg = config()
    cfg = dataclasses.replace(cfg, research=dataclasses.replace(cfg.research, require_image_digests=True))
    params = {"service": "chat", "run-id": "r", "image": "ghcr.io/lab/t:1", "command": '["x"]',
              "output-uri": "s3://o", "checkpoint-uri": "s3://c"}
    body = parked_workflow(JOB, params, "research")
    assert never_admitted(body, cfg, None) == (
        "the gate would never admit it: image=ghcr.io/lab/t:1 is a mutable tag and research.requireImageDigests is "
        "on: submit it again with the image by digest (name@sha256:...)")
    assert never_admitted(parked_workflow(JOB, {**params, "image": f"ghcr.io/lab/t@{DIGEST}"}, "research"), cfg,
                          None) is None


@settings(max_examples=5, deadline=None)
@given(tags)
def test_a_job_left_to_its_templates_tagged_default_image_waits(tag: str) -> None:
    # The workflow names no image argument: Argo runs the WorkflowTemplate's default, which is judged as one given.
    w = _gated(True)
    template = w.cluster.templates[("research", JOB["metadata"]["name"])]
    for param in template["spec"]["arguments"]["parameters"]:
        if param["name"] == "image":
            param["value"] = tag
    _park(w, "by-default", f"ghcr.io/lab/t@{DIGEST}")
    params = w.wf("by-default")["spec"]["arguments"]["parameters"]
    params[:] = [p for p in params if p["name"] != "image"]
    for _ in range(7):
        w.tick()
    assert w.state("by-default") == "parked"
    assert f"image={tag} is a mutable tag" in w.wf("by-default")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
