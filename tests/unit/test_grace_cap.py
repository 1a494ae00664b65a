"""The service's `maxGraceSeconds` bounds the pods of what the gate admits, not only its plan.

A research step's pod takes its terminationGracePeriodSeconds from the workflow parameter
`termination-grace-seconds`, which the tenant writes. Argo's stop sends SIGTERM and kills after
that grace; the scheduler's preemption waits for it too. So the gate writes the cap into the
parameter in the same write that resumes the workflow (Argo re-reads the arguments when suspend
changes), and every pod created after the admission stops within the cap.
"""

import copy

from hypothesis import example, given
from hypothesis import strategies as st

from offhours.scripts.cluster.workflow import GRACE_PARAMETER, grace_capped_parameters

from .test_gate_controller import World, config


def _grace_values(wf: dict) -> list:  # type: ignore[type-arg]
    return [p.get("value") for p in wf["spec"]["arguments"]["parameters"]
            if isinstance(p, dict) and p.get("name") == GRACE_PARAMETER]


def _declare(w: World, name: str, value: object) -> None:
    w.wf(name)["spec"]["arguments"]["parameters"].append({"name": GRACE_PARAMETER, "value": value})


def test_a_job_declaring_an_hour_of_grace_is_admitted_with_the_services_cap() -> None:
    """Fault: a tenant declares 3,600 s to checkpoint; the service allows 30. Survives: the admitted pod's 30."""
    w = World(config(maxGraceSeconds=30))
    w.park("greedy", replicas=2)
    _declare(w, "greedy", "3600")
    w.park("modest", svc="code", replicas=2)
    _declare(w, "modest", "20")
    for _ in range(7):
        w.tick(chat=1, code=1)
    assert w.state("greedy") == "admitted" and w.state("modest") == "admitted", w.log.getvalue()
    assert _grace_values(w.wf("greedy")) == ["30"]
    assert _grace_values(w.wf("modest")) == ["20"]  # within the cap: the tenant's own value stands
    others = [p["name"] for p in w.wf("greedy")["spec"]["arguments"]["parameters"]]
    assert others == ["service", "replicas", GRACE_PARAMETER]  # nothing else rewritten


def test_a_job_declaring_no_grace_gets_the_cap_not_the_templates_default() -> None:
    """The template's default (120 s) would apply to a workflow that passes none: above a 45 s cap."""
    w = World(config(maxGraceSeconds=45))
    w.park("silent", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("silent") == "admitted" and _grace_values(w.wf("silent")) == ["45"]


def test_a_parked_job_is_not_touched_before_it_is_admitted() -> None:
    """Only the admission writes the cap: a job left waiting keeps what its tenant wrote."""
    w = World(config(maxGraceSeconds=30))
    w.park("waiting", replicas=2)
    _declare(w, "waiting", "3600")
    w.tick(chat=10)  # full load: nothing to lend
    assert w.state("waiting") == "parked" and _grace_values(w.wf("waiting")) == ["3600"]


_VALUE = st.one_of(st.integers(-10, 10_000).map(str), st.integers(0, 10_000), st.booleans(), st.none(),
                   st.text(max_size=6), st.sampled_from(["²", "1e3", " 30", "30s", "0x10"]))
_GRACE = st.fixed_dictionaries({"name": st.just(GRACE_PARAMETER)},
                               optional={"value": _VALUE, "valueFrom": st.just({"configMapKeyRef": {"name": "x"}}),
                                         "enum": st.just(["3600"])})
_OTHER = st.fixed_dictionaries({"name": st.sampled_from(["service", "replicas", "env"]), "value": st.text(max_size=4)})
_PARAMS = st.one_of(st.lists(st.one_of(_GRACE, _OTHER, st.just("junk")), max_size=6), st.none(), st.just({"x": 1}))


@given(_PARAMS, st.integers(0, 600))
@example([{"name": GRACE_PARAMETER, "value": 30}], 600)  # a YAML number, not Argo's string: rewritten as one
@example([{"name": GRACE_PARAMETER, "value": "30", "enum": ["3600"]}], 600)  # an enum that would refuse the cap
def test_the_cap_holds_for_anything_a_tenant_writes_and_keeps_the_rest(params: object, cap: int) -> None:
    """Invariants: after capping, every grace parameter is a whole number of seconds at most the cap, there is
    one at least, the other parameters are kept in order, the input is not mutated, and a second pass changes
    nothing (None: the admission writes no arguments for a workflow already within the cap)."""
    wf = {"spec": {"arguments": {"parameters": params}}} if params is not None else {"spec": {}}
    before = copy.deepcopy(wf)
    capped = grace_capped_parameters(wf, cap)
    assert wf == before
    result = capped if capped is not None else params
    assert isinstance(result, list)
    graces = [p for p in result if isinstance(p, dict) and p.get("name") == GRACE_PARAMETER]
    assert graces and all(set(p) <= {"name", "value", "description"} and isinstance(p["value"], str)
                          and p["value"].isascii() and p["value"].isdigit() and int(p["value"]) <= cap
                          for p in graces)
    kept = [p for p in result if not (isinstance(p, dict) and p.get("name") == GRACE_PARAMETER)]
    assert kept == [p for p in (params if isinstance(params, list) else [])
                    if not (isinstance(p, dict) and p.get("name") == GRACE_PARAMETER)]
    assert grace_capped_parameters({"spec": {"arguments": {"parameters": result}}}, cap) is None
