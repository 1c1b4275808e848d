"""docs/telemetry.md's span table matches the code (names, attribute sets, constants)."""

from __future__ import annotations

import re
from pathlib import Path

import toolledger
from toolledger.telemetry import METRICS
from toolledger.telemetry import attributes as a

from .._internals import (
    RESOLUTION_ATTRIBUTES,
    SPAN_ATTRIBUTES,
    TRANSITION_ATTRIBUTES,
    decision_record,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"
TEMPLATES = {
    a.SPAN_INVOKE_AGENT.format("{agent}"): "invoke_agent",
    a.SPAN_EXECUTE_TOOL.format("{tool}"): "execute_tool",
    a.SPAN_REPLAY_TOOL.format("{tool}"): "replay_tool",  # recover_tool: the same set
    a.SPAN_GUARD_TOOL.format("{tool}"): "guard_tool",
    a.SPAN_STEP.format("{name}"): "step",
    a.SPAN_APPROVAL.format("{tool}"): "approval",
    a.SPAN_CHAT.format("{model}"): "chat",
    "note": "note",
    "artifact {name}": "artifact",
    "{kind} {name}": "other",
}
#: Rows that are not spans: the transition events and the approval's log record.
EVENT_ROWS = {
    a.SPAN_CHECKPOINT.format("{transition}"): set(TRANSITION_ATTRIBUTES),
    a.EVENT_TOOL_CALL_DECISION: set(
        decision_record({k: "x" for k in vars(a).values() if isinstance(k, str)})
    ),
    # A person's decision on a stuck call (settle): its span, and its log record's outcome.
    a.SPAN_RESOLVE_TOOL.format("{tool}"): set(RESOLUTION_ATTRIBUTES),
    a.EVENT_TOOL_CALL_RESOLUTION: {a.TL_RESOLUTION_OUTCOME},
}


#: The OpenInference projection's keys (documented in their own table).
OPENINFERENCE = {
    value for key, value in vars(a).items() if key.startswith("OI_") and isinstance(value, str)
}


def is_openinference(key: str) -> bool:
    return key in OPENINFERENCE or key.startswith(("llm.", "openinference."))


def table() -> dict[str, set[str]]:
    rows: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([^`]+)` \| `([^`]+\.[^`]+)` \|", line)  # attribute rows
        if m:
            rows.setdefault(m.group(1), set()).add(m.group(2))
    return rows


def test_docs_span_table_matches_span_model() -> None:
    rows = table()
    assert set(rows) == set(TEMPLATES) | set(EVENT_ROWS)
    spans = {TEMPLATES[k]: v for k, v in rows.items() if k in TEMPLATES}
    expected = {k: set(v) for k, v in SPAN_ATTRIBUTES.items() if k != "recover_tool"}
    assert spans == expected
    assert SPAN_ATTRIBUTES["recover_tool"] == SPAN_ATTRIBUTES["replay_tool"]
    assert {k: rows[k] for k in EVENT_ROWS} == EVENT_ROWS


def test_docs_metrics_table_names_every_metric_with_unit() -> None:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([a-z_.]+)` \| ([a-z ]+) \| `([^`]+)` \|", line)
        if m:
            rows[m.group(1)] = (m.group(2).split()[-1], m.group(3))
    assert rows == {name: (kind, unit) for name, (kind, unit, _) in METRICS.items()}


def test_docs_table_names_every_attribute_constant() -> None:
    names = {
        value
        for key, value in vars(a).items()
        if key.isupper()
        and isinstance(value, str)
        and key.startswith(("GEN_AI_", "TL_", "ERROR_TYPE", "SERVER_", "USER_ID"))
        and key != "GEN_AI_TOKEN_TYPE"  # a metric attribute (the metrics table names it)
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
    assert len(spans) >= 6
    prefixes = {k.split(" ")[0]: t for k, t in TEMPLATES.items()}
    prefixes["recover_tool"] = "recover_tool"
    for span in spans:
        kind = prefixes.get(span.name.split(" ")[0], "other")
        own = {k for k in span.attributes if not is_openinference(k)}
        assert own <= set(SPAN_ATTRIBUTES[kind]), span.name
        for event in span.events:
            assert set(event.attributes) <= set(TRANSITION_ATTRIBUTES)
