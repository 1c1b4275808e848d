"""``toolledger.tool``: a missing revision is refused with what to write and why."""

from __future__ import annotations

from typing import Any

import pytest

import toolledger


class TestToolDecorator:
    def test_bare_decorator_says_revision_is_required_and_why(self) -> None:
        """``@toolledger.tool`` without parentheses is INVALID_ARGUMENT naming revision=."""
        with pytest.raises(toolledger.InvalidArgumentError) as info:

            @toolledger.tool  # type: ignore[call-overload]
            def send_email(input: Any, ctx: Any) -> Any:
                return input

        assert info.value.code == "INVALID_ARGUMENT"
        assert "revision=" in info.value.message
        assert "binding" in info.value.message
        assert info.value.details == {"argument": "revision"}

    def test_call_without_revision_is_the_same_error(self) -> None:
        """``toolledger.tool("x", execute=f)`` without revision gets the same typed error."""
        with pytest.raises(toolledger.InvalidArgumentError, match="needs revision="):
            toolledger.tool("x", execute=lambda i, c: i)  # type: ignore[call-overload]

    def test_decorator_with_revision_still_builds_the_tool(self) -> None:
        """The documented form is unchanged."""

        @toolledger.tool(revision="2")
        def send_email(input: Any, ctx: Any) -> Any:
            """Send it."""
            return input

        assert (send_email.name, send_email.revision, send_email.description) == (
            "send_email",
            "2",
            "Send it.",
        )
