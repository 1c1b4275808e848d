"""``toolledger diff --format html`` in a real headless Chromium: the first divergence is
marked and in view, content is escaped, the console stays clean."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolledger
from toolledger.cli import main

pytestmark = pytest.mark.browser

INJECTION = "<img src=x onerror=\"document.title='pwned'\">"


def _two_runs(db: Path) -> tuple[str, str]:
    ids = []
    for second in ("mail ana", "mail bob"):
        with toolledger.run("diff", db=db) as run:
            with run.step("plan", q=INJECTION):
                pass
            with run.step(second, to=second.split()[1]):
                pass
            run.note("done")
        ids.append(run.run_id)
    return ids[0], ids[1]


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not (chromium and chromedriver):
        if os.environ.get("TOOLLEDGER_REQUIRE_BROWSER"):
            pytest.fail("TOOLLEDGER_REQUIRE_BROWSER is set but chromium/chromedriver are missing")
        pytest.skip("chromium and chromedriver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--window-size=1200,800",
        f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(chromedriver), options=options)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def test_diff_page_marks_first_divergence_escaped_clean_console(
    tmp_path: Path,
    driver,  # type: ignore[no-untyped-def]
) -> None:
    """One row is marked (the second event), the injection is text, no console errors."""
    db = tmp_path / "diff.db"
    a, b = _two_runs(db)
    page = tmp_path / "diff.html"
    result = CliRunner().invoke(
        main, ["--db", str(db), "diff", a, b, "--format", "html", "-o", str(page)]
    )
    assert result.exit_code == 1
    driver.get(page.resolve().as_uri() + "#first-divergence")
    marked = driver.find_elements("css selector", "tr.diverged")
    assert len(marked) == 1
    row = marked[0]
    assert row.get_attribute("id") == "first-divergence"
    assert "first divergence" in row.text
    assert "mail ana" in row.text
    assert "mail bob" in row.text
    cell = row.find_element("css selector", "td")
    assert cell.value_of_css_property("background-color") == "rgba(255, 241, 229, 1)"
    assert driver.title.startswith("toolledger diff")
    assert "<img src=x onerror=" in driver.find_element("tag name", "body").text
    assert driver.find_elements("css selector", "img") == []
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == []
    driver.save_screenshot(str(tmp_path / "diff.png"))
    if os.environ.get("TOOLLEDGER_SCREENSHOT_DIR"):
        shutil.copy(tmp_path / "diff.png", os.environ["TOOLLEDGER_SCREENSHOT_DIR"])


def test_viewer_names_a_forked_runs_source_in_its_facts(
    tmp_path: Path,
    driver,  # type: ignore[no-untyped-def]
) -> None:
    """The run viewer's header facts show ``source fork of RUN at EVENT`` (hashed header)."""
    db = tmp_path / "fork.db"
    with toolledger.run("fork", db=db, run_id="r1") as run:
        run.note("one")
        run.note("two")
    at = [e for e in toolledger.load_run(db, "r1").events if e.kind == "note"][1].event_id
    with toolledger.run("fork", db=db, replay_of="r1", fork_at=at) as forked:
        pass
    page = toolledger.export_html(db, forked.run_id, tmp_path / "fork.html").path
    driver.get(page.resolve().as_uri())
    facts = [s.text for s in driver.find_elements("css selector", "#facts span")]
    assert f"source fork of r1 at {at}" in facts
    driver.get(toolledger.export_html(db, "r1", tmp_path / "r1.html").path.resolve().as_uri())
    assert not any(
        s.text.startswith("source") for s in driver.find_elements("css selector", "#facts span")
    )
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == []
