"""What a person sees of a job matches the cluster at that moment, from the one decoding (pool/model.py).

Classes, each with the mechanism that closes it:
- a timeline moment taken from what was asked, not what happened: "GPUs returned" comes from Argo's work pod nodes
  observed ended (`gpus_returned_at`), never from the stop request or the exit hook's mark alone;
- two definitions of one word: "preempted" is `JobView.is_preemption`, read by the metric, usage, report and pages;
- a state from the last request instead of the cluster's final state: a run Argo says Succeeded is succeeded, whatever
  cancel was asked of it; a copy asked to stop is live (`unfinished`) until Argo finishes it, so the console offers
  no resubmit beside pods that still run;
- a sentence that claims what a copy never held: a cancel says GPUs go back only from a copy that held them.
"""

import re
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.pool.model import SUCCEEDED, build_pool, parse_time
from offhours.scripts.pool.operator_metrics import MetricsState
from offhours.scripts.pool.usage import usage_by_month
from offhours.scripts.pool.views import cancellable, stop_line, unfinished
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow
from tests.unit.test_console_resubmit import PARAMS, Store, client_of, key_on, resubmit, with_arguments


def with_nodes(wf: dict[str, Any], *pods: tuple[str, str, float | None]) -> dict[str, Any]:
    """Give `wf` Argo Pod nodes: (template, phase, finished minutes ago or None)."""
    nodes: dict[str, Any] = {}
    for i, (template, phase, finished) in enumerate(pods):
        node: dict[str, Any] = {"type": "Pod", "phase": phase, "templateName": template, "startedAt": ts(100)}
        if finished is not None:
            node["finishedAt"] = ts(finished)
        nodes[f"{wf['metadata']['name']}-{i}"] = node
    wf["status"]["nodes"] = nodes
    return wf


def pool_of(*workflows: dict[str, Any]) -> Any:
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 8, 8)], workflows, SERVING, NOW)


def preempted(name: str, training: tuple[str, float | None], mark: float, finished: float | None) -> dict[str, Any]:
    wf = workflow(name, "chat", 2, "preempted", "Failed" if finished is not None else "Running", created=120,
                  started=100, finished=finished, shutdown="Stop",
                  annotations={"offhours.io/admitted-at": ts(110), "offhours.io/preempted-at": ts(mark),
                               "offhours.io/returned-at": ts(mark)})
    return with_nodes(wf, ("check-parameters", "Succeeded", 99), ("train", *training), ("return-gpus", "Succeeded", mark))


def returned_entries(pool: Any) -> list[Any]:
    return [e for r in pool.runs for e in r.timeline() if e.what == "GPUs returned"]


def test_gpus_are_not_returned_while_the_training_pod_still_runs() -> None:
    """The sandbox's case: the mark says returned, the training pod trains and saves 41 s more."""
    pool = pool_of(preempted("tl-1", ("Running", None), mark=1, finished=None))
    assert returned_entries(pool) == []
    assert [c.name for c in unfinished(pool.runs[0])] == ["tl-1"]  # its pod runs: it is not over


def test_gpus_returned_is_when_the_training_pod_ended() -> None:
    pool = pool_of(preempted("tl-2", ("Failed", 10 - 41 / 60), mark=10, finished=9))
    (entry,) = returned_entries(pool)
    assert entry.at == parse_time(ts(10 - 41 / 60))


@settings(max_examples=150, deadline=None)
@given(mark=st.floats(1, 60), pod=st.one_of(st.none(), st.floats(0.5, 60)), wf_done=st.booleans())
def test_returned_is_never_before_a_work_pod_ended_and_never_while_one_runs(mark: float, pod: float | None,
                                                                            wf_done: bool) -> None:
    """Invariant: a "GPUs returned" entry exists only when every work pod has ended, at or after each one's end."""
    training = ("Running", None) if pod is None else ("Failed", pod)
    finished = (min(mark, pod) - 0.1 if pod is not None else None) if wf_done else None
    pool = pool_of(preempted("tl-p", training, mark, finished))
    entries = returned_entries(pool)
    if pod is None:
        assert entries == []
    else:
        assert len(entries) == 1
        assert entries[0].at >= parse_time(ts(pod)) and entries[0].at >= parse_time(ts(mark))


STOPS = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None)
@given(stops=STOPS)
def test_preemptions_are_one_number_in_the_metric_usage_and_the_run(stops: list[tuple[bool, bool]]) -> None:
    """Each stop of a run is by the gate's reclaim, admitted (a preemption) or not (none): all readers agree."""
    workflows = []
    for i, (admitted, _) in enumerate(stops):
        annotations = {"offhours.io/preempted-at": ts(50 - i), "offhours.io/preemptions": str(i)}
        if admitted:
            annotations["offhours.io/admitted-at"] = ts(55 - i)
        workflows.append(workflow(f"pr-{i}", "chat", 1, "preempted", "Failed", created=60 - i, finished=49 - i,
                                  run_id="pr", shutdown="Stop", suspend=not admitted, annotations=annotations))
    pool = pool_of(*workflows)
    expected = sum(admitted for admitted, _ in stops)
    metrics = MetricsState()
    metrics.update(pool)
    assert sum(metrics.preemptions.values()) == expected
    assert sum(r.preemptions for r in pool.runs) == expected
    assert sum(row.preemptions for row in usage_by_month(pool)) == expected


def test_a_cancel_that_raced_completion_shows_the_cluster_final_state() -> None:
    wf = workflow("race-1", "chat", 1, "admitted", "Succeeded", created=60, started=50, finished=5, shutdown="Stop",
                  annotations={"offhours.io/admitted-at": ts(55), "offhours.io/cancelled-at": ts(6)})
    run = pool_of(wf).runs[0]
    assert run.state == SUCCEEDED
    assert cancellable(run) == [] and unfinished(run) == []


def test_cancelling_a_waiting_copy_never_says_its_gpus_go_back() -> None:
    waiting = workflow("wait-1", "chat", 1, "parked", created=10, suspend=True)
    running = workflow("run-1", "chat", 1, "admitted", "Running", created=10, started=5,
                       annotations={"offhours.io/admitted-at": ts(6)})
    pool = pool_of(waiting, running)
    lines = {c.name: stop_line(c) for c in pool.jobs}
    assert "GPUs go back" not in lines["wait-1"] and "held no lent GPUs" in lines["wait-1"]
    assert "its GPUs go back to chat" in lines["run-1"]


def test_the_console_offers_no_resubmit_while_a_cancelled_copy_still_runs() -> None:
    """Asked to stop is not stopped: resubmit waits until Argo finishes the copy (its pods may still write)."""
    stopping = with_arguments(workflow("st-1", "chat", 2, "admitted", "Running", created=90, started=80,
                                       run_id="run-st", shutdown="Stop",
                                       annotations={"offhours.io/admitted-at": ts(85),
                                                    "offhours.io/cancelled-at": ts(1)}), PARAMS)
    store = Store(stopping)
    client = client_of(store)
    page = client.get("/jobs/st-1").get_data(as_text=True)
    assert 'id="resubmit-button"' not in page and 'id="cancel-button"' not in page and 'id="stopping"' in page
    store.workflows["st-1"]["status"]["phase"] = "Failed"  # the cluster now says it is over
    store.workflows["st-1"]["status"]["finishedAt"] = (NOW - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    key = key_on(client, "st-1")
    assert resubmit(client, "st-1", key).status_code == 302
    assert len(store.created) == 1


def test_a_resubmit_posted_from_a_page_read_before_the_stop_is_refused_while_pods_run() -> None:
    stopping = with_arguments(workflow("st-2", "chat", 2, "admitted", "Running", created=90, started=80,
                                       run_id="run-st2", shutdown="Stop",
                                       annotations={"offhours.io/admitted-at": ts(85),
                                                    "offhours.io/cancelled-at": ts(1)}), PARAMS)
    store = Store(stopping)
    client = client_of(store)
    page = client.get("/jobs/st-2").get_data(as_text=True)
    key = re.search(r'name="form-key" value="([^"]+)"', page)
    assert key is not None
    answer = resubmit(client, "st-2", key.group(1))
    assert answer.status_code == 409 and "st-2" in answer.get_data(as_text=True)
    assert store.created == []
