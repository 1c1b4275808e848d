"""``guarded_session_tool_runner`` and anthropic-sdk-python #1749, against a fake session API.

The stock ``SessionToolRunner`` (2.16) remembers the calls it handled in one runner's memory
only: when a result post fails, a second runner on the session, the same runner iterated
again, or a new process after a crash runs the tool again. The guarded runner keys every
call by the session's event id (the server's history keeps it) and posts the stored result,
the same bytes, on every attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic import beta_async_tool, beta_tool
from anthropic.lib.tools._beta_session_runner import SessionToolRunner

import toolledger
from toolledger.integrations.anthropic import guarded_session_tool_runner

from ._fake_session import CALL_EVENT_ID, SESSION_ID, FakeSession

CHILD = Path(__file__).with_name("_session_child.py")


class Outbox:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def tool(self, *, is_async: bool = False) -> Any:
        if is_async:

            @beta_async_tool
            async def send_email(to: str) -> str:
                """Send one email."""
                self.sent.append(to)
                return f"sent to {to}"

            return send_email

        @beta_tool
        def send_email(to: str) -> str:  # type: ignore[no-redef]
            """Send one email."""
            self.sent.append(to)
            return f"sent to {to}"

        return send_email


async def _first_call(runner: Any) -> Any:
    """Iterate ``runner`` until it yields one call, then close it (as a consumer would)."""
    async with contextlib.aclosing(runner.__aiter__()) as calls:
        async for call in calls:
            return call
    raise AssertionError("the runner yielded no call")


def _runners(kind: str, run: toolledger.Run, fake: FakeSession, tool: Any) -> Any:
    if kind == "stock":
        return lambda: SessionToolRunner(fake.client(), SESSION_ID, tools=[tool])
    return lambda: guarded_session_tool_runner(run, fake.client(), SESSION_ID, tools=[tool])


async def _two_runners(make: Any) -> list[Any]:
    failed = await _first_call(make())  # its post is refused
    second = await _first_call(make())  # a second runner on the same session
    return [failed, second]


async def _same_runner_twice(make: Any) -> list[Any]:
    runner = make()
    failed = await _first_call(runner)
    second = await _first_call(runner)  # the same runner, iterated again
    return [failed, second]


SCENARIOS = {"two-runners": _two_runners, "same-runner-twice": _same_runner_twice}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync-tool", "async-tool"])
def test_stock_runner_runs_the_tool_again_after_a_failed_post(
    tmp_path: Path, run: toolledger.Run, scenario: str, is_async: bool
) -> None:
    """#1749 as shipped: the call whose result post failed runs a second time."""
    box = Outbox()
    fake = FakeSession(tmp_path / "session.json", fail_posts=1)
    calls = asyncio.run(
        SCENARIOS[scenario](_runners("stock", run, fake, box.tool(is_async=is_async)))
    )
    assert [c.posted for c in calls] == [False, True]
    assert box.sent == ["ana@example.com", "ana@example.com"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("is_async", [False, True], ids=["sync-tool", "async-tool"])
def test_guarded_runner_runs_the_tool_once_and_posts_the_stored_result(
    tmp_path: Path, run: toolledger.Run, scenario: str, is_async: bool
) -> None:
    """Guarded: one execution; every post attempt carries the same bytes."""
    box = Outbox()
    fake = FakeSession(tmp_path / "session.json", fail_posts=1)
    calls = asyncio.run(
        SCENARIOS[scenario](_runners("guarded", run, fake, box.tool(is_async=is_async)))
    )
    assert [c.posted for c in calls] == [False, True]
    assert box.sent == ["ana@example.com"]
    assert len(fake.raw_posts) == 2
    assert fake.raw_posts[0] == fake.raw_posts[1]
    assert fake.posts[0] == {
        "type": "user.custom_tool_result",
        "custom_tool_use_id": CALL_EVENT_ID,
        "is_error": False,
        "content": [{"type": "text", "text": "sent to ana@example.com"}],
    }
    rec = run.store.get(run.namespace, CALL_EVENT_ID)
    assert rec.result.payload == "sent to ana@example.com"
    assert fake.terminated


def test_guarded_runner_error_result_is_posted_as_error(
    tmp_path: Path, run: toolledger.Run
) -> None:
    """A tool error (``on_error="result"``) is stored and posted with ``is_error``."""

    @beta_tool
    def send_email(to: str) -> str:
        """Send one email."""
        raise ValueError("mailbox full")

    fake = FakeSession(tmp_path / "session.json")
    runner = guarded_session_tool_runner(
        run, fake.client(), SESSION_ID, tools=[send_email], on_error="result"
    )
    asyncio.run(runner.until_done())
    (post,) = fake.posts
    assert post["is_error"] is True
    assert "mailbox full" in post["content"][0]["text"]


def _child(db: Path, folder: Path, kind: str, mode: str) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(CHILD), str(db), str(folder), kind, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "executions"), [("stock", 2), ("guarded", 1)])
def test_sigkill_while_posting_then_a_new_process(
    tmp_path: Path, kind: str, executions: int
) -> None:
    """Two processes, SIGKILL between: stock runs the tool twice, guarded once (same bytes)."""
    db = tmp_path / "ledger.db"
    first = _child(db, tmp_path, kind, "kill")
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = _child(db, tmp_path, kind, "plain")
    assert second.returncode == 0, second.stderr
    effects = (tmp_path / "effects.log").read_text().splitlines()
    assert effects == ["ana@example.com"] * executions
    fake = FakeSession(tmp_path / "session.json")
    assert fake.terminated
    assert len(fake.raw_posts) == 2
    if kind == "guarded":
        assert fake.raw_posts[0] == fake.raw_posts[1]
