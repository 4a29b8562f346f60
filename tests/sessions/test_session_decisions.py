"""A decided pause on a session runs once, across processes: the resume records its
decisions (their nonce) in the session store before the turn goes on, so a second resume of
the same decisions -- in another process, after the first died halfway -- is refused with
ApprovalMismatchError, never run again; a resume that fails or is cancelled gives them back.
With a journal the journal records them instead (and a crashed resume goes on from it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import ToolResult
from kova._record import evolve
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted
from kova.errors import ApprovalMismatchError, ProviderError
from kova.sessions import PostgresSessionStore, SessionWrite, SqliteSessionStore
from kova.testing import ErrorReply, FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kova.agent import Agent
    from kova.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("decisions_worker.py")


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    opened: SessionStore
    if request.param == "sqlite":
        opened = SqliteSessionStore(tmp_path / "sessions.db")
    else:
        opened = PostgresSessionStore(request.getfixturevalue("postgres_db"))
    async with opened:
        yield opened


class Charges:
    def __init__(self) -> None:
        self.runs = 0
        self.fail_model = False

    def agent(self) -> Agent:
        @tool
        async def charge(amount: int) -> str:
            """Charge the card."""
            self.runs += 1
            return f"charged {amount}"

        def model(request: ScriptRequest) -> Any:
            if isinstance(request.messages[-1].content[0], ToolResult):
                if self.fail_model:
                    return ErrorReply(status_code=400, message="refused")
                return reply_text("done")
            return reply_tool_calls(("charge", {"amount": 5}))

        builder = AgentBuilder().provider(FunctionProvider(model)).tool(charge)
        builder.retry_config(RetryConfig(max_retries=0)).defer_approvals()
        return builder.build()


async def test_decisions_a_resume_took_and_never_finished_are_refused(
    store: SessionStore,
) -> None:
    charges = Charges()
    session = store.session("c")
    async with charges.agent() as agent:
        await agent.run("charge 5", session=session)
        pending = await session.pending()
        assert pending is not None
        decided = pending.approve(pending.calls[0].id)
        # What a resume in a process that then died left behind: its decisions taken.
        state = await store.read("c")
        await store.write(
            "c",
            SessionWrite(
                version=state.version,
                keep=len(state.messages),
                pending=state.pending,
                resumed=decided.nonce,
            ),
        )
    async with charges.agent() as other:  # another agent: its own once-per-agent record
        with pytest.raises(ApprovalMismatchError, match="already used"):
            await other.resume(decided, session=session)
        with pytest.raises(ApprovalMismatchError, match="already used"):
            async with other.stream(resume=decided, session=session) as events:
                [event async for event in events]
    assert charges.runs == 0
    assert await session.rewind() == 2  # what the refusal says to do
    assert await session.pending() is None


async def test_decisions_for_another_pause_are_refused(store: SessionStore) -> None:
    charges = Charges()
    session = store.session("c")
    async with charges.agent() as agent:
        await agent.run("charge 5", session=session)
        pending = await session.pending()
        assert pending is not None
        other = evolve(pending.approve(pending.calls[0].id), message="another message")
        with pytest.raises(ApprovalMismatchError, match="other calls than the ones session 'c'"):
            await agent.resume(other, session=session)
    assert charges.runs == 0
    assert (await store.read("c")).resumed is None


async def test_a_failed_or_cancelled_resume_gives_its_decisions_back(
    store: SessionStore,
) -> None:
    charges = Charges()
    session = store.session("c")
    async with charges.agent() as agent:
        await agent.run("charge 5", session=session)
        pending = await session.pending()
        assert pending is not None
        decided = pending.approve(pending.calls[0].id)
        charges.fail_model = True
        with pytest.raises(ProviderError):
            await agent.resume(decided, session=session)
        assert (await store.read("c")).resumed is None
        with trio.CancelScope() as scope:
            async with agent.stream(resume=decided, session=session) as events:
                async for _ in events:
                    scope.cancel()
        assert (await store.read("c")).resumed is None
        charges.fail_model = False
    async with charges.agent() as other:
        response = await other.resume(decided, session=session)
    assert response.text == "done"
    state = await store.read("c")
    assert (state.pending, state.resumed) == (None, None)


async def test_a_streamed_resume_takes_the_decisions_while_it_runs(store: SessionStore) -> None:
    charges = Charges()
    session = store.session("c")
    async with charges.agent() as agent:
        await agent.run("charge 5", session=session)
        pending = await session.pending()
        assert pending is not None
        decided = pending.approve(pending.calls[0].id)
        async with agent.stream(resume=decided, session=session) as events:
            async for event in events:
                if not isinstance(event, TurnCompleted):
                    assert (await store.read("c")).resumed == decided.nonce
    assert (await store.read("c")).resumed is None
    assert charges.runs == 1


# -- across processes --------------------------------------------------------------------------


def _run(where: list[str], counts: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), *where, str(counts), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_resume_killed_in_its_tool_is_not_run_again_by_another_process(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = (
        ["sqlite", str(tmp_path / "s.db")]
        if kind == "sqlite"
        else ["postgres", request.getfixturevalue("postgres_db")]
    )
    counts = tmp_path / "charges"
    paused = _run(where, counts, "pause")
    assert paused.stdout.strip() == "paused", paused.stderr[-2000:]
    died = _run(where, counts, "resume", "--die")
    assert died.returncode == -9, died.stderr[-2000:]
    assert counts.read_text().splitlines() == ["charged"]
    again = _run(where, counts, "resume")
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("refused: these decisions were already used"), again.stdout
    assert counts.read_text().splitlines() == ["charged"]  # the charge ran once
