"""``toolledger.check_tool``: stable diagnostics for every accepted tool shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import toolledger
from toolledger import Diagnostic, check_tool
from toolledger.readiness import CODES


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "to": {"type": "string", "maxLength": 320, "description": "Recipient address."},
            "tags": {
                "type": "array",
                "maxItems": 5,
                "items": {"type": "string", "enum": ["a", "b"]},
                "description": "Labels to apply.",
            },
        },
        "required": ["to"],
        "additionalProperties": False,
    }


DESCRIPTION = "Send one email to a single recipient."


def _execute(input: Any, ctx: Any) -> Any:
    return {"ok": True}


def _codes(found: list[Diagnostic]) -> list[tuple[str, str]]:
    return [(d.code, d.path) for d in found]


class TestShapes:
    def test_check_tool_ready_toolledger_tool_no_diagnostics(self) -> None:
        """A toolledger tool with a closed, bounded, described schema is ready."""
        t = toolledger.tool(
            "send_email",
            revision="1",
            execute=_execute,
            description=DESCRIPTION,
            input_schema=_schema(),
            effects="idempotent",
        )
        assert check_tool(t) == []

    def test_check_tool_ready_anthropic_dict_no_diagnostics(self) -> None:
        """An Anthropic tool dict is read through ``input_schema``."""
        tool = {"name": "send_email", "description": DESCRIPTION, "input_schema": _schema()}
        assert check_tool(tool) == []

    def test_check_tool_openai_chat_dict_paths_under_function(self) -> None:
        """OpenAI chat tools report paths under ``function.``."""
        schema = _schema()
        del schema["additionalProperties"]
        tool = {
            "type": "function",
            "function": {"name": "send email", "description": "x", "parameters": schema},
        }
        assert _codes(check_tool(tool)) == [
            ("name", "function.name"),
            ("description", "function.description"),
            ("closed_input", "function.parameters"),
        ]

    def test_check_tool_openai_responses_dict_paths_at_top(self) -> None:
        """OpenAI Responses tools keep ``parameters`` at the top level."""
        schema = _schema()
        schema["properties"]["to"].pop("maxLength")
        tool = {
            "type": "function",
            "name": "send_email",
            "description": DESCRIPTION,
            "parameters": schema,
        }
        assert _codes(check_tool(tool)) == [("unbounded_string", "parameters.properties.to")]

    def test_check_tool_mcp_listing_entry_reads_input_schema_camel_case(self) -> None:
        """An MCP listing entry uses ``inputSchema``; a destructive tool lacks recover."""
        tool = {
            "name": "delete_file",
            "description": "Delete one file from the workspace.",
            "inputSchema": _schema(),
            "annotations": {"destructiveHint": True},
        }
        found = check_tool(tool)
        assert _codes(found) == [("no_recover", "annotations")]
        assert found[0].severity == "warning"

    def test_check_tool_mcp_read_only_annotation_no_recover_needed(self) -> None:
        """A ``readOnlyHint`` MCP tool declares no side effects."""
        tool = {
            "name": "read_file",
            "description": "Read one file from the workspace.",
            "inputSchema": _schema(),
            "annotations": {"readOnlyHint": True},
        }
        assert check_tool(tool) == []

    def test_check_tool_mcp_tool_object_is_dumped_by_alias(self) -> None:
        """An ``mcp.types.Tool`` object is checked through its wire form."""
        mcp_types = pytest.importorskip("mcp.types")
        schema = _schema()
        schema["properties"]["tags"].pop("maxItems")
        tool = mcp_types.Tool(name="tagger", description="Tag one thing.", input_schema=schema)
        assert _codes(check_tool(tool)) == [("unbounded_array", "inputSchema.properties.tags")]

    def test_check_tool_server_tool_nothing_to_check(self) -> None:
        """Provider-defined server tools have no schema of ours."""
        assert check_tool({"type": "web_search_20250305", "name": "web_search"}) == []
        assert check_tool({"type": "web_search"}) == []

    def test_check_tool_unknown_object_invalid_argument(self) -> None:
        """Anything else is refused with ``INVALID_ARGUMENT``."""
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            check_tool(42)
        assert info.value.code == "INVALID_ARGUMENT"


class TestChecks:
    def test_check_tool_missing_schema_closed_input_error(self) -> None:
        """A tool with no input schema cannot be handed to a model safely."""
        t = toolledger.tool("ping", revision="1", execute=_execute, description=DESCRIPTION)
        found = check_tool(t)
        assert _codes(found) == [("closed_input", "input_schema")]
        assert found[0].severity == "error"

    def test_check_tool_non_object_schema_closed_input_error(self) -> None:
        """The root schema must be an object schema."""
        for schema in ({"type": "string"}, {}, {"anyOf": [{"type": "object"}]}):
            tool = {"name": "x", "description": DESCRIPTION, "input_schema": schema}
            assert _codes(check_tool(tool)) == [("closed_input", "input_schema")], schema

    def test_check_tool_nested_open_object_closed_input_error(self) -> None:
        """Every object level must be closed, not only the root."""
        schema = _schema()
        schema["properties"]["meta"] = {
            "type": "object",
            "description": "Extra fields.",
            "properties": {},
        }
        tool = {"name": "x", "description": DESCRIPTION, "input_schema": schema}
        assert _codes(check_tool(tool)) == [("closed_input", "input_schema.properties.meta")]

    def test_check_tool_undescribed_argument_warning(self) -> None:
        """An argument without a description is a warning at its path."""
        schema = _schema()
        schema["properties"]["to"].pop("description")
        found = check_tool({"name": "x", "description": DESCRIPTION, "input_schema": schema})
        assert _codes(found) == [("argument_description", "input_schema.properties.to")]
        assert found[0].severity == "warning"

    def test_check_tool_nullable_string_without_bound_unbounded_string(self) -> None:
        """``type: [string, null]`` is a string too."""
        schema = _schema()
        schema["properties"]["to"] = {"type": ["string", "null"], "description": "To."}
        found = check_tool({"name": "x", "description": DESCRIPTION, "input_schema": schema})
        assert _codes(found) == [("unbounded_string", "input_schema.properties.to")]

    def test_check_tool_array_items_walked(self) -> None:
        """Strings inside array items are checked at ``.items``."""
        schema = _schema()
        schema["properties"]["tags"]["items"] = {"type": "string"}
        found = check_tool({"name": "x", "description": DESCRIPTION, "input_schema": schema})
        assert _codes(found) == [("unbounded_string", "input_schema.properties.tags.items")]

    def test_check_tool_defs_checked_where_defined(self) -> None:
        """``$defs`` targets are checked in place; ``$ref`` is not followed."""
        schema = _schema()
        schema["$defs"] = {"Addr": {"type": "object", "properties": {}}}
        schema["properties"]["addr"] = {"$ref": "#/$defs/Addr", "description": "An address."}
        found = check_tool({"name": "x", "description": DESCRIPTION, "input_schema": schema})
        assert _codes(found) == [("closed_input", "input_schema.$defs.Addr")]

    def test_check_tool_short_description_warning(self) -> None:
        """Fewer than three words is a ``description`` warning; none counts as zero."""
        found = check_tool({"name": "x", "description": "Sends.", "input_schema": _schema()})
        assert _codes(found) == [("description", "description")]
        assert "found 1" in found[0].message
        found = check_tool({"name": "x", "input_schema": _schema()})
        assert "found 0" in found[0].message

    @pytest.mark.parametrize("name", ["a" * 65, "", "send.email", "send:email", "sénd"])
    def test_check_tool_unportable_name_error(self, name: str) -> None:
        """Names outside ``^[A-Za-z0-9_-]{1,64}$`` are errors."""
        found = check_tool({"name": name, "description": DESCRIPTION, "input_schema": _schema()})
        assert _codes(found) == [("name", "name")]

    def test_check_tool_side_effect_without_recover_warning(self) -> None:
        """``effects="side-effect"`` needs a recover hook or an explanation."""
        kw: dict[str, Any] = {
            "revision": "1",
            "execute": _execute,
            "description": DESCRIPTION,
            "input_schema": _schema(),
        }
        bare = toolledger.tool("charge", effects="side-effect", **kw)
        assert _codes(check_tool(bare)) == [("no_recover", "effects")]
        hooked = toolledger.tool("charge", effects="side-effect", recover=lambda ctx: None, **kw)
        assert check_tool(hooked) == []
        explained = toolledger.tool(
            "charge",
            effects={"kind": "side-effect", "explanation": "The provider has no lookup API."},
            **kw,
        )
        assert check_tool(explained) == []

    def test_check_tool_unknown_effects_invalid_argument(self) -> None:
        """An ``effects`` value outside none/idempotent/side-effect is refused."""
        t = toolledger.tool("x", revision="1", execute=_execute, effects="sometimes")
        with pytest.raises(toolledger.InvalidArgumentError) as info:
            check_tool(t)
        assert info.value.code == "INVALID_ARGUMENT"

    def test_check_tool_every_code_has_its_severity(self) -> None:
        """Severities follow the code table; the table is exactly the issue's codes."""
        assert dict(CODES) == {
            "name": "error",
            "description": "warning",
            "closed_input": "error",
            "argument_description": "warning",
            "unbounded_string": "error",
            "unbounded_array": "error",
            "no_recover": "warning",
        }
        tool = {
            "name": "bad name",
            "input_schema": {
                "type": "object",
                "properties": {"s": {"type": "string"}, "a": {"type": "array", "description": "d"}},
            },
        }
        for d in check_tool(tool):
            assert d.severity == CODES[d.code]

    def test_check_tool_does_not_mutate_the_tool(self) -> None:
        """Checking reads only."""
        tool = {"name": "x", "description": "y", "input_schema": {"type": "object"}}
        before = copy.deepcopy(tool)
        check_tool(tool)
        assert tool == before

    def test_check_tool_deep_schema_no_recursion_limit(self) -> None:
        """A schema nested 5,000 levels is walked without hitting the recursion limit."""
        leaf: dict[str, Any] = {"type": "string", "maxLength": 3, "description": "leaf"}
        node = leaf
        for _ in range(5000):
            node = {"type": "array", "maxItems": 1, "items": node}
        schema = {
            "type": "object",
            "additionalProperties": False,
            "properties": {"deep": {**node, "description": "deep"}},
        }
        tool = {"name": "deep", "description": DESCRIPTION, "input_schema": schema}
        assert check_tool(tool) == []


def test_diagnostic_is_frozen_record() -> None:
    """``Diagnostic`` is an immutable keyword-only record."""
    d = Diagnostic(code="name", severity="error", path="name", message="m")
    with pytest.raises(AttributeError):
        d.code = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Diagnostic("name", "error", "name", "m")  # type: ignore[misc]


def test_readme_integrations_example_prints_what_it_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's readiness snippet runs and prints the lines its comments show."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- section:integrations -->", 1)[1]
    section = section.split("<!-- /section:integrations -->", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    code = match.group(1)
    exec(compile(code, "README.md", "exec"), {})
    expected = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    assert capsys.readouterr().out.splitlines() == expected


def test_with_justification_adds_a_bounded_argument_that_passes_readiness():
    """The injected justification argument is described and bounded, so it adds no diagnostic."""
    from toolledger.integrations.anthropic import with_justification

    tool = {
        "name": "send_email",
        "description": "Send one email to one recipient on the user's behalf.",
        "input_schema": {
            "type": "object",
            "properties": {"to": {"type": "string", "maxLength": 254, "description": "Address."}},
            "required": ["to"],
            "additionalProperties": False,
        },
    }
    (adapted,) = with_justification([tool])
    assert "justification" in adapted["input_schema"]["properties"]
    assert [d.code for d in toolledger.check_tool(adapted)] == []
