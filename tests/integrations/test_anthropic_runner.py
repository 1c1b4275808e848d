"""``guarded_tool_runner``: the SDK's tool runner with every call through the guard."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import toolledger
from toolledger import Denied, Pending
from toolledger.errors import BindingConflictError
from toolledger.integrations import ToolGate
from toolledger.integrations import anthropic_runner as ar
from toolledger.integrations.anthropic import (
    aresume_tool_runner,
    guarded_tool_runner,
    resume_tool_runner,
)
from toolledger.telemetry import flush_spans
from toolledger.testing import stored_run

anthropic = pytest.importorskip("anthropic")
from anthropic import beta_async_tool, beta_tool  # noqa: E402

from ._fake_messages import MODEL, FakeMessages  # noqa: E402
from ._spans import ancestors, only  # noqa: E402

PARAMS: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Tell Ana her order shipped."}],
}


class Outbox:
    """The irreversible effect: one line per email sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def sync_tool(self, *, fail: Exception | None = None) -> Any:
        @beta_tool
        def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            if fail is not None:
                raise fail
            return f"sent to {to}"

        return send_email

    def async_tool(self) -> Any:
        @beta_async_tool
        async def send_email(to: str) -> str:
            """Send one email."""
            self.sent.append(to)
            return f"sent to {to}"

        return send_email


def _drive(runner: Any, is_async: bool) -> Any:
    if is_async:
        return asyncio.run(runner.until_done())
    return runner.until_done()


VARIANTS = [
    pytest.param(False, {}, id="sync"),
    pytest.param(False, {"stream": True}, id="sync-stream"),
    pytest.param(False, {"stream": True, "run_tools_eagerly": True}, id="sync-eager"),
    pytest.param(True, {}, id="async"),
    pytest.param(True, {"stream": True}, id="async-stream"),
    pytest.param(True, {"stream": True, "run_tools_eagerly": True}, id="async-eager"),
]


@pytest.mark.parametrize(("is_async", "extra"), VARIANTS)
def test_guarded_runner_runs_a_tool_once_and_replays_it(
    run: toolledger.Run, is_async: bool, extra: dict[str, Any]
) -> None:
    """Each runner variant runs the call once; a second runner over the same turn replays it."""
    box = Outbox()
    tool = box.async_tool() if is_async else box.sync_tool()
    fake = FakeMessages()
    for _ in range(2):
        runner = guarded_tool_runner(
            run, fake.client(is_async=is_async), tools=[tool], **PARAMS, **extra
        )
        final = _drive(runner, is_async)
        assert final.content[0].text == "Done."
    assert box.sent == ["ana@example.com"]
    first, second = fake.tool_results()
    assert first == second
    assert first["tool_use_id"] == "toolu_1"
    assert first["content"] == "sent to ana@example.com"
    assert "is_error" not in first
    rec = run.store.get(run.namespace, "toolu_1")
    assert rec.result.payload == "sent to ana@example.com"


def test_resume_runs_the_last_turns_calls_through_the_guard(run: toolledger.Run) -> None:
    """A saved last turn: the call that completed replays its result (the tool does not
    run again); the call that never started runs now, once; earlier turns are repaired."""
    box = Outbox()
    fake = FakeMessages()
    saved = list(PARAMS["messages"])
    runner = guarded_tool_runner(run, fake.client(), tools=[box.sync_tool()], **PARAMS)
    first = next(iter(runner))  # the model's turn (the app saves it), then its tool runs
    saved.append({"role": "assistant", "content": first.model_dump(mode="json")["content"]})
    runner.generate_tool_call_response()
    assert box.sent == ["ana@example.com"]  # the process dies here, before the next request
    never = {"type": "tool_use", "id": "toolu_9", "name": "send_email", "input": {"to": "bo"}}
    saved[-1]["content"].append(never)
    options = {k: v for k, v in PARAMS.items() if k != "messages"}
    resumed = resume_tool_runner(run, fake.client(), saved, tools=[box.sync_tool()], **options)
    assert resumed.until_done().content[0].text == "Done."
    assert box.sent == ["ana@example.com", "bo"]
    replayed, ran = fake.tool_results()[-2:]
    assert (replayed["tool_use_id"], replayed["content"]) == ("toolu_1", "sent to ana@example.com")
    assert (ran["tool_use_id"], ran["content"]) == ("toolu_9", "sent to bo")
    assert not replayed.get("is_error")
    assert not ran.get("is_error")


@pytest.mark.parametrize(
    ("granted", "told"), [(True, "sent to ana@example.com"), (False, "denied by ops: no")]
)
def test_call_waiting_for_a_decision_runs_on_resume_once_decided(
    run: toolledger.Run, granted: bool, told: str
) -> None:
    """The model was told "awaiting approval"; the app resumes the saved turn once a person
    decided: the call runs (or the denial is its result), with its id."""
    box = Outbox()
    fake = FakeMessages()
    gates = {"send_email": ToolGate()}
    runner = guarded_tool_runner(run, fake.client(), tools=[box.sync_tool()], gates=gates, **PARAMS)
    turn = next(iter(runner))
    waiting = runner.generate_tool_call_response()
    assert waiting["content"][0]["content"] == "awaiting approval; not executed yet"
    saved = [
        *PARAMS["messages"],
        {"role": "assistant", "content": turn.model_dump(mode="json")["content"]},
    ]
    toolledger.decide_approval(
        run.store, run.namespace, "toolu_1", granted, "ops", None if granted else "no"
    )
    options = {k: v for k, v in PARAMS.items() if k != "messages"}
    resumed = resume_tool_runner(
        run, fake.client(), saved, tools=[box.sync_tool()], gates=gates, **options
    )
    resumed.until_done()
    (result,) = fake.tool_results()
    assert (result["tool_use_id"], result["content"]) == ("toolu_1", told)
    assert box.sent == (["ana@example.com"] if granted else [])
    assert bool(result.get("is_error")) is not granted


def test_resume_with_an_async_client_awaits_the_last_turns_calls(run: toolledger.Run) -> None:
    """``aresume_tool_runner``: the same, with ``AsyncAnthropic`` and an async tool."""
    box = Outbox()
    fake = FakeMessages()
    saved = [
        *PARAMS["messages"],
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "send_email",
                    "input": {"to": "ana@example.com"},
                }
            ],
        },
    ]
    options = {k: v for k, v in PARAMS.items() if k != "messages"}

    async def go() -> Any:
        runner = await aresume_tool_runner(
            run, fake.client(is_async=True), saved, tools=[box.async_tool()], **options
        )
        return await runner.until_done()

    assert asyncio.run(go()).content[0].text == "Done."
    assert box.sent == ["ana@example.com"]
    assert fake.tool_results()[-1]["content"] == "sent to ana@example.com"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tool_reaches_its_call_context(run: toolledger.Run, is_async: bool) -> None:
    """``toolledger.current_call()`` inside a runner's tool: its tool-use id and operation."""

    def context() -> str:
        ctx = toolledger.current_call()
        assert ctx is not None
        ctx.operation.write({"message_id": "m-1"})
        return ctx.call_id

    @beta_tool
    def send_email(to: str) -> str:
        """Send one email."""
        return context()

    @beta_async_tool
    async def asend_email(to: str) -> str:
        """Send one email."""
        return context()

    fake = FakeMessages()
    tool = asend_email if is_async else send_email
    tool.name = "send_email"
    runner = guarded_tool_runner(run, fake.client(is_async=is_async), tools=[tool], **PARAMS)
    _drive(runner, is_async)
    assert fake.tool_results()[-1]["content"] == "toolu_1"


class TwoCalls(FakeMessages):
    """The model asks for one email per turn, twice, then ends the turn."""

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = len(self.requests) - 1
        if turn == 2:
            return {**super().message({"messages": [{"content": [{"type": "tool_result"}]}]})}
        self.tool_use_id, self.to = f"toolu_{turn + 1}", ["ana@example.com", "bo"][turn]
        return super().message({"messages": [{"content": "go"}]})


def test_results_a_later_reply_was_requested_with_are_marked_seen(run: toolledger.Run) -> None:
    """Each call of a reply marks the results its request carried; the last stays unseen."""
    fake = TwoCalls()
    runner = guarded_tool_runner(run, fake.client(), tools=[Outbox().sync_tool()], **PARAMS)
    assert runner.until_done().content[0].text == "Done."
    states = [run.store.get(run.namespace, c).status.value for c in ("toolu_1", "toolu_2")]
    assert states == ["delivered", "completed"]


def test_stock_runner_runs_the_same_call_twice(run: toolledger.Run) -> None:
    """The contrast: without the guard, the same turn handled twice sends two emails."""
    box = Outbox()
    fake = FakeMessages()
    for _ in range(2):
        fake.client().beta.messages.tool_runner(tools=[box.sync_tool()], **PARAMS).until_done()
    assert box.sent == ["ana@example.com", "ana@example.com"]


def test_guarded_runner_journals_the_models_justification(run: toolledger.Run) -> None:
    """A tool whose schema asks for a justification: it is journaled as the model's."""
    seen = []

    @beta_tool
    def send_email(to: str, justification: str) -> str:
        """Send one email.

        Args:
            to: The address.
            justification: Why this email is needed now.
        """
        seen.append((to, justification))
        return "sent"

    guarded_tool_runner(run, FakeMessages().client(), tools=[send_email], **PARAMS).until_done()
    assert seen == [("ana@example.com", "The user asked for it.")]
    run.flush()
    events = [e for e in stored_run(run.store, run.run_id).events if e["kind"] == "tool_call"]
    assert [(e["name"], e["justification"], e["status"]) for e in events] == [
        ("send_email", "The user asked for it.", "completed")
    ]
    assert events[0]["meta"]["justification_source"] == "model"
    assert events[0]["inputs"] == {"to": "ana@example.com"}


def test_guarded_runner_binds_the_revision(run: toolledger.Run) -> None:
    """``revisions`` names the tool's revision; another revision for the same id conflicts."""
    box = Outbox()
    fake = FakeMessages()
    guarded_tool_runner(
        run, fake.client(), tools=[box.sync_tool()], revisions={"send_email": "7"}, **PARAMS
    ).until_done()
    assert run.store.get(run.namespace, "toolu_1").binding.tool_revision == "7"
    runner = guarded_tool_runner(run, fake.client(), tools=[box.sync_tool()], **PARAMS)
    with pytest.raises(BindingConflictError) as info:
        runner.until_done()
    assert info.value.code == "BINDING_CONFLICT"
    assert box.sent == ["ana@example.com"]


def test_tool_error_reaches_the_guard_and_releases_the_claim(run: toolledger.Run) -> None:
    """``on_error="raise"``: the SDK sends its error result; a retry may run the tool."""
    box = Outbox()
    fake = FakeMessages()
    tool = box.sync_tool(fail=ValueError("mailbox full"))
    for _ in range(2):
        guarded_tool_runner(run, fake.client(), tools=[tool], **PARAMS).until_done()
    assert box.sent == ["ana@example.com", "ana@example.com"]
    result = fake.tool_results()[0]
    assert result["is_error"] is True
    assert "mailbox full" in str(result["content"])
    assert run.store.get(run.namespace, "toolu_1").status.value == "ready"


def test_tool_error_as_result_is_stored_and_replayed(run: toolledger.Run) -> None:
    """``on_error="result"``: the error is the call's result, sent again without running."""
    box = Outbox()
    fake = FakeMessages()
    tool = box.sync_tool(fail=ValueError("mailbox full"))
    for _ in range(2):
        guarded_tool_runner(
            run, fake.client(), tools=[tool], on_error="result", **PARAMS
        ).until_done()
    assert box.sent == ["ana@example.com"]
    first, second = fake.tool_results()
    assert first == second
    assert first["is_error"] is True
    assert "mailbox full" in first["content"]


def test_lost_outcome_is_unknown_and_never_rerun(run: toolledger.Run) -> None:
    """A call found executing (a crashed attempt) is answered OUTCOME_UNKNOWN, not re-run."""
    box = Outbox()
    fake = FakeMessages()

    def lost(input: Any, ctx: toolledger.ExecuteContext) -> Any:
        ctx.operation.write({"sent": True})
        raise TimeoutError("no answer")  # the effect may have happened

    with pytest.raises(toolledger.OutcomeUnknownError):
        run.call(
            toolledger.tool("send_email", revision="1", execute=lost),
            call_id="toolu_1",
            input={"to": "ana@example.com"},
        )
    guarded_tool_runner(run, fake.client(), tools=[box.sync_tool()], **PARAMS).until_done()
    assert box.sent == []
    result = fake.tool_results()[0]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "outcome unknown: this action may already have happened and is being "
        "settled; do not retry it",
        "is_error": True,
    }


def test_gate_pending_and_denied_run_nothing(run: toolledger.Run) -> None:
    """A gated tool waiting for a decision, or denied, does not run."""
    box = Outbox()
    fake = FakeMessages()
    gates = {"send_email": ToolGate(approver=lambda request: Pending("HELP-1"))}
    guarded_tool_runner(
        run, fake.client(), tools=[box.sync_tool()], gates=gates, **PARAMS
    ).until_done()
    assert box.sent == []
    assert fake.tool_results()[0]["content"] == "awaiting approval; not executed yet"
    fake2 = FakeMessages(tool_use_id="toolu_2")
    gates = {"send_email": ToolGate(approver=lambda request: Denied("alice", "not today"))}
    guarded_tool_runner(
        run, fake2.client(), tools=[box.sync_tool()], gates=gates, on_error="result", **PARAMS
    ).until_done()
    assert box.sent == []
    assert fake2.tool_results()[0]["content"] == "denied by alice: not today"
    assert fake2.tool_results()[0]["is_error"] is True


class TestHookContract:
    """The SDK hooks this adapter goes through: a missing one fails loudly."""

    def test_installed_sdk_has_every_hook(self) -> None:
        """The installed ``anthropic`` has each per-call method with its parameters."""
        ar.check_hooks()
        for owner, name, _params in ar.HOOKS:
            assert name in owner.__dict__, (owner, name)

    def test_missing_hook_raises_import_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A release without ``_run_tool`` makes the adapter refuse to load."""

        class Renamed:
            def _run_tool_v2(self, tool: Any, tool_use: Any) -> Any: ...

        monkeypatch.setattr(ar, "HOOKS", ((Renamed, "_run_tool", ("self", "tool", "tool_use")),))
        with pytest.raises(ImportError, match=r"Renamed\._run_tool"):
            ar.check_hooks()

    def test_runner_without_hook_is_refused(
        self, run: toolledger.Run, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A runner the SDK makes that is not a known runner class is never returned unguarded."""

        class Other:
            pass

        client = FakeMessages().client()
        monkeypatch.setattr(client.beta.messages, "tool_runner", lambda **kw: Other())
        with pytest.raises(TypeError, match="not guarding"):
            guarded_tool_runner(run, client, tools=[], **PARAMS)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without ``anthropic`` installed, the runner module's ImportError names the extra."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delitem(sys.modules, "toolledger.integrations.anthropic_runner")
    monkeypatch.delattr(toolledger.integrations, "anthropic_runner", raising=False)
    with pytest.raises(ImportError, match=r"toolledger\[anthropic\]"):
        importlib.import_module("toolledger.integrations.anthropic_runner")
    import toolledger.integrations.anthropic as raw

    assert callable(raw.tool_calls)  # the raw-loop adapter needs no SDK
    with pytest.raises(ImportError, match=r"toolledger\[anthropic\]"):
        raw.guarded_tool_runner  # noqa: B018


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_tool_span_nests_under_the_sdks_tool_use_span(
    tmp_path: Path, provider: Any, exporter: Any, is_async: bool
) -> None:
    """With the SDK's tracing on, its tool-use span is our guard_tool's parent, one trace."""
    box = Outbox()
    tool = box.async_tool() if is_async else box.sync_tool()
    store = toolledger.SQLiteStore(tmp_path / "spans.db", durability="normal")
    client = FakeMessages().client(is_async=is_async, open_telemetry={"tracer_provider": provider})
    with (
        toolledger.run("tell Ana", agent="mailer", db=store, tracer_provider=provider) as run,
        run.span.activate(),
    ):
        _drive(guarded_tool_runner(run, client, tools=[tool], **PARAMS), is_async)
    store.close()
    assert box.sent == ["ana@example.com"]
    assert flush_spans()
    spans = list(exporter.get_finished_spans())
    ours = only(spans, "toolledger", "guard_tool send_email")
    theirs = only(spans, "com.anthropic.sdk.python", "anthropic.custom_tool_use send_email")
    assert ours.parent.span_id == theirs.context.span_id
    run_span = only(spans, "toolledger", "invoke_agent mailer")
    assert run_span.context.span_id in ancestors(ours, spans)
    assert {s.context.trace_id for s in spans} == {run_span.context.trace_id}
