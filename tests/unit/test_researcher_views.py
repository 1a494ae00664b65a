"""Faults the researcher's e2e journey found, each pinned offline.

- `offhours logs` printed a pod's log as a Python bytes repr (`b'started\\nready\\n'`): the
  Kubernetes client decodes a text/plain answer that way; the CLI now reads the raw answer.
- A cancel refused for lack of write rights said "ask for read access": the hint now says the
  account may read but not change it.
- `offhours why` said "running since" the workflow's creation for a job parked for a while (Argo
  stamps startedAt on a suspended workflow at once); a job starts with its first pod.
- A workflow from `argo submit --from` has no run-id label (its parked copy has one): the two were
  shown as two runs; the run id now comes from the `run-id` parameter when the label is absent.
"""

import argparse
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cli import jobs as r
from offhours.scripts.cli import logs
from offhours.scripts.cluster.errors import describe_api_error
from offhours.scripts.pool.model import build_pool, job_view, parse_time
from tests.support.access import may_all
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow


def test_a_refused_write_names_it_and_a_refused_read_asks_for_read_access() -> None:
    err = ApiException(status=403, reason="Forbidden")
    assert describe_api_error("stop workflow research/a", err, write=True) == (
        "stop workflow research/a: no rights (HTTP 403): your account may read but not change it; nothing was changed")
    assert describe_api_error("list workflows in research", err) == (
        "list workflows in research: no rights (HTTP 403): ask for read access, see `offhours render --console` "
        "for the Role")


def argo_submitted(run_id: str) -> dict[str, Any]:
    wf = workflow("offhours-job-x2k9q", "chat", 1, "preempted", phase="Failed", created=100)
    del wf["metadata"]["labels"]["offhours.io/run-id"]  # argo submit: only the template's labelsFrom
    wf["spec"]["arguments"] = {"parameters": [{"name": "service", "value": "chat"}, {"name": "run-id", "value": run_id}]}
    return wf


def test_an_argo_submitted_workflow_and_its_parked_copy_are_one_run() -> None:
    original = argo_submitted("sweep-7")
    copy = workflow("offhours-job-x2k9q-p1", "chat", 1, "parked", created=200, run_id="sweep-7", suspend=True,
                    annotations={"offhours.io/preemptions": "1", "offhours.io/parked-from": "offhours-job-x2k9q"},
                    labels={"offhours.io/copy-of": "uid-offhours-job-x2k9q"})
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [original, copy], SERVING, NOW)
    assert [(run.run_id, [c.name for c in run.copies]) for run in pool.runs] == [
        ("sweep-7", ["offhours-job-x2k9q", "offhours-job-x2k9q-p1"])]


@pytest.mark.parametrize("parameters", [None, "junk", [{"name": "run-id", "value": 7}], [{"name": "run-id", "value": ""}],
                                        ["junk"]])
def test_a_run_id_parameter_that_is_not_a_name_falls_back_to_the_workflow_name(parameters: Any) -> None:
    wf = argo_submitted("x")
    wf["spec"]["arguments"] = {"parameters": parameters}
    view = job_view(wf)
    assert view is not None and view.run_id == "offhours-job-x2k9q"


def test_a_parked_job_runs_from_its_first_pod_not_from_when_argo_first_saw_it() -> None:
    # Created (and stamped started by Argo) 60 minutes ago, parked, admitted 10 minutes ago.
    wf = workflow("train-z", "chat", 1, "admitted", phase="Running", created=60, started=60,
                  annotations={"offhours.io/admitted-at": ts(10)})
    view = job_view(wf)
    assert view is not None and view.started == view.admitted == parse_time(ts(10))  # no pod yet: from admission
    wf["status"]["nodes"] = {"train-z": {"type": "DAG", "startedAt": ts(60)},
                             "train-z-1": {"type": "Pod", "startedAt": ts(9)},
                             "train-z-2": {"type": "Pod", "startedAt": ts(5)},
                             "train-z-3": {"type": "Pod", "startedAt": "junk"}}
    view = job_view(wf)
    assert view is not None and view.started == parse_time(ts(9))
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [wf], SERVING, NOW)
    assert r.sentence(pool.runs[0], pool) == "running since 2025-03-14 11:51:00Z on 4 GPUs of chat (9m)"
    # An adopted job ran before its admission: its first pod says so.
    wf["status"]["nodes"]["train-z-1"]["startedAt"] = ts(30)
    view = job_view(wf)
    assert view is not None and view.started == parse_time(ts(30))


class _Answer:
    """A log answer as the client gives it unread (`_preload_content=False`): streamed in chunks of at most `amt`."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, amt: int) -> Any:
        return (self.data[i:i + amt] for i in range(0, len(self.data), amt))


class _Core:
    def __init__(self, logs: dict[str, bytes]) -> None:
        self.logs = logs

    def list_namespaced_pod(self, namespace: str, label_selector: str, **_: Any) -> Any:
        workflow_name = label_selector.split("=", 1)[1]
        owner = client.V1OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow", name=workflow_name,
                                        uid=f"uid-{workflow_name}")
        return SimpleNamespace(items=[client.V1Pod(metadata=client.V1ObjectMeta(
            name=n, creation_timestamp=ts(10 - i), owner_references=[owner]))
            for i, n in enumerate(sorted(self.logs)) if n.startswith(workflow_name)])

    def read_namespaced_config_map(self, name: str, namespace: str, **_: Any) -> Any:
        raise ApiException(status=404, reason="Not Found")  # no log archive configured

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str, _preload_content: bool = True,
                                **bounds: Any) -> Any:
        assert container == "main" and not _preload_content  # preloaded, the client would hand back str(bytes)
        return _Answer(self.logs[name])


def test_logs_prints_each_pods_text_under_its_header(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    wf = workflow("train-z", "chat", 1, "admitted", phase="Running")
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [wf], SERVING, NOW)
    reader = SimpleNamespace(research_namespace="research", core=_Core({
        "train-z-check-1": b"check-parameters: 18 parameter(s) ok\n", "train-z-job-2": b"started\nready \xe2\x9c\x93"}),
        api=client.ApiClient(), access=may_all())
    monkeypatch.setattr(logs, "_reader", lambda args: reader)
    monkeypatch.setattr(logs, "read_pool", lambda args, reader=None: pool)
    args = argparse.Namespace(name="train-z", step=None, follow=False)
    assert logs._cmd_logs(args) == 0
    assert capsys.readouterr().out == ("==> train-z / train-z-check-1 <==\ncheck-parameters: 18 parameter(s) ok\n"
                                       "==> train-z / train-z-job-2 <==\nstarted\nready ✓\n")
