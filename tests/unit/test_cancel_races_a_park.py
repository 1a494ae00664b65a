"""`offhours cancel` against a gate tick that parks a copy of the run while the cancel stops it.

A gate tick parks a copy of a job it preempts before it stops the job. A cancel that read the run
before that copy existed stopped only the original: the copy waited, parked, and the gate admitted
it later, so a cancelled run ran again. Invariant, in words: once `cancel` returns 0, no workflow of
the run is left live (every one is stopped or finished), whatever the gate parked meanwhile; and
workflows of other runs are untouched.
"""

import argparse
import copy
from types import SimpleNamespace
from typing import Any

import pytest

from offhours.scripts.cli import jobs as r
from offhours.scripts.names import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_PARKED_FROM,
    LABEL_COPY_OF,
    LABEL_STATE,
    STATE_PARKED,
    STATE_PREEMPTED,
)
from offhours.scripts.pool.model import FINISHED, build_pool
from tests.support.access import may_all
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow


class Argo:
    """The research namespace's workflows, and a gate tick that parks a copy of `parks` when the cancel stops it."""

    def __init__(self, workflows: list[dict[str, Any]], parks: str | None) -> None:
        self.workflows = {w["metadata"]["name"]: w for w in workflows}
        self.parks = parks

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: dict[str, Any]) -> dict[str, Any]:
        wf = self.workflows[name]
        if name == self.parks:
            self.parks = None
            # The tick read the job before this stop landed: its copy, then its own stop of the original.
            parked = workflow(f"{name}-p1", "chat", 1, STATE_PARKED, created=0, run_id="z", suspend=True,
                              labels={LABEL_COPY_OF: wf["metadata"]["uid"]},
                              annotations={ANNOTATION_PARKED_FROM: name})
            self.workflows[parked["metadata"]["name"]] = parked
            wf["metadata"]["labels"][LABEL_STATE] = STATE_PREEMPTED
        for key, value in (body.get("metadata") or {}).get("annotations", {}).items():
            wf["metadata"]["annotations"][key] = value
        for key, value in (body.get("spec") or {}).items():
            if value is None:
                wf["spec"].pop(key, None)
            else:
                wf["spec"][key] = value
        return copy.deepcopy(wf)

    def pool(self) -> Any:
        return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)],
                          copy.deepcopy(list(self.workflows.values())), SERVING, NOW)


def _cancel(monkeypatch: pytest.MonkeyPatch, argo: Argo) -> int:
    monkeypatch.setattr(r, "_reader", lambda args: SimpleNamespace(custom=argo, access=may_all()))
    monkeypatch.setattr(r, "read_pool", lambda args, warn=True, reader=None: argo.pool())
    monkeypatch.setattr(r, "CANCEL_SETTLE_SECONDS", 0.0)
    args = argparse.Namespace(name="z", yes=True, command="cancel", namespace="research", serving_namespace=None,
                              config=None)
    return r._guarded(r._cmd_cancel)(args)


def _running(name: str, run_id: str) -> dict[str, Any]:
    return workflow(name, "chat", 1, "admitted", phase="Running", created=30, run_id=run_id,
                    annotations={ANNOTATION_ADMITTED_AT: ts(25)})


def test_a_copy_parked_while_the_cancel_stops_its_original_is_stopped_too(monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    argo = Argo([_running("train-z", "z"), _running("other", "y")], parks="train-z")
    assert _cancel(monkeypatch, argo) == 0
    run = argo.pool().find("z")
    assert run is not None and len(run.copies) == 2
    assert all(c.state in FINISHED for c in run.copies), [(c.name, c.state) for c in run.copies]
    assert argo.workflows["train-z-p1"]["spec"].get("shutdown") == "Stop"
    assert "shutdown" not in argo.workflows["other"]["spec"]  # another run is left as it was
    out = capsys.readouterr().out
    assert "train-z: stopping" in out and "train-z-p1: stopping" in out


def test_a_cancel_with_no_tick_in_between_stops_each_copy_once(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    argo = Argo([_running("train-z", "z")], parks=None)
    assert _cancel(monkeypatch, argo) == 0
    assert capsys.readouterr().out.count("stopping") == 1
    assert argo.workflows["train-z"]["spec"]["shutdown"] == "Stop"


def test_the_read_after_the_stops_finds_the_run_by_its_id_not_a_workflow_so_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Another run's workflow is named as this run's id: reading the run again by that name found the other run,
    # and the cancel stopped its workflow.
    argo = Argo([_running("train-z", "z"), _running("z", "y")], parks="train-z")
    monkeypatch.setattr(r, "_reader", lambda args: SimpleNamespace(custom=argo, access=may_all()))
    monkeypatch.setattr(r, "read_pool", lambda args, warn=True, reader=None: argo.pool())
    monkeypatch.setattr(r, "CANCEL_SETTLE_SECONDS", 0.0)
    args = argparse.Namespace(name="train-z", yes=True, command="cancel", namespace="research",
                              serving_namespace=None, config=None)
    assert r._guarded(r._cmd_cancel)(args) == 0
    assert "shutdown" not in argo.workflows["z"]["spec"]  # the other run's workflow is left as it was
    assert argo.workflows["train-z-p1"]["spec"].get("shutdown") == "Stop"
