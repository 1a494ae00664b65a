"""The deployed gate serves its return-path histograms where Prometheus' pod discovery finds them.

The defect class: a metrics endpoint that exists in the code but not in the rendered manifest (the
CronWorkflow ran the gate without `--metrics-port`, so production exported nothing). The mechanism:
one constant, `METRICS_PORT`, feeds the tick's argument, its named container port and the pod's
`prometheus.io/port` annotation. What must hold, for every schedule rendered: the port the process
is told to serve on is the port the pod declares and the port the scrape annotation names, and the
tick hands it on to the loop.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import offhours.scripts.gate.loop as loop
from offhours.cronworkflows.gate import METRICS_PORT, gate_cron_workflow, gate_tick


def _tick_and_step(schedule: str) -> tuple[dict, dict]:
    templates = gate_cron_workflow(schedules=[schedule]).to_dict()["spec"]["workflowSpec"]["templates"]
    tick = next(t for t in templates if t["name"] == "tick")
    step = next(t for t in templates if t["name"] == "gate")["steps"][0][0]
    return tick, {p["name"]: p["value"] for p in step["arguments"]["parameters"]}


@settings(max_examples=20, deadline=None)
@given(minutes=st.sampled_from([1, 2, 5, 10, 15, 30]))
def test_the_served_port_is_the_declared_and_the_scraped_one(minutes: int) -> None:
    tick, args = _tick_and_step(f"*/{minutes} * * * *")
    served = int(args["metrics_port"])
    (declared,) = [p for p in tick["script"]["ports"] if p["name"] == "metrics"]
    notes = tick["metadata"]["annotations"]
    assert served == declared["containerPort"] == int(notes["prometheus.io/port"]) == METRICS_PORT > 0
    assert notes["prometheus.io/scrape"] == "true" and notes["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize(("given_port", "expected"), [(METRICS_PORT, METRICS_PORT), (0, None)])
def test_the_tick_hands_the_port_to_the_loop(monkeypatch: pytest.MonkeyPatch, given_port: int,
                                              expected: int | None) -> None:
    seen: list[int | None] = []

    def run(config: str, seconds: float | None, dry_run: bool = False, *, once: bool = False,
            metrics_port: int | None = None) -> int:
        seen.append(metrics_port)
        return 0

    monkeypatch.setattr(loop, "run_from_config", run)
    gate_tick(config="gate.yaml", seconds=0, metrics_port=given_port)
    assert seen == [expected]
