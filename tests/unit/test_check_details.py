"""`offhours check`'s direct-metrics line names the label it looked for."""

from types import SimpleNamespace

from kubernetes import client

from offhours.scripts.cli.check import Checker
from offhours.scripts.config.loader import parse_config


def test_no_ready_pod_detail_names_the_service_label_not_a_placeholder() -> None:
    config = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                           "metrics": {"source": "direct", "maxAgeSeconds": 180},
                           "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}})
    checker = Checker(client.ApiClient(), config)
    checker.core = SimpleNamespace(list_namespaced_pod=lambda namespace, label_selector: SimpleNamespace(items=[]))
    (check,) = list(checker.metrics(config))
    assert check.detail == "no ready pod labelled offhours.io/service=chat"
