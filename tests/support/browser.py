"""A real headless Chromium (Debian's `chromium` and `chromium-driver`), driven by Selenium; nothing downloaded."""

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import make_server

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1200,1000")


@contextmanager
def serving(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Serve a WSGI app on a free loopback port in a thread; yield its URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


@contextmanager
def chromium() -> Iterator:  # type: ignore[type-arg]
    """A Selenium WebDriver on Debian's headless Chromium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert binary and driver, "chromium is not installed: apt-get install chromium chromium-driver (make deps does it)"
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        yield browser
    finally:
        browser.quit()


def press(browser: Any, by: str, what: str) -> None:
    """Click a button that submits a form and wait for the answer's page (a click returns before it loads).

    Read right after the click, the old page's elements are still there, or go stale under the read.
    """
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(by, what).click()

    def gone(_: Any) -> bool:
        try:
            return bool(expected_conditions.staleness_of(page)(browser))
        except WebDriverException as err:
            # Chromedriver sometimes answers a read of the replaced page's node with this inspector error
            # rather than a stale-element one: the node is gone all the same.
            if "does not belong to the document" in str(err):
                return True
            raise
    WebDriverWait(browser, 30).until(gone)
