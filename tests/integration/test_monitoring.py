import json
import math
import re
import shutil
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import requests

from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.gate.metrics_server import serve_metrics
from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.policy.return_phases import Observation, Tracker, begin, observe
from offhours.scripts.pool.model import build_pool
from offhours.scripts.pool.operator_metrics import MetricsState, exposition
from tests.support.browser import serving
from tests.support.pool_fixture import SERVING, chat_state, deployment, state_configmap, workflow
from tests.support.prometheus_fixture import running_prometheus

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"


class StagedCluster:
    """A cluster that moves on at each read: lending (reads 0-3), a reclaim waiting for Ready (4-7), reclaimed (8+).

    Lending: chat lends 4 of 10 (train-a and rl-d-x7 admitted, 2 each), sweep-b parked. The reclaim decision
    takes 2 back: rl-d-x7 is preempted and parked again; the Deployment asks for 8 with 6 Ready, then 8 Ready.
    """

    def __init__(self) -> None:
        self.reads = 0
        self.lock = threading.Lock()
        self.reclaim_at: datetime | None = None

    def read(self, now=None, require_workflows=False):
        with self.lock:
            stage, self.reads = min(2, self.reads // 4), self.reads + 1
            now = datetime.now(timezone.utc)
            if stage >= 1 and self.reclaim_at is None:
                self.reclaim_at = now
        minutes = 0.1
        train = workflow("train-a", "chat", 2, "admitted", "Running", created=minutes, started=minutes,
                         annotations={"offhours.io/admitted-at": ts(now)})
        rl = workflow("rl-d-x7", "chat", 2, "admitted", "Running", created=minutes, run_id="rl-d",
                      annotations={"offhours.io/admitted-at": ts(now)})
        wfs = [train, rl, workflow("sweep-b", "chat", 4, "parked", suspend=True, created=minutes)]
        state = chat_state(required=4, lent=4)
        state["lastDecision"].update(at=ts(now), action="lend")
        dep = deployment("chat", 6, 6)
        if stage >= 1:
            state = chat_state(required=6, lent=2)
            state["lastDecision"].update(at=ts(self.reclaim_at), action="reclaim", target=2)
            rl["metadata"]["labels"]["offhours.io/state"] = "preempted"
            rl["spec"]["shutdown"] = "Stop"  # as the gate's stop writes it (a copied label alone is no stop)
            rl["metadata"]["annotations"]["offhours.io/preempted-at"] = ts(self.reclaim_at)
            copy = workflow("rl-d-x7-p1", "chat", 2, "parked", suspend=True, run_id="rl-d",
                            annotations={"offhours.io/preemptions": "1"})
            wfs.append(copy)
            dep = deployment("chat", 8, 6 if stage == 1 else 8)
        return build_pool([state_configmap("chat", state)], [dep], wfs, SERVING, now)


def ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_counters_and_the_reclaim_histogram_follow_the_stages():
    cluster, state = StagedCluster(), MetricsState()
    pages = []
    for _ in range(9):
        pool = cluster.read()
        state.update(pool)
        pages.append({(s.name, s.labels): s.value for s in parse(exposition(pool, state)).samples})
    chat = (("service", "chat"),)
    first, reclaiming, done = pages[0], pages[5], pages[8]
    assert (first[("offhours_service_lent_gpus", chat)], first[("offhours_admissions_total", chat)],
            first[("offhours_preemptions_total", chat)]) == (16, 2, 0)
    assert (reclaiming[("offhours_service_lent_gpus", chat)], reclaiming[("offhours_preemptions_total", chat)],
            reclaiming[("offhours_reclaim_ready_seconds_count", chat)]) == (8, 1, 0)
    assert reclaiming[("offhours_jobs", (("service", "chat"), ("state", "waiting")))] == 2
    assert done[("offhours_reclaim_ready_seconds_count", chat)] == 1
    assert done[("offhours_reclaim_ready_seconds_bucket", (("le", "15"), ("service", "chat")))] == 1
    assert done[("offhours_admissions_total", chat)] == 2  # counted once per workflow, whatever the reads


def test_alert_rules_pass_promtool():
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (make deps does it)"
    for args in (["check", "rules", "offhours-alerts.yaml"], ["test", "rules", "offhours-alerts.test.yaml"]):
        done = subprocess.run([promtool, *args], cwd=MONITORING, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((MONITORING / "offhours-dashboard.json").read_text())
    # Textbox variables (the return bound's parts) take their defaults, as Grafana fills them in.
    boxes = {v["name"]: v["query"] for v in dashboard["templating"]["list"] if v["type"] == "textbox"}
    queries = [(p["title"], re.sub(r"\$(\w+)", lambda m: boxes.get(m.group(1), m.group(0)), t["expr"]))
               for p in dashboard["panels"] for t in p["targets"]]
    variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "service")
    metric = variable["definition"].removeprefix("label_values(").split(",")[0]
    return [*queries, ("variable service", metric)]


def query(url: str, expr: str) -> list[dict]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.mark.prometheus
def test_every_dashboard_query_and_alert_rule_runs_on_a_real_prometheus(tmp_path):
    cluster = StagedCluster()
    app = create_app(PoolSource(cluster, interval=0))
    gate_metrics = ReturnMetrics(["chat"])  # the gate's own page: one reclaim of chat served (after the first scrape)
    gate = serve_metrics(gate_metrics.render, 0, "127.0.0.1")
    with serving(app) as console:
        target = console.removeprefix("http://")
        scrape = {"job_name": "offhours-console", "static_configs": [{"targets": [target]}]}
        gate_scrape = {"job_name": "offhours-gate", "scrape_interval": "1s",
                       "static_configs": [{"targets": [f"127.0.0.1:{gate.server_address[1]}"]}]}
        with running_prometheus([], tmp_path, extra_scrape_configs=[scrape, gate_scrape],
                                rule_files=[str(MONITORING / "offhours-alerts.yaml")]) as url:
            deadline = time.time() + 60
            while time.time() < deadline and not query(url, "offhours_reclaim_ready_seconds_count > 0"):
                time.sleep(0.5)
            tracker, _ = begin(Tracker(), "chat", 0.0, 0.4)
            tracker, served = observe(tracker, "chat", Observation(True, True, True, True), 95.0)
            gate_metrics.record(served[0])
            time.sleep(3)  # a couple more scrapes after the reclaim became Ready, and after the gate's reclaim
            assert [r["value"][1] for r in query(url, "offhours_reclaim_ready_seconds_count")] == ["1"]
            assert [r["value"][1] for r in query(url, "offhours_preemptions_total")] == ["1"]
            for title, expr in dashboard_queries():
                result = query(url, expr.replace('service=~"$service"', 'service=~".*"'))
                assert result, f"panel {title!r}: {expr} returned no data"
                assert all(math.isfinite(float(r["value"][1])) for r in result), (title, result)
            by_panel = {t: e for t, e in dashboard_queries()}
            bound = [e for t, e in dashboard_queries() if "bound" in t and e.startswith("vector(")]
            assert [r["value"][1] for r in query(url, bound[0])] == ["400"]  # 2 x 15 + 120 + 240 + 10 s
            lent = query(url, by_panel["GPUs lent to research"].replace("$service", ".*"))
            assert [(r["metric"]["service"], r["value"][1]) for r in lent] == [("chat", "8")]
            deadline = time.time() + 30
            while time.time() < deadline:
                rules = requests.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"][0]["rules"]
                if all(r.get("lastEvaluation", "").startswith("2") and r["health"] != "unknown" for r in rules):
                    break
                time.sleep(0.5)
            assert {r["name"]: r["health"] for r in rules} == {name: "ok" for name in (
                "OffhoursGateNotTicking", "OffhoursServingBelowRequired", "OffhoursReclaimSlow",
                "OffhoursReturnPathSlow", "OffhoursGateFailedTicks", "OffhoursConsoleCannotRead", "OffhoursLentUnused")}
    gate.shutdown()
    gate.server_close()
