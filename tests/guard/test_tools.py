"""Tool definitions: direct and decorator forms, validation, kept keywords, answers."""

from __future__ import annotations

from typing import Any

import pytest

import toolledger
from toolledger import NotRecovered, Recovered, Tool


class TestToolDefinition:
    def test_tool_decorator_takes_name_and_docstring(self) -> None:
        """@tool(revision=…) names the tool after the function; the docstring describes it."""

        @toolledger.tool(revision="3")
        def send_email(input: Any, ctx: Any) -> Any:
            """Send an email."""
            return input

        assert isinstance(send_email, Tool)
        assert (send_email.name, send_email.revision, send_email.description) == (
            "send_email",
            "3",
            "Send an email.",
        )
        assert send_email.on_error == "raise"
        assert send_email.is_async is False

    def test_tool_direct_form_keeps_every_keyword(self) -> None:
        """The later-feature keywords are kept on the record."""

        def approver(request: Any) -> None:
            return None

        t = toolledger.tool(
            "refund",
            revision="2",
            execute=lambda i, c: 1,
            description="Refund an order.",
            on_error="result",
            input_schema={"type": "object"},
            effects=["payments"],
            approval="always",
            approver=approver,
        )
        assert (t.input_schema, t.effects, t.approval, t.approver) == (
            {"type": "object"},
            ["payments"],
            "always",
            approver,
        )
        assert t.on_error == "result"

    def test_tool_async_execute_is_async(self) -> None:
        """An async execute or recover marks the tool async (run.acall needed)."""

        async def execute(input: Any, ctx: Any) -> int:
            return 1

        async def recover(ctx: Any) -> None:
            return None

        assert toolledger.tool("a", revision="1", execute=execute).is_async
        assert toolledger.tool("b", revision="1", execute=lambda i, c: 1, recover=recover).is_async

    @pytest.mark.parametrize(
        "kw",
        [
            {"revision": "has space"},
            {"revision": ""},
            {"on_error": "ignore"},
            {"execute": "not callable"},
            {"recover": 42},
        ],
    )
    def test_tool_bad_definition_is_invalid_argument(self, kw: dict[str, Any]) -> None:
        """Bad revisions, options and callables fail with INVALID_ARGUMENT."""
        args: dict[str, Any] = {"revision": "1", "execute": lambda i, c: 1, **kw}
        with pytest.raises(toolledger.InvalidArgumentError) as err:
            toolledger.tool("t", **args)
        assert err.value.code == "INVALID_ARGUMENT"

    def test_tool_bad_name_is_invalid_argument(self) -> None:
        """Names are identifiers."""
        with pytest.raises(toolledger.InvalidArgumentError):
            toolledger.tool("send email", revision="1", execute=lambda i, c: 1)

    def test_tool_is_frozen(self) -> None:
        """A Tool cannot be changed after definition."""
        t = toolledger.tool("t", revision="1", execute=lambda i, c: 1)
        with pytest.raises(AttributeError):
            t.revision = "2"  # type: ignore[misc]


class TestAnswers:
    def test_recovered_positional_output_and_error_flag(self) -> None:
        """Recovered(output) and Recovered(output, is_error=True)."""
        assert Recovered({"a": 1}) == Recovered(output={"a": 1}, is_error=False)
        assert Recovered("x", is_error=True).is_error is True

    def test_not_recovered_reason_is_optional(self) -> None:
        """NotRecovered() carries no reason; NotRecovered("why") does."""
        assert NotRecovered().reason is None
        assert NotRecovered("no order").reason == "no order"

    def test_guard_names_are_exported(self) -> None:
        """The guard's public names are in toolledger.__all__."""
        for name in (
            "ExecuteContext",
            "NotRecovered",
            "RecoverContext",
            "Recovered",
            "Tool",
            "ToolOutcome",
            "tool",
        ):
            assert name in toolledger.__all__
            assert getattr(toolledger, name) is not None
