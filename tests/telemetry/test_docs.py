"""docs/telemetry.md's span table matches the code (names, attribute sets, constants)."""

from __future__ import annotations

import re
from pathlib import Path

import toolledger
from toolledger.telemetry import _model
from toolledger.telemetry import attributes as a

DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"
TEMPLATES = {
    a.SPAN_INVOKE_AGENT.format("{agent}"): "invoke_agent",
    a.SPAN_EXECUTE_TOOL.format("{tool}"): "execute_tool",
    a.SPAN_CHECKPOINT.format("{transition}"): "checkpoint",
    a.SPAN_STEP.format("{name}"): "step",
    a.SPAN_APPROVAL.format("{name}"): "approval",
    a.SPAN_CHAT.format("{model}"): "chat",
    "{kind} {name}": "other",
}


def table() -> dict[str, set[str]]:
    rows: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([^`]+)` \| `([^`]+)` \|", line)
        if m:
            rows.setdefault(m.group(1), set()).add(m.group(2))
    return rows


def test_docs_span_table_matches_span_model() -> None:
    rows = table()
    assert set(rows) == set(TEMPLATES)
    assert {TEMPLATES[k]: v for k, v in rows.items()} == {
        k: set(v) for k, v in _model.SPAN_ATTRIBUTES.items()
    }


def test_docs_table_names_every_attribute_constant() -> None:
    names = {
        value
        for key, value in vars(a).items()
        if key.isupper()
        and isinstance(value, str)
        and key.startswith(("GEN_AI_", "TL_", "ERROR_TYPE"))
    }
    documented = set().union(*table().values())
    assert names == documented


def test_docs_schema_url_and_bound_are_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert a.SCHEMA_URL in text
    assert f"{toolledger.telemetry.CONTENT_MAX_CHARS:,}" in text


def test_live_spans_carry_only_documented_attributes(tmp_path, provider, exporter) -> None:
    tool = toolledger.tool(
        "lookup", revision="1", execute=lambda i, c: {"ok": True}, description="d"
    )
    with toolledger.run(
        goal="g", agent="a", db=tmp_path / "t.db", tracer_provider=provider, capture_content=True
    ) as run:
        with run.step("s", justification="j", q=1) as step:
            step.record_output(n=1)
            step.note("a note")
        run.call(tool, call_id="c1", input={"x": 1}, justification="why")
        run.call(tool, call_id="c1", input={"x": 1}, justification="why")
        run.approval("ap", granted=False, by="user", reason="no", for_call="c1")
    spans = exporter.get_finished_spans()
    assert len(spans) >= 8
    prefixes = {k.split(" ")[0]: t for k, t in TEMPLATES.items()}
    for span in spans:
        kind = prefixes.get(span.name.split(" ")[0], "other")
        assert set(span.attributes) <= set(_model.SPAN_ATTRIBUTES[kind]), span.name
