"""The viewer's checkpoint life, approval links and timeline, and the static site, in Chromium."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

import toolledger
from toolledger import Approved

from .test_viewer_browser import _rows, _severe, browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("TOOLLEDGER_SCREENSHOTS")


class PostFailed(Exception):
    """The model endpoint refused the post."""


def _life_run(db: Path) -> str:
    """A gated call approved and delivered on the second post; a call left uncertain."""

    @toolledger.tool(revision="1", approval="effect-only", approver=lambda r: Approved("alice"))
    def refund(input, ctx):  # type: ignore[no-untyped-def]
        return {"refund_id": "RF-1", "amount": input["amount"]}

    @toolledger.tool(revision="1")
    def charge(input, ctx):  # type: ignore[no-untyped-def]
        ctx.operation.write({"charge": "pending"})
        raise TimeoutError("gateway timeout")

    with toolledger.run("Refund order A-1001", agent="support", db=db) as run:
        with run.step("plan", justification="The customer asked for a refund") as step:
            step.record_output(plan="refund then charge")
            run.call(refund, call_id="toolu_refund", input={"amount": 12})
        calls = {"n": 0}

        def post(payload: object) -> None:
            calls["n"] += 1
            if calls["n"] == 1:
                raise PostFailed("model endpoint down")

        with pytest.raises(PostFailed):
            run.deliver("toolu_refund", post=post)
        run.deliver("toolu_refund", post=post)
        with pytest.raises(toolledger.OutcomeUnknownError):
            run.call(charge, call_id="toolu_charge", input={"amount": 12})
    return run.run_id


def _shot(driver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def _select(driver, name: str, kind: str) -> None:
    for row in _rows(driver):
        if row.find_element("class name", "name").text == name and kind in row.get_attribute(
            "class"
        ):
            row.click()
            return
    raise AssertionError(f"no {kind} row named {name}")


def test_tool_call_shows_its_checkpoint_life_and_approval(browser, tmp_path):  # noqa: F811
    """Transitions with attempt and delivery ids, delivery attempts, uncertain reason, links."""
    db = tmp_path / "life.db"
    run_id = _life_run(db)
    path = toolledger.export_html(db, run_id, tmp_path / "life.html").path
    browser.set_window_size(1400, 900)
    browser.get(path.resolve().as_uri())
    _select(browser, "refund", "tool_call")
    life = browser.find_element("css selector", ".life")
    text = life.text
    assert "delivered at" in text
    assert "delivery attempts: 2" in text
    cells = [
        [td.text for td in tr.find_elements("tag name", "td")]
        for tr in life.find_elements("css selector", "table.transitions tr")[1:]
    ]
    transitions = [c[1] for c in cells]
    assert transitions == [
        "create_checkpoint",
        "claim_execution",
        "complete_execution",
        "claim_delivery",
        "release_delivery",
        "claim_delivery",
        "complete_delivery",
    ]
    assert [c[2] for c in cells][-1] == "delivered"
    assert cells[1][4]  # the claim names its attempt id
    assert cells[3][5]  # each delivery claim names its delivery id,
    assert cells[5][5]
    assert cells[3][5] != cells[5][5]  # and the second attempt has its own
    links = browser.find_element("css selector", ".links").text
    assert "approval refund [granted]" in links
    _shot(browser, "viewer-life-delivered")
    browser.find_element("css selector", ".links a.jump").click()  # to the approval
    assert "Approval granted by alice" in browser.find_element("css selector", ".approval-box").text
    assert "tool_call refund" in browser.find_element("css selector", ".links").text

    _select(browser, "charge", "tool_call")
    life = browser.find_element("css selector", ".life").text
    assert "uncertain" in life
    assert "Uncertain:" in life
    assert "not delivered" in life
    _shot(browser, "viewer-life-uncertain")
    assert _severe(browser) == []


def test_timeline_bars_keep_nesting_and_durations(browser, tmp_path):  # noqa: F811
    """Every row has a bar; a child's bar lies within its parent's; the toggle hides them."""
    db = tmp_path / "life.db"
    run_id = _life_run(db)
    path = toolledger.export_html(db, run_id, tmp_path / "life.html").path
    browser.get(path.resolve().as_uri())
    bars = browser.execute_script(
        "return Array.from(document.querySelectorAll('#tree .row')).map(r => {"
        " const b = r.querySelector('.bar'); const t = r.querySelector('.track');"
        " if (!b) return null;"
        " const bb = b.getBoundingClientRect(), tb = t.getBoundingClientRect();"
        " return [r.querySelector('.name').textContent, bb.left - tb.left, bb.right - tb.left,"
        " parseFloat(r.style.paddingLeft)]; })"
    )
    assert all(b is not None for b in bars)
    plan, refund = bars[0], bars[1]
    assert plan[0] == "plan"
    assert refund[3] > plan[3]  # nesting kept: the call is indented under the step
    assert plan[1] - 1 <= refund[1] <= refund[2] <= plan[2] + 1  # and its bar is inside
    assert plan[2] - plan[1] > 2  # a duration, drawn as a bar
    _shot(browser, "viewer-timeline")
    browser.find_element("id", "timeline").click()
    assert not browser.find_element("css selector", "#tree .row .track").is_displayed()
    assert _severe(browser) == []


def test_site_index_searches_and_links_to_pages_offline(browser, tmp_path):  # noqa: F811
    """export-site: the index lists runs, filters by search, and its links open the pages."""
    from click.testing import CliRunner

    from toolledger.cli import main

    db = tmp_path / "site.db"
    life = _life_run(db)
    with (
        toolledger.run("Weekly report for the team", agent="reports", db=db) as run,
        run.step("totals", justification="sum the week"),
    ):
        pass
    odd = toolledger.run("odd id", db=db, run_id="run:42")
    with odd:
        odd.note("a run id that is not a file name")
    out = tmp_path / "site"
    result = CliRunner().invoke(main, ["--db", str(db), "export-site", str(out), "--since", "1d"])
    assert result.exit_code == 0, result.output
    index = out / "index.html"
    assert result.stdout.strip() == str(index)
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        [f"{life}.html", f"{run.run_id}.html", toolledger.export.site.page_name(odd.run_id)]
    )
    assert toolledger.export.site.page_name(odd.run_id).startswith("run_")  # hashed
    browser.set_window_size(1200, 700)
    browser.get(index.resolve().as_uri())
    rows = browser.find_elements("css selector", "#runs tr")
    assert [r.get_attribute("data-run") for r in rows][:2] == [odd.run_id, run.run_id]
    assert browser.find_element("id", "count").text == "3 runs"
    refund_row = next(r for r in rows if r.get_attribute("data-run") == life)
    cells = [td.text for td in refund_row.find_elements("tag name", "td")]
    assert cells[1:7] == ["Refund order A-1001", "support", "completed", "5", "1", "0"]
    box = browser.find_element("id", "search")
    box.send_keys("customer refund")  # words from a step's justification and the goal
    assert browser.find_element("id", "count").text == "1 of 3 runs match"
    _shot(browser, "site-index")
    refund_row.find_element("tag name", "a").click()
    assert browser.current_url.endswith(f"runs/{life}.html")
    assert browser.find_element("id", "title").text == "Run: Refund order A-1001"
    browser.find_element("css selector", "header a.back").click()
    assert browser.current_url.endswith("index.html")
    logs = browser.get_log("browser")
    assert [e for e in logs if e.get("level") == "SEVERE"] == []
    # Offline: no page asks for anything (only relative links to files written here).
    for page in [index, *(out / "runs").iterdir()]:
        text = page.read_text(encoding="utf-8")
        assert "default-src 'none'" in text
        assert "http://" not in text.replace("http://www.w3.org", "")
        assert "https://" not in text


def test_site_since_and_bad_age(tmp_path):
    """--since keeps newer runs; a malformed age is exit 2 and writes nothing."""
    from click.testing import CliRunner

    from toolledger.cli import main

    db = tmp_path / "site.db"
    with toolledger.run("one", db=db) as run:
        run.note("x")
    out = tmp_path / "site"
    bad = CliRunner().invoke(main, ["--db", str(db), "export-site", str(out), "--since", "7x"])
    assert bad.exit_code == 2
    assert not out.exists()
    info = toolledger.export_site(db, out, since="1h")
    assert info.runs == 1
    future = toolledger.export_site(db, tmp_path / "none", since=datetime.now(timezone.utc))
    assert future.runs == 0
