"""The console creates workflows only in the namespace the gate admits from (its configuration's workflowNamespace).

The console's research namespace follows kubectl's rule (flag, kubeconfig context, configuration): a context
namespace other than the gate's made the request form park jobs that no gate ever admits. What must hold,
as for `offhours submit`: a request or a resubmit from a console whose namespace is not the gate's creates
nothing and says so in one message, the same rule and words as the submit's; in the gate's namespace, or
with no configuration to check against, it goes ahead.
"""

from typing import Any

from offhours.scripts.cluster.parked import misplaced_namespace
from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from tests.support.console_forms import hidden
from tests.unit.test_console_request_live_run import FORM, submit
from tests.unit.test_console_request_review import GOOD
from tests.unit.test_console_resubmit import SERVICES, Grants, Store, finished_runs, resubmit

SAID = "--config gate.yaml"


class Elsewhere(Store):
    """The person's workflows in the kubeconfig context's namespace, not the gate's."""

    namespace = "team-a"


def client_of(store: Store, admits_from: tuple[str, str] | None) -> Any:
    app = create_app(PoolSource(store, interval=0), services=SERVICES, auth=Grants(), person_api=store,
                     admits_from=admits_from)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    return client


def test_the_rule_refuses_only_another_namespace_and_names_the_gates() -> None:
    assert misplaced_namespace("namespace research", "research", "research", SAID, "console") is None
    assert misplaced_namespace("namespace team-a", "team-a", None, "", "console") is None  # unknown: not checked
    why = misplaced_namespace("namespace team-a", "team-a", "research", SAID, "console")
    assert why == ("namespace team-a is not where the gate admits jobs from: --config gate.yaml has workflowNamespace "
                   "research; run offhours console with -n research. Nothing was created")


def test_a_request_from_a_console_outside_the_gates_namespace_creates_nothing() -> None:
    store = Elsewhere()
    client = client_of(store, ("research", SAID))
    form = client.get(FORM)
    assert "is not where the gate admits jobs from" in form.get_data(as_text=True)  # said before it is filled in
    answer = submit(client, GOOD, hidden(form.get_data(as_text=True)))
    page = answer.get_data(as_text=True)
    assert answer.status_code == 409, page
    assert page.count("is not where the gate admits jobs from") == 1
    assert misplaced_namespace("namespace team-a", "team-a", "research", SAID, "console") in page
    assert store.created == [] and store.workflows == {}


def test_a_resubmit_from_a_console_outside_the_gates_namespace_creates_nothing() -> None:
    workflows = finished_runs()["failed"]
    store = Elsewhere(*workflows)
    answer = resubmit(client_of(store, ("research", SAID)), workflows[-1]["metadata"]["name"])
    assert answer.status_code == 409
    assert "team-a is not where the gate admits jobs from" in answer.get_data(as_text=True)
    assert store.created == []


def test_in_the_gates_namespace_or_unchecked_a_request_is_created() -> None:
    for store, admits_from in ((Store(), ("research", SAID)), (Elsewhere(), None)):
        client = client_of(store, admits_from)
        assert "is not where the gate admits" not in client.get(FORM).get_data(as_text=True)
        assert submit(client, GOOD).status_code == 302
        assert len(store.created) == 1


def test_the_console_checks_against_the_configuration_it_read_and_names_it() -> None:
    import argparse

    from offhours.scripts.cli.console import admission_namespace
    from offhours.scripts.config.loader import parse_config

    config = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                           "metrics": {"source": "direct"}, "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}})
    assert admission_namespace(argparse.Namespace(config="gate.yaml"), config, "serving") == ("research", SAID)
    assert admission_namespace(argparse.Namespace(config=None), config, "serving") == (
        "research", "the installed configuration, ConfigMap serving/offhours-gate-config")
    assert admission_namespace(argparse.Namespace(config=None), None, "serving") is None
