"""The template checks of one tick: each template measured once, and a check that breaks is its job's alone.

The gate reads the research namespace's WorkflowTemplates once a tick and checks every job that may be
admitted against them (`Gate._with_template_checks`). Hundreds of parked jobs commonly run one template
(the library's `offhours-job`): measuring its size once per job made such a tick's checks grow with jobs x
template size. And the checks read tenant-written objects: whatever one of them raises must not fail the
tick of every other job of the service.
"""

from typing import Any

import pytest

from offhours.scripts.cluster import template_grace
from offhours.scripts.names import ANNOTATION_WAITING_REASON

from .test_gate_controller import World, config


def test_a_tick_measures_each_template_once_however_many_jobs_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[int] = []
    real = template_grace._too_large

    def counting(node: Any) -> bool:
        measured.append(id(node))
        return real(node)

    monkeypatch.setattr(template_grace, "_too_large", counting)
    w = World(config())
    for i in range(60):
        w.park(f"job{i}", replicas=1)
    w.tick(chat=1)
    per_tick = len(measured)
    assert 0 < per_tick <= 2, per_tick  # offhours-job and what it calls, not once per job
    w.tick(chat=1)
    assert len(measured) <= 2 * per_tick  # the next tick reads the templates again: measured again, once


def test_an_oversized_template_refuses_every_job_that_runs_it_not_only_the_first() -> None:
    w = World(config())
    spec = w.cluster.templates[("research", "offhours-job")]["spec"]
    spec["templates"][0]["metadata"] = {"annotations": {f"k{i}": "v" for i in range(template_grace.MAX_TEMPLATE_NODES)}}
    for name in ("first", "second", "third"):
        w.park(name, replicas=1)
    for _ in range(7):
        w.tick(chat=1)
    assert w.replicas() == 8, w.log.getvalue()
    for name in ("first", "second", "third"):
        reason = w.wf(name)["metadata"]["annotations"].get(ANNOTATION_WAITING_REASON, "")
        assert w.state(name) == "parked" and "offhours-job is too large to read" in reason, (name, reason)


def test_a_template_check_that_raises_refuses_its_job_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault: the check of one job's templates raises (here a TypeError out of the grace walk, for the
    workflows that run the tenant's `odd` template). That job waits with the error as its reason; the other
    job of the service is admitted in the same tick, and the tick is clean."""
    from offhours.scripts.gate import advisory

    real = advisory.template_grace_problem

    def breaks_on_odd(spec: Any, *args: Any) -> str | None:
        if (spec.get("workflowTemplateRef") or {}).get("name") == "odd":
            raise TypeError("'<' not supported between instances of 'dict' and 'int'")
        return real(spec, *args)

    monkeypatch.setattr(advisory, "template_grace_problem", breaks_on_odd)
    w = World(config())
    w.cluster.templates[("research", "odd")] = {**w.cluster.templates[("research", "offhours-job")],
                                                "metadata": {"name": "odd", "namespace": "research"}}
    w.park("odd-job", replicas=1)
    w.wf("odd-job")["spec"]["workflowTemplateRef"] = {"name": "odd"}
    w.park("plain-job", replicas=1)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("plain-job") == "admitted" and w.state("odd-job") == "parked", w.log.getvalue()
    reason = w.wf("odd-job")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert "its templates could not be checked: TypeError: '<' not supported" in reason, reason
    assert "error" not in w.log.getvalue().splitlines()[-1], w.log.getvalue()
