"""A state ConfigMap hand-edited into a shape the gate never writes: that service's problem, the rest of the pool read."""

import json

import pytest

from offhours.scripts.pool.model import build_pool
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, workflow

EDITS = {
    "deploymentUID is a list": json.dumps({**chat_state(), "deploymentUID": ["uid-chat"]}),
    "deploymentUID is an object": json.dumps({**chat_state(), "deploymentUID": {"uid": "uid-chat"}}),
    "state.json nested past the parser": "[" * 100_000,
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_one_hand_edited_state_configmap_does_not_hide_the_pool(edit: str) -> None:
    """Fault: an on-call engineer's malformed state.json made the whole read model raise (console and every verb)."""
    broken = state_configmap("chat", chat_state())
    broken["data"]["state.json"] = EDITS[edit]
    pool = build_pool([broken, state_configmap("code", chat_state())], [deployment("chat", 8, 8), deployment("code", 4, 4)],
                      [workflow("train", "chat", 2, "admitted", "Running")], SERVING, now=NOW)
    assert {s.name for s in pool.services} == {"chat", "code"}
    assert len(pool.runs) == 1
    if edit.startswith("state.json"):
        assert "not JSON" in (pool.service("chat").problem or "")
