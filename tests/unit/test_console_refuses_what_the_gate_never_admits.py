"""The console's submit and resubmit run the gate's own admission checks before a job is parked (issue 32).

Class: a second opinion on admission (a form that accepts what the gate will never admit, so the job waits parked
for ever). Mechanism: the console calls `cluster.never_admitted.never_admitted`, the code `offhours submit` runs,
against the gate configuration it was started with (the installed one, or --config's), and refuses with the gate's
words and its fix; nothing is created. A Flask test client over a fake research namespace; no cluster.
"""

from typing import Any

from offhours.scripts.config.loader import parse_config
from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import Person
from offhours.scripts.console.source import PoolSource
from tests.support.console_forms import hidden
from tests.unit.test_console_request_live_run import Viewer, fields
from tests.unit.test_console_resubmit import Store
from tests.unit.test_submit_admission import own_template

CAP = 120
CONFIG = parse_config({"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}, "gpusPerReplica": 4,
                                             "maxGraceSeconds": CAP}}})
FORM = "/request/mine"


class OwnTemplates(Store):
    """The research namespace with a WorkflowTemplate of the person's own, its pods' grace written in it."""

    def __init__(self, grace: int) -> None:
        super().__init__()
        self.own = own_template(grace)
        for p in self.own["spec"]["arguments"]["parameters"]:
            if p["name"] == "service":
                p["value"] = "chat"

    def templates(self, person: Person) -> list[dict[str, Any]]:
        return [self.own]

    def template(self, person: Person, name: str) -> dict[str, Any]:
        return self.own


def client_of(store: Any) -> Any:
    app = create_app(PoolSource(store, interval=3600), services=["chat"], auth=Viewer(), person_api=store,
                     gate_config=CONFIG)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    return client


def submit(client: Any, values: dict[str, str]) -> Any:
    key = hidden(client.get(FORM).get_data(as_text=True))
    return client.post(FORM, data={**fields(values), **key, "action": "submit"})


VALUES = {"run-id": "own-1", "service": "chat", "replicas": "1"}


def test_a_template_whose_grace_is_above_the_services_cap_is_refused_in_the_gates_words() -> None:
    store = OwnTemplates(CAP * 10)
    answer = submit(client_of(store), VALUES)
    page = answer.get_data(as_text=True)
    assert answer.status_code == 409, page
    assert "the gate would never admit it" in page and f"maxGraceSeconds {CAP}" in page, page
    assert "set terminationGracePeriodSeconds to at most" in page  # the gate's fix, in its words
    assert "Nothing was created" in page
    assert store.created == []


def test_a_template_within_the_cap_is_parked() -> None:
    store = OwnTemplates(CAP // 2)
    answer = submit(client_of(store), VALUES)
    assert answer.status_code == 302, answer.get_data(as_text=True)
    assert len(store.created) == 1
