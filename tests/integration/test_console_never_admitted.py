"""In Chromium: the console's request form refuses, before anything is parked, a job the gate would never admit.

The same check `offhours submit` runs (cluster/never_admitted.py) against the console's gate configuration; the page
shows the gate's words and its fix, and the research namespace gets no workflow. Real: Chromium, the Flask app
over HTTP; the research namespace is a fake person API (tests/unit/test_console_refuses_what_the_gate_never_admits).
"""

from selenium.webdriver.common.by import By

from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from tests.support.browser import chromium, press, serving
from tests.unit.test_console_refuses_what_the_gate_never_admits import CAP, CONFIG, VALUES, OwnTemplates


def fill_and_submit(browser, url: str) -> None:  # type: ignore[no-untyped-def]
    browser.get(url + "/request/mine")
    for name, value in VALUES.items():
        field = browser.find_element(By.CSS_SELECTOR, f"input[name='param:{name}']")
        field.clear()
        field.send_keys(value)
    press(browser, By.ID, "submit-button")


def test_a_job_the_gate_would_never_admit_is_refused_in_the_browser_with_the_gates_words() -> None:
    store = OwnTemplates(CAP * 10)
    app = create_app(PoolSource(store, interval=0), services=["chat"], person_api=store, gate_config=CONFIG)
    with serving(app) as url, chromium() as browser:
        fill_and_submit(browser, url)
        said = browser.find_element(By.ID, "general-problem").text
        assert said.startswith("the gate would never admit it: ") and f"maxGraceSeconds {CAP}" in said, said
        assert "set terminationGracePeriodSeconds to at most" in said and said.endswith("Nothing was created")
    assert store.created == []


def test_the_same_form_parks_a_job_within_the_cap() -> None:
    store = OwnTemplates(CAP // 2)
    app = create_app(PoolSource(store, interval=0), services=["chat"], person_api=store, gate_config=CONFIG)
    with serving(app) as url, chromium() as browser:
        fill_and_submit(browser, url)
        assert "/jobs/" in browser.current_url
    assert len(store.created) == 1
