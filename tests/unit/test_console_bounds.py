"""The console under tenant invention and long uptime: /metrics series, memory and page size stay bounded."""

from datetime import timedelta

from offhours.scripts.console.app import PAGE_ROWS, create_app
from offhours.scripts.console.source import POINTS, PoolSource
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.pool.model import Pool, build_pool
from offhours.scripts.pool.operator_metrics import JOB_STATES, RECLAIM_BUCKETS
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow


def pool_with(workflows: list[dict], at=NOW, state=None) -> Pool:
    return build_pool([state_configmap("chat", state or chat_state())], [deployment("chat", 8, 8)], workflows,
                      SERVING, now=at)


class Reads:
    """A reader whose pool is whatever the test sets last."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def read(self, now=None, require_workflows=False) -> Pool:
        return self.pool


def series(page: str) -> set[tuple[str, tuple]]:
    return {(s.name, s.labels) for s in parse(page).samples}


def invented(count: int, prefix: str = "svc") -> list[dict]:
    return [workflow(f"wf-{prefix}-{i}", f"{prefix}-{i}", 1, "admitted", "Running", created=30,
                     annotations={"offhours.io/admitted-at": ts(20), "offhours.io/preempted-at": ts(5)})
            for i in range(count)]


def test_fifty_workflows_with_invented_service_labels_add_no_series():
    """Fault: tenants label workflows with 50 made-up services; /metrics keeps the configured set plus one unknown."""
    reader = Reads(pool_with([workflow("train", "chat", 2, "admitted", "Running")]))
    client = create_app(PoolSource(reader, interval=0), services=["chat"]).test_client()
    before = series(client.get("/metrics").get_data(as_text=True))
    reader.pool = pool_with([workflow("train", "chat", 2, "admitted", "Running"), *invented(50)])
    page = client.get("/metrics").get_data(as_text=True)
    after = series(page)
    services = {dict(labels).get("service") for _, labels in after} - {None}
    assert services == {"chat", "unknown"}
    added = after - before
    assert {dict(labels)["service"] for _, labels in added} == {"unknown"}
    # One series per family for "unknown" (each job state, the two counters, the histogram's buckets, +Inf, sum and
    # count), not that many per invented value.
    assert len(added) <= len(JOB_STATES) + 2 + len(RECLAIM_BUCKETS) + 3
    jobs = {dict(s.labels)["state"]: s.value for s in parse(page).samples
            if s.name == "offhours_jobs" and dict(s.labels)["service"] == "unknown"}
    assert jobs["running"] == 50  # counted, not dropped
    admissions = [s.value for s in parse(page).samples if s.name == "offhours_admissions_total"
                  and dict(s.labels)["service"] == "unknown"]
    assert admissions == [50]


def test_without_a_configuration_the_serving_namespace_bounds_the_labels():
    """Fault: no --config; tenant service labels still never become label values (the state ConfigMaps do)."""
    client = create_app(PoolSource(Reads(pool_with(invented(20))), interval=0)).test_client()
    labels = {dict(s.labels).get("service") for s in parse(client.get("/metrics").get_data(as_text=True)).samples}
    assert labels - {None} == {"chat", "unknown"}


def test_metrics_memory_forgets_deleted_workflows_but_not_across_a_failed_read():
    """Fault: days of uptime with workflows come and gone; a failed read in between must not recount the rest."""
    reader = Reads(pool_with(invented(30, "a")))
    source = PoolSource(reader, interval=0)
    source.pool()
    assert len(source.metrics.admitted) == 30
    reader.pool = Pool((), (), NOW + timedelta(minutes=5), ("list workflows in research failed",))
    source.pool()
    reader.pool = pool_with(invented(30, "a"), at=NOW + timedelta(minutes=10))
    source.pool()
    assert sum(source.metrics.admissions.values()) == 30  # counted once, not again after the failed read
    for day in range(1, 4):
        reader.pool = pool_with(invented(5, f"day{day}"), at=NOW + timedelta(hours=25 * day))
        source.pool()
    assert len(source.metrics.admitted) == 5  # only what a read of the last 24 h saw
    assert set(source.metrics.admissions) == {"unknown"}


def test_history_is_bounded_per_service_whatever_the_uptime():
    """Fault: a console up for days, reading every second, with a service whose numbers change every read."""
    reader = Reads(pool_with([]))
    source = PoolSource(reader, interval=0)
    for second in range(0, 3 * 86400, 60):
        reader.pool = pool_with([], at=NOW + timedelta(seconds=second),
                                state=chat_state(required=1 + second // 60 % 5))
        source.pool()
    points = source.series("chat")
    assert len(points) <= POINTS
    assert points[-1].at - points[0].at <= timedelta(hours=24)


def test_queue_and_usage_pages_list_at_most_a_page_of_rows():
    """Fault: a tenant submits thousands of workflows; the page stays one page and says how many are left out."""
    many = [workflow(f"sweep-{i}", "chat", 1, "parked", created=60, suspend=True) for i in range(PAGE_ROWS + 40)]
    client = create_app(PoolSource(Reads(pool_with(many)), interval=0)).test_client()
    page = client.get("/queue").get_data(as_text=True)
    assert page.count("<tr data-run=") == PAGE_ROWS
    assert "40 more not shown" in page


def many_services(count: int) -> Pool:
    names = [f"svc-{i:03d}" for i in range(count)]
    return build_pool([state_configmap(n, chat_state()) for n in names], [deployment(n, 8, 8) for n in names], [],
                      SERVING, now=NOW)


def test_the_pool_page_shows_a_page_of_services_whatever_the_fleet():
    """Fault: a fleet of 1,000 services, each with a full day of history; one page stays one page."""
    from offhours.scripts.console.app import CHART_POINTS, SERVICES_PER_PAGE

    reader = Reads(many_services(1000))
    source = PoolSource(reader, interval=0)
    for minute in range(0, 24 * 60, 30):  # 48 reads whose numbers change every time
        pool = many_services(1000)
        reader.pool = build_pool([state_configmap(s.name, chat_state(required=1 + minute % 7)) for s in pool.services],
                                 [deployment(s.name, 8, 8) for s in pool.services], [], SERVING,
                                 now=NOW + timedelta(minutes=minute))
        source.pool()
    client = create_app(source).test_client()
    first = client.get("/").get_data(as_text=True)
    assert first.count('<section class="service"') == SERVICES_PER_PAGE
    assert "services 1–20 of 1000" in first and 'rel="next"' in first
    assert len(first) < 400_000
    last = client.get("/?page=50").get_data(as_text=True)
    assert "svc-999" in last and 'rel="next"' not in last
    for absurd in ("0", "-3", "99999999999999999999", "²", "abc", "1e3"):
        answer = client.get(f"/?page={absurd}")
        assert answer.status_code == 200 and answer.get_data(as_text=True).count('<section class="service"') == 20
    assert CHART_POINTS < POINTS
