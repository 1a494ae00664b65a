"""The ledger's entries, decoded in one place (policy.ownership): bounded, refused with one reason, raising
nothing past the baseline.

Invariants, generated: any text under any key either decodes to an entry within the bounds (counts 0 to
MAX_OWED_REPLICAS, applied at most the baseline, the UID its key) or is refused with a LedgerRefusal naming
what is wrong, never another error; an entry the gate writes reads back as written; what an object is owed
is never below its current value and never above the larger of its current value and its recorded baseline.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.ownership import (
    MAX_ENTRY_CHARS,
    MAX_OWED_REPLICAS,
    LedgerRefusal,
    Lent,
    decode,
    decode_ledger,
    owed,
)

UID = "00000000-0000-0000-0000-000000000001"
counts = st.integers(0, MAX_OWED_REPLICAS)


@st.composite
def entries(draw: st.DrawFn) -> Lent:
    baseline = draw(counts)
    applied = draw(st.integers(0, baseline))
    applying_from = draw(st.none() | st.integers(0, baseline))
    return Lent("serving", draw(st.sampled_from(["chat", "apps/v1/StatefulSet/chat"])), UID,
                draw(st.sampled_from(["chat", "chat-2"])), baseline, applied, applying_from)


@settings(derandomize=True, max_examples=300)
@given(entries())
def test_an_entry_the_gate_writes_reads_back_as_written(lent: Lent) -> None:
    assert decode(UID, lent.to_json()) == lent
    assert len(lent.to_json()) <= MAX_ENTRY_CHARS


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                         max_size=4), max_leaves=12)
fields = st.fixed_dictionaries({}, optional={
    "v": st.sampled_from([1, 2, "1", None]), "namespace": st.sampled_from(["serving", "", 7]),
    "target": st.sampled_from(["chat", "", None]), "uid": st.sampled_from([UID, "other", ""]),
    "service": st.sampled_from(["chat", "x" * 300]), "baseline": st.one_of(st.integers(-5, 2 * MAX_OWED_REPLICAS),
                                                                          st.booleans(), st.floats(), st.text(max_size=3)),
    "applied": st.integers(-5, 2 * MAX_OWED_REPLICAS), "applyingFrom": st.none() | st.integers(-5, 20),
})


@settings(derandomize=True, max_examples=500)
@given(st.one_of(st.text(max_size=2000), json_values.map(json.dumps), fields.map(json.dumps)))
def test_any_stored_text_is_an_entry_within_bounds_or_one_refusal(text: str) -> None:
    try:
        lent = decode(UID, text)
    except LedgerRefusal as err:
        assert str(err).startswith("ledger entry") and "\n" not in str(err)
        return
    assert lent.uid == UID and 0 <= lent.applied <= lent.baseline <= MAX_OWED_REPLICAS
    assert lent.applying_from is None or 0 <= lent.applying_from <= lent.baseline


@settings(derandomize=True, max_examples=500)
@given(entries(), counts)
def test_what_is_owed_is_never_below_the_object_nor_more_than_was_taken(lent: Lent, current: int) -> None:
    value = owed(lent, current)
    taken = lent.baseline - min(lent.applied, lent.applying_from if lent.applying_from is not None else lent.applied)
    assert current <= value <= min(current + taken, MAX_OWED_REPLICAS) or value == current
    if current in (lent.applied, lent.applying_from):
        assert value == max(current, lent.baseline)  # exactly what was taken, back


def test_another_writers_change_keeps_the_gates_delta_only() -> None:
    # Lent 8 -> 6, then on-call set 3: the gate gives back the 2 it took, not up to 8; set 9: 11, its change kept.
    assert owed(Lent("serving", "chat", UID, "chat", 8, 6), 3) == 5
    assert owed(Lent("serving", "chat", UID, "chat", 8, 6), 9) == 11


@pytest.mark.parametrize(("text", "reason"), [
    ("x" * (MAX_ENTRY_CHARS + 1), "more than the 1024"),
    ("{not json", "not JSON"),
    ("[]", "not a JSON object"),
    (json.dumps({"v": 2}), "version 2"),
    (Lent("serving", "chat", "another", "chat", 8, 6).to_json(), "not the key it is stored under"),
    (Lent("serving", "chat", UID, "chat", 6, 8).to_json(), "above its baseline"),
    (Lent("serving", "chat", UID, "chat", MAX_OWED_REPLICAS + 1, 6).to_json(), "baseline is 10001"),
])
def test_a_tampered_entry_is_refused_with_one_reason(text: str, reason: str) -> None:
    with pytest.raises(LedgerRefusal, match=reason):
        decode(UID, text)


def test_a_ledger_of_many_entries_is_decoded_entry_by_entry_and_a_bad_entry_alone() -> None:
    good, bad = decode_ledger({**{str(i): "{}" for i in range(3000)}, UID: Lent("serving", "chat", UID, "chat", 8, 6).to_json()})
    assert list(good) == [UID] and len(bad) == 3000
    good, bad = decode_ledger({UID: Lent("serving", "chat", UID, "chat", 8, 6).to_json(), "u2": "{"})
    assert list(good) == [UID] and list(bad) == ["u2"] and "not JSON" in bad["u2"]
