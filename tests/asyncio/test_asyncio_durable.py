"""kova.asyncio with the journal: bridged.run / resume / stream take ``journal=`` and
``turn_id=`` (and ``deps=``) as the trio agent's do, on the standard loop and on uvloop.

A turn cancelled from asyncio mid-tool keeps what it recorded, and the next run goes on from
there without repeating finished calls; a paused turn resumes through the journal; the
journal's errors cross as themselves.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
import trio
from bridge_helpers import LOOPS, run_on

import kova
import kova.asyncio
import kova.errors
from kova import Message, ToolAnnotations, ToolUse
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.durable import JournalError, SqliteJournal, TurnClaimedError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import ToolContext, tool

if TYPE_CHECKING:
    from pathlib import Path

    from kova.agent import Agent, AgentResponse

HISTORY = [Message.user("check the weather and charge the card")]


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Counted:
    """Tools that count their runs; ``charge`` (not idempotent) hangs on its first run until
    the turn is cancelled, after ``weather`` has finished."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.charging = asyncio.Event()

    def agent(self, *replies: Any, defer: bool = False) -> Agent:
        counted = self

        @tool(annotations=ToolAnnotations(read_only=True))
        async def weather(city: str, ctx: ToolContext) -> str:
            """The weather."""
            counted.runs.append("weather")
            return f"{city}: sunny for {ctx.deps}"

        @tool
        async def charge(amount: int) -> str:
            """Charge a card (not idempotent)."""
            counted.runs.append("charge")
            if counted.runs.count("charge") == 1 and not defer:
                counted.charging.set()
                await trio.sleep_forever()
            return f"charged {amount}"

        if defer:  # one step with both calls, deferred together
            calls = [reply_tool_calls(("weather", {"city": "Oslo"}), ("charge", {"amount": 5}))]
        else:  # weather's step is recorded before charge's model call is sent
            calls = [
                reply_tool_calls(("weather", {"city": "Oslo"})),
                reply_tool_calls(ToolUse(id="call_2", name="charge", input={"amount": 5})),
            ]
        script = ScriptedProvider([*calls, *replies])
        builder = AgentBuilder().provider(script).tools(weather, charge)
        if defer:
            builder.defer_approvals()
        return builder.build()


def test_a_journaled_run_cancelled_from_asyncio_goes_on_without_repeating(
    loop: str, tmp_path: Path
) -> None:
    counted = Counted()

    async def main() -> tuple[AgentResponse, AgentResponse, Any]:
        journal = SqliteJournal(tmp_path / "j.db")
        async with kova.asyncio.open_agent(counted.agent(reply_text("done"))) as bridged:
            turn = asyncio.create_task(
                bridged.run(HISTORY, journal=journal, turn_id="t", deps="ann")
            )
            await counted.charging.wait()
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            record = await bridged.runtime.run(journal.load, "t")
            response = await bridged.run(HISTORY, journal=journal, turn_id="t", deps="ann")
            again = await bridged.run(HISTORY, journal=journal, turn_id="t")
        return response, again, record

    response, again, record = run_on(loop, main)
    assert record.unfinished == {"call_2"}
    assert sorted(counted.runs) == ["charge", "weather"]  # neither ran twice
    weather, charge = (message.content[0] for message in response.new_messages[1:4:2])
    assert weather.text == "Oslo: sunny for ann"  # deps crossed to the tool
    assert "may or may not have taken effect" in charge.text
    assert response.text == "done"
    assert again == response  # finished: the recorded response, nothing run or sent


def test_a_journaled_pause_resumes_through_the_bridge(loop: str, tmp_path: Path) -> None:
    counted = Counted()

    async def main() -> tuple[AgentResponse, AgentResponse, list[object]]:
        journal = SqliteJournal(tmp_path / "j.db")
        agent = counted.agent(reply_text("done"), defer=True)
        async with kova.asyncio.open_agent(agent) as bridged:
            paused = await bridged.run(HISTORY, journal=journal, turn_id="t", deps="bo")
            assert paused.pending is not None
            history = [*HISTORY, *paused.new_messages]
            again = await bridged.run(HISTORY, journal=journal, turn_id="t")
            assert again.pending == paused.pending  # the recorded pause
            decided = paused.pending.approve("call_2")
            with pytest.raises(JournalError, match="not paused at this history"):
                await bridged.resume(
                    [Message.user("other"), *history[1:]], decided, journal=journal, turn_id="t"
                )
            with pytest.raises(kova.errors.ApprovalMismatchError):
                await bridged.resume(history, paused.pending, journal=journal, turn_id="t")
            with pytest.raises(TypeError, match="turn_id"):
                await bridged.resume(history, decided, journal=journal)
            assert counted.runs == ["weather"]  # the read-only call; nothing else ran
            resumed = await bridged.resume(history, decided, journal=journal, turn_id="t")
            # Resumed again, streamed: the recorded outcome, nothing run or sent.
            stream = bridged.stream(history, resume=decided, journal=journal, turn_id="t")
            events = [event async for event in stream]
        return paused, resumed, events

    _, resumed, events = run_on(loop, main)
    assert resumed.text == "done"
    results = {block.tool_use_id: block.text for block in resumed.new_messages[0].content}
    assert results == {"call_1": "Oslo: sunny for bo", "call_2": "charged 5"}
    assert sorted(counted.runs) == ["charge", "weather"]
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].response == resumed


def test_a_journaled_stream_goes_on_where_a_cancelled_one_stopped(
    loop: str, tmp_path: Path
) -> None:
    counted = Counted()

    async def main() -> list[object]:
        journal = SqliteJournal(tmp_path / "j.db")
        async with kova.asyncio.open_agent(counted.agent(reply_text("sorry"))) as bridged:

            async def consume() -> None:
                async with bridged.stream(HISTORY, journal=journal, turn_id="s") as events:
                    async for _ in events:
                        pass

            first = asyncio.create_task(consume())
            await counted.charging.wait()
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            stream = bridged.stream(HISTORY, journal=journal, turn_id="s", deps="cy")
            return [event async for event in stream]

    events = run_on(loop, main)
    assert counted.runs.count("charge") == 1  # interrupted, not idempotent: never again
    finished = {e.call.name: e for e in events if isinstance(e, ToolCallFinished)}
    started = [e.call.name for e in events if isinstance(e, ToolCallStarted)]
    # The weather step was recorded: the continued stream goes on from charge's step.
    assert started == list(finished) == ["charge"]
    assert counted.runs.count("weather") == 1
    assert "may or may not have taken effect" in finished["charge"].result.text
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].response.text == "sorry"


def test_a_second_runner_of_a_turn_is_refused_across_the_bridge(loop: str, tmp_path: Path) -> None:
    counted = Counted()

    async def main() -> BaseException:
        journal = SqliteJournal(tmp_path / "j.db")
        async with kova.asyncio.open_agent(counted.agent(reply_text("done"))) as bridged:
            first = asyncio.create_task(bridged.run(HISTORY, journal=journal, turn_id="t"))
            await counted.charging.wait()
            with pytest.raises(TurnClaimedError) as caught:
                await bridged.run(HISTORY, journal=journal, turn_id="t")
            with pytest.raises(TypeError, match="SqliteJournal"):
                await bridged.run(HISTORY, journal="j.db", turn_id="u")  # type: ignore[arg-type]
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            return caught.value

    error = run_on(loop, main)
    assert isinstance(error, kova.errors.KovaError)
    assert counted.runs.count("charge") == 1
