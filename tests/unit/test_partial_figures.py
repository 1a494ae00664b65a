"""Figures made without part of their inputs say so, in one wording: report, usage and the console's estimate.

Class: a figure or an estimate stated with a confidence it does not have (a history shorter than the replays it
makes, minutes of it drawn rather than read, a queue the caller may not list or could not read). Mechanism: every
such input is a `Missing` on the figure, and `policy/partial.py` alone turns them into the note people read.
Invariants (generated over which inputs are missing): no note iff nothing is missing; the note names every missing
input; "at least" only when every missing input is a lower bound; an estimate short of days says how many it made.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.report import lower_bound_note
from offhours.scripts.console.request_pages import queue_unknown
from offhours.scripts.policy.estimate import JobRequest
from offhours.scripts.policy.partial import AT_LEAST, PARTIAL, Missing, partial_note
from offhours.scripts.pool.model import SKIPPED_WORKFLOW, Pool
from offhours.scripts.simulate.estimate import DAY, WARMUP_MINUTES, estimate, history_gaps, horizon_minutes
from tests.unit.test_request_estimate import chat

reasons = st.text(st.characters(min_codepoint=0x61, max_codepoint=0x7a), min_size=1, max_size=12)


@given(st.lists(st.tuples(reasons, st.booleans()), max_size=6))
def test_the_note_names_every_missing_input_and_bounds_only_when_each_is_a_bound(items) -> None:
    missing = [Missing(f"<{why}>", bound) for why, bound in items]
    note = partial_note(missing)
    if not missing:
        assert note is None
        return
    assert note is not None
    assert note.startswith(AT_LEAST if all(b for _, b in items) else PARTIAL)
    assert all(f"<{why}>" in note for why, _ in items)


@given(st.lists(st.sampled_from(["a", "b"]), max_size=3), st.integers(0, 3), st.integers(0, 3))
def test_report_and_usage_say_it_in_the_same_words(unknown, skipped, unread) -> None:
    note = lower_bound_note(unknown, skipped, unread)
    assert (note is None) == (not unknown and not skipped and not unread)
    assert note is None or note.startswith(AT_LEAST)  # each of theirs only leaves something out: a lower bound


@given(st.lists(st.booleans(), max_size=300), st.lists(st.sampled_from(["gap", "counter-reset", "no-data"]),
                                                         max_size=5))
def test_a_history_s_drawn_minutes_and_warnings_are_each_named(known, warnings) -> None:
    gaps = history_gaps(np.array(known, dtype=bool), warnings)
    drawn = known.count(False)
    assert bool(gaps) == bool(drawn or warnings)
    note = partial_note(gaps) or ""
    assert (f"{drawn} minute(s)" in note) == bool(drawn)
    assert all(f"{warnings.count(k)} {k}" in note for k in warnings)
    assert gaps == () or note.startswith(PARTIAL)  # drawn load may be more or less than what happened


@given(st.sampled_from([None, "ana"]), st.integers(0, 3))
def test_the_queue_behind_a_request_is_known_or_said_not_to_be(hidden_from, unread) -> None:
    problems = tuple(f"{SKIPPED_WORKFLOW}wf-{i}: not an offhours workflow" for i in range(unread))
    missing = queue_unknown(Pool((), (), None, (*problems, "reading deployments failed")), hidden_from)  # type: ignore[arg-type]
    assert bool(missing) == (hidden_from is not None or unread > 0)
    note = partial_note(missing) or ""
    assert (hidden_from or "") in note and (unread == 0 or hidden_from or f"{unread} workflow(s)" in note)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 6), st.integers(0, 3))
def test_an_estimate_short_of_history_says_how_many_days_it_replayed(have: int, extra: int) -> None:
    """`have` whole replays in the history, `extra` more asked for: the note says so exactly when it is short."""
    trace, policy, baseline, fleet = chat()
    request = JobRequest(1, 2.0, 30.0)
    need = -(-horizon_minutes(request) // DAY)
    now = (need + have - 1) * DAY + WARMUP_MINUTES + 5  # exactly `have` days with a whole replay before now
    e = estimate(trace, now, policy, baseline, fleet, request, days=have + extra)
    assert e.days == have
    note = partial_note(e.missing)
    if extra:
        assert note is not None and note.startswith(PARTIAL) and f"{have} of the {have + extra} days" in note
    else:
        assert note is None
