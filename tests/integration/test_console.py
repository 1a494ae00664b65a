import os
from datetime import timedelta
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.pool.model import Pool, build_pool
from offhours.scripts.pool.usage import usage_by_month
from tests.support.access import may_all
from tests.support.browser import chromium, serving
from tests.support.pool_fixture import NOW, SERVING, chat_state, lending_pool, state_configmap

SCREENSHOTS = os.environ.get("OFFHOURS_SCREENSHOTS")  # e.g. docs/console: where to keep the page images


class FixtureReader:
    """Returns prepared pools in turn (the last one again when they run out), or raises."""

    def __init__(self, *pools: Pool | Exception) -> None:
        self.pools = list(pools)
        self.access = may_all()  # what the console's own credentials may do to a job: everything, here

    def read(self, now=None, require_workflows=False):
        item = self.pools.pop(0) if len(self.pools) > 1 else self.pools[0]
        if isinstance(item, Exception):
            raise item
        return item


def lending_then_more():
    """Three reads 10 minutes apart: the pool lends 2, then 3 (required drops), then still 3."""
    cms, deps, wfs = lending_pool()
    later = [state_configmap("chat", chat_state(required=5, lent=3)), *cms[1:]]
    return [build_pool(cms, deps, wfs, SERVING, NOW - timedelta(minutes=20)),
            build_pool(later, deps, wfs, SERVING, NOW - timedelta(minutes=10)),
            build_pool(later, deps, wfs, SERVING, NOW)]


def source(*pools):
    return PoolSource(FixtureReader(*pools), interval=0)


def text(browser, css):
    return browser.find_element(By.CSS_SELECTOR, css).text


def test_pages_in_chromium_show_the_read_model(tmp_path):
    src = source(*lending_then_more())
    for _ in range(2):
        src.pool()  # two reads of history before the browser's
    shots = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    with serving(create_app(src)) as url, chromium() as browser:
        browser.get(url + "/")
        chat = "#service-chat td[data-field='{}']"
        assert [text(browser, chat.format(f)) for f in ("baseline", "replicas", "ready", "required", "lent", "lendable",
                                                         "gpus_lent")] == ["10", "8", "8", "5", "3", "2", "12"]
        lines = browser.find_elements(By.CSS_SELECTOR, "#service-chat svg path[data-series]")
        assert [p.get_attribute("data-series") for p in lines] == ["baseline", "in service", "required", "lent"]
        assert "state.json is not JSON" in text(browser, "#service-code .problem")
        browser.save_screenshot(str(shots / "pool.png"))

        browser.get(url + "/queue")
        row = "#queue tr[data-run='{}'] td[data-field='{}']"
        assert [text(browser, row.format("rl-d", f)) for f in ("state", "position", "gpus", "preemptions", "gpu_hours")] \
            == ["preempted→waiting", "3", "8", "1", "1.00"]
        assert text(browser, row.format("sweep-b", "reason")) == (
            "waiting: chat needs 5 of its 10 replicas and lends 3 already; 2 are lendable and this job needs 4; "
            "first in the queue (computed)")
        browser.save_screenshot(str(shots / "queue.png"))

        browser.find_element(By.LINK_TEXT, "rl-d-x7-p1").click()
        assert text(browser, "#sentence").startswith("preempted 1 time(s), parked to resume from its last checkpoint;")
        items = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#timeline li")]
        assert items[0] == "2025-03-14 07:00:00Z submitted rl-d-x7" and len(items) == 7
        # Its progress annotation says 11:15, but the run names no store: what the page says comes from a store only.
        assert text(browser, "td[data-field='last_checkpoint']") == \
            "unknown: the run names no checkpoint store offhours reads (file:// or s3://)"
        browser.save_screenshot(str(shots / "job.png"))

        browser.get(url + "/usage")
        usage = "#usage tr[data-key='chat/2025-03'] td[data-field='{}']"
        assert [text(browser, usage.format(f)) for f in ("runs", "preemptions", "used", "lost")] == ["5", "1", "3.00", "1.87"]
        browser.save_screenshot(str(shots / "usage.png"))


def test_empty_and_broken_clusters_render_in_chromium():
    empty = source(build_pool([], [], [], SERVING, NOW))
    broken = source(ConnectionRefusedError("[Errno 111] Connection refused"))
    with chromium() as browser:
        with serving(create_app(empty)) as url:
            browser.get(url + "/")
            assert text(browser, "#no-services").startswith("No service yet")
            browser.get(url + "/queue")
            assert text(browser, "#no-jobs") == "No research job is waiting or running."
            browser.get(url + "/usage")
            assert text(browser, "#no-usage") == "No offhours workflow yet."
        with serving(create_app(broken)) as url:
            for page in ("/", "/queue", "/usage"):
                browser.get(url + page)
                assert text(browser, "#problems li") == "reading the pool failed: [Errno 111] Connection refused"
            browser.get(url + "/jobs/nope")
            assert text(browser, "#error") == "no offhours job 'nope'"


def test_metrics_of_a_broken_cluster_still_parse():
    app = create_app(source(RuntimeError("API down")))
    page = parse(app.test_client().get("/metrics").get_data(as_text=True))
    assert [(s.name, s.value) for s in page.samples if s.name == "offhours_read_problems"] == [("offhours_read_problems", 1)]


def test_usage_by_month_of_the_fixture():
    (row,) = usage_by_month(build_pool(*lending_pool(), SERVING, NOW))
    assert (row.service, row.month, len(row.runs), row.preemptions, row.used, round(row.lost, 3)) == \
        ("chat", "2025-03", 5, 1, 3.0, round(14 / 60 * 8, 3))


@pytest.mark.parametrize("path", ["/", "/queue", "/usage", "/jobs/rl-d", "/healthz"])
def test_every_page_answers_200_over_the_fixture(path):
    client = create_app(source(build_pool(*lending_pool(), SERVING, NOW))).test_client()
    assert client.get(path).status_code == 200


def test_the_job_page_s_last_checkpoint_is_the_store_s_never_a_forged_annotation(tmp_path):
    """A tenant who may patch the workflow writes any progress annotation; the page reads the run's own store.

    Real: the checkpoint store on the file system (a save of step 600), the console in Chromium.
    """
    from datetime import datetime, timezone

    from offhours.scripts.runtime.checkpoint import CheckpointStore
    from tests.support.pool_fixture import workflow

    uri = f"file://{tmp_path}/ckpt"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    CheckpointStore(uri, run_id="st-run").save(600, b"weights")
    forged = {"offhours.io/admitted-at": "2025-03-14T11:35:00Z", "offhours.io/last-checkpoint": "2099-01-01T00:00:00Z"}

    def run(name: str, annotations: dict[str, str]) -> dict:
        wf = workflow(name, "chat", 1, "admitted", "Running", created=30, started=20, run_id=name,
                      annotations=annotations)
        wf["spec"]["arguments"] = {"parameters": [{"name": "checkpoint-uri", "value": uri},
                                                  {"name": "run-id", "value": name}]}
        return wf

    configmaps, deployments, _ = lending_pool()
    pool = build_pool(configmaps, deployments, [run("st-run", forged), run("none-run", forged)], SERVING, NOW)
    with serving(create_app(source(pool))) as url, chromium() as browser:
        browser.get(url + "/jobs/st-run")
        shown = text(browser, "td[data-field='last_checkpoint']")
        assert shown.endswith("Z (read from its checkpoint store)") and "2099" not in shown, shown
        assert datetime.strptime(shown[:20], "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=timezone.utc) >= before
        browser.get(url + "/jobs/none-run")  # the same forged annotation, an empty store
        assert text(browser, "td[data-field='last_checkpoint']") == "none in its checkpoint store"
