"""The job page's cancel against a gate tick that parks a copy of the run while the cancel stops it.

The page's pool is a cached read (up to the console's interval old), and a gate tick parks a copy of
a job it preempts before it stops the job: a cancel that stopped only the copies it had read left
the new copy parked, and the gate admitted it later. Invariant, in words: once the cancel redirects,
no workflow of the run is live, whatever was parked since the page's last read or during the cancel.
"""

import copy
from datetime import datetime
from typing import Any

import pytest

from offhours.scripts.console import request_pages
from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import Person
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool import views
from offhours.scripts.pool.model import FINISHED, Pool
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import pool_of
from tests.unit.test_console_resubmit import Grants, csrf_on, key_on


def _parked_copy(of: dict[str, Any]) -> dict[str, Any]:
    name = of["metadata"]["name"]
    return workflow(f"{name}-p1", "chat", 1, "parked", created=0, suspend=True, run_id="run-1",
                    labels={"offhours.io/copy-of": of["metadata"]["uid"]},
                    annotations={"offhours.io/parked-from": name, "offhours.io/preemptions": "1"})


class Namespace:
    """The research namespace as the console and the person read and write it; a gate tick parks `park_on_stop`'s copy
    the moment the cancel stops it (the tick read the job just before)."""

    namespace = "research"

    def __init__(self, *workflows: dict[str, Any], park_on_stop: str | None = None) -> None:
        self.workflows = {w["metadata"]["name"]: w for w in workflows}
        self.park_on_stop = park_on_stop

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        return pool_of(*copy.deepcopy(list(self.workflows.values())))

    def workflow(self, person: Person, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.workflows[name])

    def stop(self, person: Person, name: str, body: dict[str, Any]) -> None:
        wf = self.workflows[name]
        if name == self.park_on_stop:
            self.park_on_stop = None
            parked = _parked_copy(wf)
            self.workflows[parked["metadata"]["name"]] = parked
            wf["metadata"]["labels"]["offhours.io/state"] = "preempted"
        wf["metadata"]["annotations"].update(body["metadata"]["annotations"])
        for key, value in body["spec"].items():
            if value is None:
                wf["spec"].pop(key, None)
            else:
                wf["spec"][key] = value


def _running(name: str) -> dict[str, Any]:
    return workflow(name, "chat", 1, "admitted", "Running", created=60, started=50, run_id="run-1",
                    annotations={"offhours.io/admitted-at": ts(50)})


def _cancel(ns: Namespace, cached_for: float, between: Any = None) -> Any:
    app = create_app(PoolSource(ns, interval=cached_for), services=["chat"], auth=Grants(), person_api=ns)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    key = key_on(client, "train-1")
    if between is not None:
        between()
    return client.post("/jobs/train-1/cancel", data={"form-key": key, "csrf_token": csrf_on(client, "train-1")})


def _live(ns: Namespace) -> list[str]:
    run = next(r for r in ns.read().runs if r.run_id == "run-1")
    return [c.name for c in run.copies if c.state not in FINISHED]


@pytest.fixture(autouse=True)
def _no_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "CANCEL_SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(request_pages, "CANCEL_SETTLE_SECONDS", 0.0)


def test_a_copy_parked_during_the_cancel_is_stopped_too() -> None:
    ns = Namespace(_running("train-1"), park_on_stop="train-1")
    answer = _cancel(ns, cached_for=3600)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    assert _live(ns) == []
    assert ns.workflows["train-1-p1"]["spec"].get("shutdown") == "Stop"


def test_a_copy_parked_since_the_pages_last_read_is_stopped_too() -> None:
    ns = Namespace(_running("train-1"))

    def tick() -> None:  # after the page was read (and cached): the gate parks a copy and stops the original
        original = ns.workflows["train-1"]
        ns.workflows["train-1-p1"] = _parked_copy(original)
        original["metadata"]["labels"]["offhours.io/state"] = "preempted"
        original["spec"]["shutdown"] = "Stop"

    answer = _cancel(ns, cached_for=3600, between=tick)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    assert _live(ns) == []


def test_the_read_after_the_stops_finds_the_run_by_its_id_not_a_workflow_so_named() -> None:
    other = workflow("run-1", "chat", 1, "admitted", "Running", created=60, started=50, run_id="run-9",
                     annotations={"offhours.io/admitted-at": ts(50)})
    ns = Namespace(_running("train-1"), other, park_on_stop="train-1")
    answer = _cancel(ns, cached_for=3600)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    assert _live(ns) == []
    assert "shutdown" not in ns.workflows["run-1"]["spec"]  # another run's workflow is left as it was
