"""The request form's submit refuses a run id that is still running or parked: no second live workflow of a run.

A fake research namespace (the workflows the console's pool reads are those the person's creates add),
the Flask test client, no cluster. What must hold: while a run id has an unfinished copy (as the
console reads unfinished copies everywhere: `unfinished`), a submit of it creates nothing and says
which run id and which live workflow; a finished run id may be submitted again (it resumes from its
checkpoints); a submit whose run id cannot be checked creates nothing.
"""

import threading
import time
from datetime import datetime
from typing import Any

import pytest

from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import Person
from offhours.scripts.console.auth import Access
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.model import Pool
from offhours.scripts.pool.reader import PoolReadError
from offhours.scripts.pool.views import unfinished
from tests.support.access import may_all
from tests.support.console_forms import hidden
from tests.support.pool_fixture import workflow
from tests.support.tenant_pool import pool_of
from tests.unit.test_console_request_review import GOOD
from tests.unit.test_console_resubmit import Store

FORM = "/request/offhours-job"


def fields(values: dict[str, str]) -> dict[str, str]:
    return {f"param:{k}": v for k, v in values.items()}


class Viewer:
    """Each token its own user; `jobs`: whether it may list workflows in the research namespace."""

    def __init__(self, jobs: bool = True) -> None:
        self.jobs = jobs

    def access(self, token: str) -> Access | None:
        return Access(user=f"user:{token}", services=True, jobs=self.jobs, metrics=True, reviewer=may_all(f"user:{token}"))


def client_of(store: Any, jobs: bool = True) -> Any:
    app = create_app(PoolSource(store, interval=3600), services=["chat"], auth=Viewer(jobs), person_api=store)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    return client


def submit(client: Any, values: dict[str, str], key: dict[str, str] | None = None) -> Any:
    key = key if key is not None else hidden(client.get(FORM).get_data(as_text=True))
    return client.post(FORM, data={**fields(values), **key, "action": "submit"})


def test_a_double_click_creates_one_workflow_and_the_second_names_the_first() -> None:
    """Fault: the form's submit never looked for a live copy of the run id: a double click made two parked copies."""
    store = Store()
    client = client_of(store)
    key = hidden(client.get(FORM).get_data(as_text=True))  # both clicks post the same page
    first = submit(client, GOOD, key)
    assert first.status_code == 302
    (made,) = store.workflows
    second = submit(client, GOOD, key)
    assert second.status_code == 409
    page = second.get_data(as_text=True)
    assert f"run id {GOOD['run-id']} is still running or parked (its live workflow {made})" in page
    assert "Nothing was created" in page
    assert 'value="s3://b/out"' in page  # the form is kept as it was posted
    assert len(store.created) == 1


@pytest.mark.parametrize("state,phase,started", [("parked", "", None), ("admitted", "Running", 50),
                                                  ("preempted", "Failed", 50)])
def test_a_run_id_with_an_unfinished_copy_is_refused(state: str, phase: str, started: int | None) -> None:
    """A parked, a running, and a preempted run whose parked copy waits: each has a live copy; nothing is created."""
    kept = [workflow("r-1", "chat", 2, state, phase, created=90, started=started, run_id=GOOD["run-id"],
                     suspend=state == "parked", finished=40 if phase == "Failed" else None)]
    if state == "preempted":
        kept.append(workflow("r-1-p1", "chat", 2, "parked", "", created=39, run_id=GOOD["run-id"], suspend=True,
                             annotations={"offhours.io/parked-from": "r-1"}))
    store = Store(*kept)
    live = [c.name for c in unfinished(pool_of(*kept).runs[0])]
    assert live, "the fixture's run must read as unfinished"
    answer = submit(client_of(store), GOOD)
    assert answer.status_code == 409, answer.get_data(as_text=True)
    assert f"run id {GOOD['run-id']} is still running or parked" in answer.get_data(as_text=True)
    assert all(name in answer.get_data(as_text=True) for name in live)
    assert store.created == []


def test_a_finished_run_id_may_be_submitted_again() -> None:
    """A run whose every copy ended (here it succeeded) is no live copy: the same run id may run again."""
    done = workflow("r-1", "chat", 2, "admitted", "Succeeded", created=90, started=80, finished=10,
                    run_id=GOOD["run-id"])
    store = Store(done)
    assert submit(client_of(store), GOOD).status_code == 302
    assert len(store.created) == 1


def test_another_run_id_is_not_refused_for_a_live_one() -> None:
    """Only the run id's own copies count: a live run-2 does not stop a request of run-1."""
    store = Store(workflow("r-2", "chat", 2, "parked", "", created=90, run_id="run-2", suspend=True))
    assert submit(client_of(store), GOOD).status_code == 302


def test_the_check_reads_the_cluster_afresh_not_the_pages_cache() -> None:
    """Fault: a pool cached before another tab's submit would miss that tab's live workflow."""
    store = Store()
    client = client_of(store)  # the pool is cached for an hour
    key = hidden(client.get(FORM).get_data(as_text=True))
    store.workflows["made-elsewhere"] = workflow("made-elsewhere", "chat", 1, "parked", "", created=5,
                                                 run_id=GOOD["run-id"], suspend=True)
    answer = submit(client, GOOD, key)
    assert answer.status_code == 409
    assert "made-elsewhere" in answer.get_data(as_text=True)
    assert store.created == []


class SlowStore(Store):
    """A namespace whose create takes a while: two clicks' requests overlap."""

    def create(self, person: Person, body: dict[str, Any]) -> str:
        time.sleep(0.3)
        return super().create(person, body)


def test_two_clicks_at_once_create_one_workflow() -> None:
    """Fault: two POSTs in flight together both read the pool before either created, and both created."""
    store = SlowStore()
    client = client_of(store)
    key = hidden(client.get(FORM).get_data(as_text=True))
    answers: list[int] = []

    def click() -> None:
        answers.append(submit(client, GOOD, key).status_code)

    threads = [threading.Thread(target=click) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [302, 409, 409]
    assert len(store.created) == 1


class Unlisted(Store):
    """A namespace whose workflows cannot be listed now (the API server down or no rights to list)."""

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        if require_workflows:
            raise PoolReadError("list workflows in research: unreachable (connection refused)")
        return super().read(now)


def test_a_run_id_that_cannot_be_checked_is_not_created() -> None:
    """Fault: the workflows cannot be listed: an unchecked run id could be a second live copy, so nothing is made."""
    store = Unlisted()
    answer = submit(client_of(store), GOOD)
    assert answer.status_code == 409
    page = answer.get_data(as_text=True)
    assert f"{GOOD['run-id']}: cannot check it for a live workflow (list workflows in research: unreachable" in page
    assert store.created == []


def test_a_person_who_may_not_list_jobs_is_refused_without_being_shown_them() -> None:
    """The refusal holds for an identity that may not list workflows, and names none of the live workflows."""
    store = Store(workflow("someone-elses-1", "chat", 2, "parked", "", created=90, run_id=GOOD["run-id"],
                           suspend=True))
    answer = submit(client_of(store, jobs=False), GOOD)
    assert answer.status_code == 409
    page = answer.get_data(as_text=True)
    assert "a live workflow this identity may not list" in page
    assert "someone-elses-1" not in page
    assert store.created == []
