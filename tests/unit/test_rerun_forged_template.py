"""A provenance record a tenant wrote names its WorkflowTemplate: a name that is no object name ('' lists every
template, a '/' reaches another path) is refused as the record's problem, never sent to the API server."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.rerun import RerunError, run_record
from offhours.scripts.names import ANNOTATION_PROVENANCE
from offhours.scripts.runtime.provenance import ProvenanceError, decode
from tests.unit.test_rerun import records, submitted

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NOT_A_NAME = st.one_of(st.sampled_from(["", "a/b", "..", "A", "-a", "a" * 254, "a b", "a\n"]),
                       st.text(min_size=1, max_size=20).filter(lambda t: _NAME.fullmatch(t) is None))


def _forged(name: str) -> dict:
    wf = submitted()
    note = wf["metadata"]["annotations"]
    doc = json.loads(note[ANNOTATION_PROVENANCE])
    doc["template"]["name"] = name
    note[ANNOTATION_PROVENANCE] = json.dumps(doc)
    return wf


@given(NOT_A_NAME)
def test_a_record_naming_no_template_is_refused(name: str) -> None:
    wf = _forged(name)
    with pytest.raises(ProvenanceError, match="template"):
        decode(wf["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train")
    with pytest.raises(RerunError, match="nothing was created"):
        run_record("train", records(wf))


def test_a_template_name_is_read() -> None:
    wf = _forged("offhours-job.v2")
    assert decode(wf["metadata"]["annotations"][ANNOTATION_PROVENANCE], "train").template == "offhours-job.v2"
