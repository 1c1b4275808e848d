"""The viewer's approval states, layout, artifact pane, keyboard, links, times, JSON, index.

In Chromium at 1,280 and 1,920 px. ``TOOLLEDGER_SCREENSHOTS=DIR`` saves the PNGs looked at.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

import toolledger
from toolledger import Approved, Denied, Pending
from toolledger.errors import ApprovalDeniedError
from toolledger.testing import MemoryStore, stored_run

from .test_viewer_browser import _rows, _severe, browser  # noqa: F401 (the fixture)
from .test_viewer_life_browser import _life_run, _select, _shot

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="document.title=1">'
WIDTHS = (1280, 1920)

#: Every element inside a pane that ends right of it, and panes that scroll sideways.
OVERFLOW_JS = """
const bad = [], d = document.documentElement;
if (d.scrollWidth > d.clientWidth) bad.push('page ' + d.scrollWidth + '>' + d.clientWidth);
for (const id of ['tree', 'details']) {
  const e = document.getElementById(id);
  if (e.scrollWidth > e.clientWidth) bad.push(id + ' ' + e.scrollWidth + '>' + e.clientWidth);
}
for (const pane of ['header', '#details']) {
  const box = document.querySelector(pane).getBoundingClientRect();
  for (const e of document.querySelectorAll(pane + ' *')) {
    const r = e.getBoundingClientRect();
    if (r.width && r.right > box.right + 0.5) bad.push(e.tagName + '.' + e.className);
  }
}
return bad;
"""


def _gated_run(db: Path, artifact: Path) -> str:
    """A step with an artifact; calls approved, waiting (ticket) and denied."""

    @toolledger.tool(revision="3", approval="effect-only", approver=lambda r: Approved("alice"))
    def refund(input, ctx):  # type: ignore[no-untyped-def]
        return {"refund_id": "RF-1", "amount": input["amount"]}

    @toolledger.tool(
        revision="1", approval="effect-only", approver=lambda r: Pending(ticket="HELP-1")
    )
    def send_email(input, ctx):  # type: ignore[no-untyped-def]
        return {"sent": True}

    @toolledger.tool(
        revision="1", approval="effect-only", approver=lambda r: Denied("bob", reason="too wide")
    )
    def wipe(input, ctx):  # type: ignore[no-untyped-def]
        return {}

    artifact.write_text("# findings\n")
    with toolledger.run("Refund Ana " + "and write to her " * 8, agent="support", db=db) as run:
        with run.step("plan", justification="Ana asked for a refund", order="A-1001") as s:
            s.record_output(plan=["refund", "email"])
            s.add_artifact(artifact, name="findings")
        run.call(refund, call_id="toolu_refund", input={"amount": 12})
        run.deliver("toolu_refund", post=lambda payload: None)
        waiting = run.call(
            send_email,
            call_id="toolu_email",
            input={"to": "ana@example.org", "body": HOSTILE},
            justification="Tell Ana the refund is done " + HOSTILE,
        )
        assert waiting.status == "awaiting_approval"
        with pytest.raises(ApprovalDeniedError):
            run.call(wipe, call_id="toolu_wipe", input={"all": True})
    return run.run_id


@pytest.fixture(scope="module")
def gated(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("gated")
    run_id = _gated_run(tmp / "gated.db", tmp / "findings.md")
    page = toolledger.export_html(tmp / "gated.db", run_id, tmp / "gated.html").path
    return page, run_id


def _open(driver, page: Path, width: int, fragment: str = "") -> None:
    driver.set_window_size(width, 900)
    driver.get(page.resolve().as_uri() + fragment)


def _box(driver, state: str) -> dict:
    return driver.execute_script(
        "const b = document.querySelector('.approval-box');"
        "const s = getComputedStyle(b), d = document.getElementById('details');"
        "return {state: b.getAttribute('data-state'), color: s.borderTopColor,"
        " text: b.innerText, right: b.getBoundingClientRect().right,"
        " pane: d.getBoundingClientRect().right,"
        " hashes: Array.from(b.querySelectorAll('td.hash')).map("
        "   e => [e.textContent, e.getBoundingClientRect().right])};"
    )


def _css_var(driver, name: str) -> str:
    return driver.execute_script(
        "const e = document.createElement('i'); e.style.color = 'var(" + name + ")';"
        "document.body.appendChild(e); const c = getComputedStyle(e).color; e.remove(); return c;"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_approval_states_and_the_box_an_approver_needs(browser, gated, width):  # noqa: F811
    page, _run_id = gated
    _open(browser, page, width)
    amber, red, green = (_css_var(browser, v) for v in ("--pending", "--bad", "--ok"))
    assert len({amber, red, green}) == 3

    _select(browser, "send_email", "approval")
    box = _box(browser, "pending")
    assert box["state"] == "pending"
    assert box["color"] == amber  # waiting is amber, not the red of a refusal
    text = box["text"]
    assert "Approval pending: waiting for a decision" in text
    assert "HELP-1" in text  # the ticket
    assert "Tell Ana the refund is done " + HOSTILE in text  # the justification, as text
    assert '"ana@example.org"' in text
    assert json.dumps(HOSTILE) in text
    assert "default/toolu_email" in text
    assert "send_email (revision 1)" in text
    fingerprints = [h for h in box["hashes"] if h[0].startswith("sha256:")]
    assert len(fingerprints) == 2  # binding and input, whole, inside the box
    assert all(len(h[0]) == len("sha256:") + 64 for h in fingerprints)
    assert all(h[1] <= box["right"] <= box["pane"] + 0.5 for h in fingerprints)
    row = browser.execute_script(
        "return getComputedStyle(document.querySelector('#tree .row.selected')).borderLeftColor"
    )
    assert row == amber
    if width == 1280:
        _shot(browser, "viewer-approval-pending-1280")

    _select(browser, "wipe", "approval")
    box = _box(browser, "refused")
    assert (box["state"], box["color"]) == ("refused", red)
    assert "Approval refused by bob" in box["text"]
    assert "too wide" in box["text"]
    _select(browser, "refund", "approval")
    box = _box(browser, "granted")
    assert (box["state"], box["color"]) == ("granted", green)
    assert "Approval granted by alice" in box["text"]
    assert "refund (revision 3)" in box["text"]

    # Nothing is wider than the window or its pane, whichever event is open.
    browser.find_element("tag name", "body").send_keys(Keys.HOME)
    for _ in range(int(browser.find_element("id", "tree").get_attribute("data-visible"))):
        assert browser.execute_script(OVERFLOW_JS) == [], browser.current_url
        browser.find_element("tag name", "body").send_keys(Keys.ARROW_DOWN)
    # Stored text stayed text: no element came from a payload.
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.title.startswith("toolledger")
    assert _severe(browser) == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_checkpoint_table_fits_its_pane(browser, tmp_path, width):  # noqa: F811
    db = tmp_path / "life.db"
    page = toolledger.export_html(db, _life_run(db), tmp_path / "life.html").path
    _open(browser, page, width)
    for name in ("refund", "charge"):
        _select(browser, name, "tool_call")
        table = browser.execute_script(
            "const t = document.querySelector('table.transitions');"
            "const d = document.getElementById('details');"
            "return [t.scrollWidth, t.clientWidth, t.getBoundingClientRect().right,"
            " d.getBoundingClientRect().right, t.rows.length];"
        )
        assert table[0] <= table[1], table
        assert table[2] <= table[3] + 0.5, table
        assert table[4] > 2
        assert browser.execute_script(OVERFLOW_JS) == []
    if width == 1280:
        _shot(browser, "viewer-checkpoint-table-1280")
    # Transition times are relative to the run's start, absolute (UTC) on hover.
    first = browser.find_element("css selector", "table.transitions tr:nth-child(2) td")
    assert first.text.startswith("+")
    assert first.text.endswith(("ms", " s"))
    assert " UTC" in first.get_attribute("title")


def test_artifact_pane_relative_times_and_json(browser, gated):  # noqa: F811
    page, run_id = gated
    _open(browser, page, 1280)
    _select(browser, "findings", "artifact")
    pane = browser.find_element("id", "details")
    art = pane.find_element("css selector", ".artifact-box").text
    assert "findings" in art
    assert "text/markdown" in art
    assert "11 bytes" in art
    events = {e["event_id"]: e for e in stored_run(page.parent / "gated.db", run_id).events}
    artifact = next(e for e in events.values() if e["kind"] == "artifact")
    assert artifact["artifact"]["sha256"] in art

    # Times: "+… ms/s" after the run's start, the stored time (with its zone) on hover.
    started = pane.find_element("css selector", "table.facts .time")
    assert started.text.startswith("+")
    assert started.get_attribute("data-abs") == artifact["started_at"]
    assert started.get_attribute("title").startswith(
        artifact["started_at"].replace("T", " ").replace("+00:00", " UTC")
    )

    # JSON: collapsible, with a copy button that copies the exact JSON.
    _select(browser, "plan", "step")
    sections = browser.execute_script(
        "return Array.from(document.querySelectorAll('#details h3.sec')).map("
        " h => [h.firstChild.textContent, !!h.querySelector('button.copy')])"
    )
    assert ["Inputs", True] in sections
    assert ["Outputs", True] in sections
    outputs = browser.find_elements("css selector", "#details .json")[1]
    nested = outputs.find_element("css selector", "details details")
    assert nested.get_attribute("open") is not None
    assert '"refund"' in nested.text
    nested.find_element("tag name", "summary").click()
    assert nested.get_attribute("open") is None
    assert nested.text == '"plan": [ 2 items ]'
    browser.execute_script(
        "window.__copied = null; navigator.clipboard.writeText = t =>"
        " { window.__copied = t; return Promise.resolve(); };"
    )
    browser.find_elements("css selector", "#details button.copy")[1].click()
    WebDriverWait(browser, 5).until(lambda d: d.execute_script("return window.__copied"))
    copied = browser.execute_script("return window.__copied")
    assert json.loads(copied) == {"plan": ["refund", "email"]}
    assert browser.find_elements("css selector", "#details button.copy")[1].text == "Copied"
    assert _severe(browser) == []


def test_a_pending_approval_decided_since_says_so(browser, tmp_path):  # noqa: F811
    """The journal's event stays pending; the page reads the store's decision at export."""
    from toolledger.approvals import decide_approval

    db = tmp_path / "gated.db"
    run_id = _gated_run(db, tmp_path / "findings.md")
    decide_approval(db, "default", "toolu_email", True, "carol", "checked with Ana")
    page = toolledger.export_html(db, run_id, tmp_path / "decided.html").path
    _open(browser, page, 1280)
    _select(browser, "send_email", "approval")
    box = _box(browser, "pending")
    assert box["state"] == "pending"
    assert "Decided since: approved by carol" in box["text"]
    assert "(checked with Ana)" in box["text"]


def test_keyboard_and_event_links(browser, gated):  # noqa: F811
    page, run_id = gated
    events = stored_run(page.parent / "gated.db", run_id).events
    _open(browser, page, 1280)
    assert browser.execute_script("return location.hash") == ""  # nothing chosen yet
    body = browser.find_element("tag name", "body")

    def selected() -> str:
        return browser.find_element("css selector", "#tree .row.selected .name").text

    names = [r.find_element("class name", "name").text for r in _rows(browser)]
    body.send_keys(Keys.ARROW_DOWN)
    assert selected() == names[1]
    body.send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN)
    assert selected() == names[3]
    body.send_keys(Keys.ARROW_UP)
    assert selected() == names[2]
    # The URL follows the selection; the page opened at that URL opens that event.
    target = next(e for e in events if e["name"] == names[2])
    WebDriverWait(browser, 5).until(
        lambda d: d.execute_script("return location.hash") == "#" + target["event_id"]
    )
    body.send_keys(Keys.END)
    assert selected() == names[-1]
    email = next(e for e in events if e["name"] == "send_email")
    _open(browser, page, 1280, "#" + email["event_id"])
    assert selected() == "send_email"
    assert "HELP-1" in browser.find_element("css selector", ".approval-box").text
    # A link to another event (a pasted URL, a jump) opens it.
    plan = next(e for e in events if e["name"] == "plan")
    browser.execute_script("location.hash = arguments[0]", plan["event_id"])
    WebDriverWait(browser, 5).until(lambda d: selected() == "plan")
    assert browser.find_element("css selector", "#details h2").text == "step \u00b7 plan"
    # Left folds the open row (then goes to its parent), right unfolds it.
    visible = int(browser.find_element("id", "tree").get_attribute("data-visible"))
    body.send_keys(Keys.ARROW_LEFT)
    assert int(browser.find_element("id", "tree").get_attribute("data-visible")) == visible - 1
    body.send_keys(Keys.ARROW_RIGHT)
    assert int(browser.find_element("id", "tree").get_attribute("data-visible")) == visible
    body.send_keys(Keys.ARROW_DOWN, Keys.ARROW_LEFT)
    assert selected() == "plan"  # from the artifact to its parent step
    # Typing in the search box is not navigation.
    box = browser.find_element("id", "search")
    box.send_keys(Keys.ARROW_DOWN)
    assert selected() == "plan"
    assert _severe(browser) == []


def test_two_thousand_rows_have_previews_and_stay_fast(browser, tmp_path):  # noqa: F811
    store = MemoryStore()
    with toolledger.run("parse 2,000 files", db=store) as run:
        for i in range(2000):
            with run.step("parse", path=f"src/file_{i:04}.py") as s:
                s.record_output(tokens=i * 7, ok=i % 97 != 0)
    page = toolledger.export_html(store, run.run_id, tmp_path / "many.html").path
    started = time.monotonic()
    _open(browser, page, 1280)
    assert browser.find_element("id", "count").text == "2001 events"  # and the finish
    load = time.monotonic() - started
    previews = [p.text for p in browser.find_elements("css selector", "#tree .row .preview")[:3]]
    assert previews[0] == 'path="src/file_0000.py" \u2192 ok=false, tokens=0'
    assert previews[1] == 'path="src/file_0001.py" \u2192 ok=true, tokens=7'
    assert len(set(previews)) == 3
    assert browser.execute_script(OVERFLOW_JS) == []
    body = browser.find_element("tag name", "body")
    started = time.monotonic()
    for _ in range(40):
        body.send_keys(Keys.ARROW_DOWN)
    keys = time.monotonic() - started
    row = browser.find_element("css selector", "#tree .row.selected")
    assert row.find_element("class name", "preview").text.startswith('path="src/file_0040.py"')
    assert row.is_displayed()  # scrolled along
    _shot(browser, "viewer-2000-steps-1280")
    body.send_keys(Keys.END)
    assert browser.find_element("css selector", "#tree .row.selected .name").text == "finish"
    body.send_keys(Keys.ARROW_UP)
    assert browser.find_element("css selector", "#tree .row.selected .preview").text.startswith(
        'path="src/file_1999.py"'
    )
    assert _severe(browser) == []
    print(f"2,000 steps: load {load:.2f}s, 40 arrow keys {keys:.2f}s")


def test_site_index_sorts_and_filters_by_status(browser, tmp_path):  # noqa: F811
    db = tmp_path / "site.db"
    goals = {"Bravo weekly report": 3, "Alpha refund": 1, "Charlie cleanup": 2}
    for goal, steps in goals.items():
        with toolledger.run(goal, agent="ops", db=db) as run:
            for i in range(steps):
                run.note(f"n{i}")
    failing = toolledger.run("Delta import " + HOSTILE, agent="etl", db=db)
    with pytest.raises(RuntimeError), failing:
        raise RuntimeError("boom")
    info = toolledger.export_site(db, tmp_path / "site")
    for width in WIDTHS:
        _open(browser, info.index, width)

        def column(i: int) -> list[str]:
            return [
                r.find_elements("tag name", "td")[i].text
                for r in browser.find_elements("css selector", "#runs tr")
                if r.is_displayed()
            ]

        assert column(1)[0].startswith("Delta import")  # newest first, as written
        browser.find_element("css selector", "th[data-key=goal] button").click()
        assert column(1)[:3] == ["Alpha refund", "Bravo weekly report", "Charlie cleanup"]
        assert (
            browser.find_element("css selector", "th[data-key=goal]").get_attribute("aria-sort")
            == "ascending"
        )
        browser.find_element("css selector", "th[data-key=goal] button").click()
        assert column(1)[-3:] == ["Charlie cleanup", "Bravo weekly report", "Alpha refund"]
        browser.find_element("css selector", "th[data-key=events] button").click()
        events = [int(v) for v in column(4)]
        assert events == sorted(events, reverse=True)  # numbers: largest first
        status = browser.find_element("id", "status")
        options = [o.get_attribute("value") for o in status.find_elements("tag name", "option")]
        assert options == ["", "completed", "failed"]
        status.find_element("css selector", "option[value=failed]").click()
        assert column(3) == ["failed"]
        assert browser.find_element("id", "count").text == "1 of 4 runs match"
        browser.find_element("id", "search").send_keys("alpha")  # both filters apply
        assert column(3) == []
        assert browser.execute_script(
            "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
        status.find_element("css selector", "option[value='']").click()
        assert column(1) == ["Alpha refund"]
        if width == 1280:
            browser.find_element("id", "search").clear()
            browser.execute_script(
                "const s=document.getElementById('search'); s.dispatchEvent(new Event('input'));"
            )
            _shot(browser, "site-index-1280")
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert _severe(browser) == []
