"""The read model reads the gate's record with the gate's own decoder (`ServiceRecord.from_json`), never a second one.

The class: a second decoder of one meaning drifts from the first; the console then shows a baseline or a count of
failed ticks the gate does not believe (a hand edit of the wrong type, which the gate reads as no memory at all).
"""

import json

import pytest

from offhours.scripts.policy.record import ServiceRecord
from offhours.scripts.pool.model import build_pool
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap

EDITS = {
    "baseline is a string": {**chat_state(), "baseline": "10"},
    "failedTicks is negative": {**chat_state(), "failedTicks": -3},
    "applied is a float": {**chat_state(), "applied": 7.5},
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_record_the_gate_reads_as_no_memory_shows_none_and_says_why(edit: str) -> None:
    text = json.dumps(EDITS[edit])
    assert ServiceRecord.from_json(text) == ServiceRecord()  # the gate's reading of it
    pool = build_pool([state_configmap("chat", text)], [deployment("chat", 8, 8)], [], SERVING, now=NOW)
    chat = pool.service("chat")
    assert chat is not None and (chat.baseline, chat.failed_ticks, chat.required) == (None, 0, None)
    assert "the gate reads this state.json as no memory" in (chat.problem or "")


def test_a_record_the_gate_reads_shows_what_the_gate_reads() -> None:
    text = json.dumps(chat_state(baseline=12, failed_ticks=2))
    record = ServiceRecord.from_json(text)
    chat = build_pool([state_configmap("chat", text)], [deployment("chat", 8, 8)], [], SERVING, now=NOW).service("chat")
    assert chat is not None and chat.problem is None
    assert (chat.baseline, chat.failed_ticks) == (record.baseline, record.decision.failed_ticks) == (12, 2)
