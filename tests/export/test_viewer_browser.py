"""The HTML viewer in a real headless Chromium: tree, search, escaping, console, scale."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import toolledger
from toolledger.testing import MemoryStore, stored_run

from .conftest import COMMENT, INJECTION

pytestmark = pytest.mark.browser


def _binaries() -> tuple[str, str] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    found = _binaries()
    if found is None:
        if os.environ.get("TOOLLEDGER_REQUIRE_BROWSER"):
            pytest.fail("TOOLLEDGER_REQUIRE_BROWSER is set but chromium/chromedriver are missing")
        pytest.skip("chromium and chromedriver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(found[1]), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver, path: Path) -> list:
    driver.get(path.resolve().as_uri())
    driver.get_log("browser")  # drop anything from before this page
    return []


def _visible_rows(driver) -> int:
    """Rows the tree shows (the list is virtual: only rows in view are in the DOM)."""
    return int(driver.find_element("id", "tree").get_attribute("data-visible"))


def _rows(driver) -> list:
    return driver.find_elements("css selector", "#tree .row")


def _search(driver, text: str) -> None:
    box = driver.find_element("id", "search")
    box.clear()
    if text:
        box.send_keys(text)
    else:  # clear() sends no input event
        driver.execute_script(
            "const s=document.getElementById('search'); s.value='';"
            "s.dispatchEvent(new Event('input'));"
        )


def _severe(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_viewer_tree_search_and_escaping(browser, recorded, tmp_path):
    db, run_id = recorded
    path = toolledger.export_html(db, run_id, tmp_path / "run.html").path
    browser.get(path.resolve().as_uri())
    events = stored_run(db, run_id).events
    assert browser.find_element("id", "tree").get_attribute("data-nodes") == str(len(events))
    assert len(_rows(browser)) == len(events)  # a small run fits in the rendered window
    assert browser.find_element("id", "count").text == f"{len(events)} events"

    _search(browser, "timeout")
    assert browser.find_element("id", "count").text == f"1 of {len(events)} events match"
    assert _visible_rows(browser) == 1  # the failed step is top level: no ancestors shown
    assert [r.find_element("class name", "name").text for r in _rows(browser)] == ["flaky"]
    _search(browser, "42")
    assert _visible_rows(browser) == 2  # read_file (lines=42) and its parent, search
    _search(browser, "")
    assert _visible_rows(browser) == len(events)

    # The hostile output is shown as text in the details, never executed or parsed.
    _rows(browser)[0].click()
    details = browser.find_element("id", "details").text
    assert INJECTION in details
    assert COMMENT in details
    assert "The question names a codebase." in browser.find_element("css selector", ".why").text
    assert browser.execute_script("return document.querySelectorAll('script').length") == 2
    assert browser.execute_script("return document.querySelectorAll('b').length") == len(
        browser.find_elements("css selector", "#facts b")
    )
    approval = next(r for r in _rows(browser) if "approval" in r.get_attribute("class"))
    approval.click()
    box = browser.find_element("css selector", ".approval-box.refused").text
    assert "Approval refused by user" in box
    assert "Answer locally." in box
    title = browser.find_element("id", "title").text
    assert title == "Run: Answer <b>the</b> question"
    assert _severe(browser) == []


def test_viewer_handles_20000_events_and_depth_1000(browser, tmp_path):
    store = MemoryStore()
    with toolledger.run("scale", db=store) as run:
        stack = []
        for d in range(1000):
            step = run.step("deep", d=d)
            step.__enter__()
            stack.append(step)
        with run.step("needle", marker="findme"):
            pass
        for step in reversed(stack):
            step.__exit__(None, None, None)
        for i in range(18_998):
            with run.step("flat", i=i):
                pass
    total = len(stored_run(store, run.run_id).events)
    assert total == 20_000
    path = toolledger.export_html(store, run.run_id, tmp_path / "big.html").path
    browser.set_window_size(1280, 900)
    started = time.monotonic()
    browser.get(path.resolve().as_uri())
    assert browser.find_element("id", "count").text == "20000 events"
    load_seconds = time.monotonic() - started
    assert browser.find_element("id", "tree").get_attribute("data-nodes") == "20000"
    assert _visible_rows(browser) == 20_000
    # Scroll to the deepest row: it renders with its depth label.
    # Scroll events fire asynchronously; dispatch one so the virtual list renders now.
    browser.execute_script(
        "const t = document.getElementById('tree'); t.scrollTop = 999 * 24;"
        "t.dispatchEvent(new Event('scroll'));"
    )
    deep = browser.execute_script(
        "return Array.from(document.querySelectorAll('#tree .row .depth')).map(e => e.textContent)"
    )
    assert "\u20261000" in deep
    # Indentation stops before the rows would leave the pane: nothing scrolls sideways.
    assert browser.execute_script(
        "const t = document.getElementById('tree'); return t.scrollWidth <= t.clientWidth"
    )
    _search(browser, "findme")
    # the needle and its 1,000 ancestors
    assert _visible_rows(browser) == 1001
    assert browser.find_element("id", "count").text == "1 of 20000 events match"
    browser.find_element("id", "collapse").click()
    assert _visible_rows(browser) == 1001  # search still wins while a query is set
    _search(browser, "")
    # "Collapse all" folds every nested node: the top level plus the first nested level
    # under the deep chain's root stay visible.
    assert _visible_rows(browser) == 1 + 1 + 18_998 + 1
    assert _severe(browser) == []
    print(f"viewer load at 20,000 events: {load_seconds:.2f}s")
