"""A record written by the gate of the version before it kept names: `runs` as UID -> run id, a bare string.

That gate wrote `{"runs": {"<uid>": "<run id>"}}`; the one after it reads each entry as a (run, name)
pair, so the first tick after an upgrade dropped the whole record as tampered: the baseline, the decision
history (no lending for a whole stabilisation window), the admissions, the copies. A two-letter run id
was worse: unpacked as run "r" of a workflow named "1".
"""

import json

from offhours.scripts.names import STATE_ADMITTED
from offhours.scripts.policy.record import ServiceRecord

from .test_argo_verbs import LOW
from .test_gate_controller import World


def _older(text: str) -> str:
    raw = json.loads(text)
    raw["runs"] = {uid: entry[0] for uid, entry in raw["runs"].items()}
    return json.dumps(raw)


def test_an_older_gates_runs_are_read_not_taken_for_a_tampered_record() -> None:
    """The fault: every field of the record dropped for the older form of one."""
    good = ServiceRecord(baseline=8, admitted={"u": 2, "v": 1}, runs={"u": ("run-a", "a"), "v": ("r1", "b")})
    old = ServiceRecord.from_json(_older(good.to_json()))
    assert old.baseline == 8 and old.admitted == {"u": 2, "v": 1}
    assert old.runs == {"u": ("run-a", ""), "v": ("r1", "")}  # the run whole, the name unknown
    assert ServiceRecord.from_json(old.to_json()) == old  # and written back as it was read


def test_the_first_tick_after_the_upgrade_keeps_the_lending_and_the_runs_names_come_back() -> None:
    """The fault, through the gate: the upgraded gate's first tick started from no memory."""
    w = World()
    w.lend(1)
    before = w.record()
    w.cluster.states[("serving", "chat")] = _older(w.cluster.states[("serving", "chat")])
    w.tick(chat=LOW)
    after = w.record()
    assert after.baseline == before.baseline, w.log.getvalue()
    assert len(after.decision.recommendations) > 1  # the window's history kept, not this tick's alone
    assert w.state("job-0") == STATE_ADMITTED and w.replicas() == 6
    uid = w.wf("job-0")["metadata"]["uid"]
    assert after.runs == {uid: ("job-0", "job-0")}, after.runs
