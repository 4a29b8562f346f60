"""agent.run(history, journal=, turn_id=): a turn that goes on after its process dies."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio

from kova import Message, ToolAnnotations
from kova.agent import AgentBuilder
from kova.durable import JournalError, SqliteJournal, TurnClaimedError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

HISTORY = [Message.user("book the room and check the weather")]

# One program, run as a child process: its tools count their runs in a file, and it kills
# itself (SIGKILL: no cleanup, no finally) where the test asks.
PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, trio
    from kova import Message, ToolAnnotations, ToolResult
    from kova.agent import AgentBuilder
    from kova.durable import SqliteJournal
    from kova.testing import FunctionProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    journal_path, counts_path, kill_at = sys.argv[1], sys.argv[2], sys.argv[3]

    def count(name):
        counts = json.loads(open(counts_path).read()) if os.path.exists(counts_path) else {}
        counts[name] = counts.get(name, 0) + 1
        with open(counts_path, "w") as file:
            file.write(json.dumps(counts))

    async def die_if(point):
        if kill_at == point:
            # Die once weather's result is in the journal (its commit, not a race with it).
            import sqlite3
            while True:
                with sqlite3.connect(journal_path) as db:
                    row = db.execute(
                        "SELECT result FROM kova_tool_calls WHERE call_id = 'call_1'"
                    ).fetchone()
                if row and row[0]:
                    break
                await trio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

    def die_now(point):
        if kill_at == point:
            os.kill(os.getpid(), signal.SIGKILL)

    @tool
    async def weather(city: str) -> str:
        \"\"\"The weather.\"\"\"
        count("weather")
        return f"{city}: sunny"

    @tool(annotations=ToolAnnotations(idempotent=True))
    async def lookup(room: str) -> str:
        \"\"\"Look a room up (idempotent).\"\"\"
        count("lookup")
        await trio.sleep(0.2)
        await die_if("lookup")
        return f"{room}: free"

    @tool
    async def book(room: str) -> str:
        \"\"\"Book a room (not idempotent).\"\"\"
        count("book")
        await trio.sleep(0.2)
        await die_if("book")
        return f"{room}: booked"

    def model(request):
        count("model")
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
        if not results:
            die_now("first-model-call")
            return reply_tool_calls(
                ("weather", {"city": "Oslo"}), ("lookup", {"room": "A"}), ("book", {"room": "A"})
            )
        die_now("second-model-call")
        return reply_text(" | ".join(r.text for r in results))

    async def main():
        agent = AgentBuilder().provider(FunctionProvider(model)).tools(weather, lookup, book)
        async with agent.build() as running:
            response = await running.run(
                [Message.user("book the room and check the weather")],
                journal=SqliteJournal(journal_path),
                turn_id="turn-1",
            )
        print(json.dumps({"text": response.text, "messages": len(response.new_messages)}))

    trio.run(main)
    """
)


async def _run(tmp_path: Path, kill_at: str) -> tuple[int, dict[str, object] | None]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    result = await trio.run_process(
        [sys.executable, str(script), str(tmp_path / "j.db"), str(tmp_path / "n.json"), kill_at],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if result.returncode == 0:
        return 0, json.loads(result.stdout)
    assert result.returncode == -9, result.stderr.decode()[-2000:]
    return result.returncode, None


def _counts(tmp_path: Path) -> dict[str, int]:
    counts: dict[str, int] = json.loads((tmp_path / "n.json").read_text())
    return counts


async def test_killed_mid_tool_goes_on_without_repeating_finished_calls(tmp_path: Path) -> None:
    code, _ = await _run(tmp_path, "book")
    assert code == -9
    # weather finished and lookup finished or was interrupted; book was interrupted.
    assert _counts(tmp_path)["book"] == 1
    code, output = await _run(tmp_path, "none")
    assert code == 0
    assert output is not None
    counts = _counts(tmp_path)
    assert counts["weather"] == 1  # recorded: not run again
    assert counts["book"] == 1  # not idempotent: never run twice
    assert counts["model"] == 2  # the first reply was recorded: one call after the restart
    assert "Oslo: sunny" in str(output["text"])
    assert "may or may not have taken effect" in str(output["text"])


async def test_killed_mid_idempotent_tool_runs_it_again(tmp_path: Path) -> None:
    code, _ = await _run(tmp_path, "lookup")
    assert code == -9
    code, output = await _run(tmp_path, "none")
    assert code == 0
    assert output is not None
    counts = _counts(tmp_path)
    assert counts["lookup"] == 2  # idempotent: run again
    assert "A: free" in str(output["text"])
    # book ran concurrently with lookup before the kill, and was interrupted too.
    assert counts["book"] == 1


async def test_killed_mid_model_call_sends_only_that_call_again(tmp_path: Path) -> None:
    code, _ = await _run(tmp_path, "second-model-call")
    assert code == -9
    assert _counts(tmp_path) == {"model": 2, "weather": 1, "lookup": 1, "book": 1}
    code, output = await _run(tmp_path, "none")
    assert code == 0
    assert output is not None
    assert output["messages"] == 3  # the assistant's calls, the results, the answer
    assert _counts(tmp_path) == {"model": 3, "weather": 1, "lookup": 1, "book": 1}
    assert output["text"] == "Oslo: sunny | A: free | A: booked"
    code, again = await _run(tmp_path, "first-model-call")  # finished: answered from the journal
    assert (code, again) == (0, output)
    assert _counts(tmp_path)["model"] == 3


async def test_a_second_runner_of_the_same_turn_is_refused(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    holding = trio.Event()

    @tool
    async def slow(room: str) -> str:
        """Hold the turn a while."""
        holding.set()
        await trio.sleep(10)
        return "done"

    provider = ScriptedProvider([reply_tool_calls(("slow", {"room": "A"})), reply_text("ok")])
    async with AgentBuilder().provider(provider).tool(slow).build() as agent:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: agent.run(HISTORY, journal=journal, turn_id="t")  # type: ignore[arg-type,return-value]
            )
            await holding.wait()
            with pytest.raises(TurnClaimedError):
                await agent.run(HISTORY, journal=journal, turn_id="t")
            nursery.cancel_scope.cancel()


async def test_a_turn_id_names_one_turn(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    provider = ScriptedProvider([reply_text("first")])
    async with AgentBuilder().provider(provider).build() as agent:
        response = await agent.run(HISTORY, journal=journal, turn_id="t")
        assert response.text == "first"
        again = await agent.run(HISTORY, journal=journal, turn_id="t")  # no second reply needed
        assert again.new_messages == response.new_messages
        with pytest.raises(JournalError, match="began from another history"):
            await agent.run([Message.user("something else")], journal=journal, turn_id="t")
        with pytest.raises(TypeError, match="turn_id"):
            await agent.run(HISTORY, journal=journal)
        with pytest.raises(TypeError, match="SqliteJournal"):
            await agent.run(HISTORY, journal="turns.db", turn_id="t")  # type: ignore[arg-type]
        # A turn_id without a journal says so (before: "journal must be a
        # kova.durable.SqliteJournal, got NoneType", for a journal nobody passed).
        with pytest.raises(TypeError, match=r"turn_id= names a turn in a journal: pass journal="):
            await agent.run(HISTORY, turn_id="t")


async def test_a_cancelled_journaled_turn_produces_nothing_and_goes_on_later(
    tmp_path: Path,
) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    calls: list[str] = []

    @tool(annotations=ToolAnnotations(read_only=True))
    async def read(name: str) -> str:
        """Read something slowly."""
        calls.append(name)
        if len(calls) == 1:
            await trio.sleep_forever()
        return f"{name} read"

    provider = ScriptedProvider([reply_tool_calls(("read", {"name": "x"})), reply_text("fine")])
    async with AgentBuilder().provider(provider).tool(read).build() as agent:
        with trio.move_on_after(1):
            await agent.run(HISTORY, journal=journal, turn_id="t")
        record = await journal.load("t")
        assert record is not None
        assert record.unfinished == {"call_1"}
        response = await agent.run(HISTORY, journal=journal, turn_id="t")
    assert response.text == "fine"
    assert calls == ["x", "x"]  # read-only: run again after the interruption


async def test_a_journaled_stream_records_and_a_later_stream_goes_on(tmp_path: Path) -> None:
    from kova.agent import ToolCallFinished, ToolCallStarted, TurnCompleted

    journal = SqliteJournal(tmp_path / "j.db")
    calls: list[str] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge a card (not idempotent)."""
        calls.append("charge")
        await trio.sleep_forever()
        return "charged"  # pragma: no cover

    provider = ScriptedProvider([reply_tool_calls(("charge", {"amount": 5})), reply_text("sorry")])
    async with AgentBuilder().provider(provider).tool(charge).build() as agent:
        with trio.move_on_after(1):
            async with agent.stream(HISTORY, journal=journal, turn_id="s") as events:
                async for _ in events:
                    pass
        async with agent.stream(HISTORY, journal=journal, turn_id="s") as events:
            seen = [event async for event in events]
    assert calls == ["charge"]  # interrupted, not idempotent: never run twice
    started = [e for e in seen if isinstance(e, ToolCallStarted)]
    finished = [e for e in seen if isinstance(e, ToolCallFinished)]
    assert [e.call.name for e in started] == ["charge"]
    assert "may or may not have taken effect" in finished[0].result.text
    assert isinstance(seen[-1], TurnCompleted)
    assert seen[-1].response.text == "sorry"


async def test_a_journaled_stream_records_each_call_as_it_finishes(tmp_path: Path) -> None:
    """A streamed step records a call's result when the call ends, not when the step does:
    cancelled while its other call still runs, the finished call's result is kept."""
    from kova.agent import ToolCallFinished

    journal = SqliteJournal(tmp_path / "j.db")
    runs: list[str] = []

    @tool
    async def quick(name: str) -> str:
        """Answer at once (not idempotent)."""
        runs.append("quick")
        return f"{name} done"

    @tool(annotations=ToolAnnotations(read_only=True))
    async def slow(name: str) -> str:
        """Answer on the second try."""
        runs.append("slow")
        if runs.count("slow") == 1:
            await trio.sleep_forever()
        return f"{name} read"

    provider = ScriptedProvider(
        [reply_tool_calls(("quick", {"name": "a"}), ("slow", {"name": "b"})), reply_text("ok")]
    )
    async with AgentBuilder().provider(provider).tools(quick, slow).build() as agent:
        with trio.move_on_after(1):
            async with agent.stream(HISTORY, journal=journal, turn_id="s") as events:
                async for _ in events:
                    pass
        record = await journal.load("s")
        assert record is not None
        assert record.unfinished == {"call_2"}
        async with agent.stream(HISTORY, journal=journal, turn_id="s") as events:
            seen = [event async for event in events]
    assert sorted(runs) == ["quick", "slow", "slow"]  # the recorded call is not run again
    results = {e.call.name: e.result.text for e in seen if isinstance(e, ToolCallFinished)}
    assert results == {"quick": "a done", "slow": "b read"}


async def test_a_lone_surrogate_is_journaled_and_read_back_intact(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.db")
    history = [Message.user("half an emoji: \ud83d")]
    provider = ScriptedProvider([reply_text("back: \udc80")])
    async with AgentBuilder().provider(provider).build() as agent:
        first = await agent.run(history, journal=journal, turn_id="t")
        again = await agent.run(history, journal=journal, turn_id="t")
    assert first.text == again.text == "back: \udc80"


async def test_a_call_id_with_a_lone_surrogate_is_journaled_and_answered_again(
    tmp_path: Path,
) -> None:
    """Half an emoji in a model's call id: the journal stores the call (escaped) and a
    rerun answers it from the journal without running the tool again (issue 43's
    journaled leftover: it raised a raw ValueError)."""
    journal = SqliteJournal(tmp_path / "j.db")
    ran: list[str] = []

    @tool
    def charge(amount: int) -> str:
        """Charge an amount."""
        ran.append("charge")
        return f"charged {amount}"

    from kova import ToolUse

    call = ToolUse(id="call_\ud83d", name="charge", input={"amount": 5})
    provider = ScriptedProvider([reply_tool_calls(call), reply_text("done")])
    async with AgentBuilder().provider(provider).tool(charge).build() as agent:
        response = await agent.run(HISTORY, journal=journal, turn_id="t")
        assert response.text == "done"
        again = await agent.run(HISTORY, journal=journal, turn_id="t")
    assert again.new_messages == response.new_messages
    assert ran == ["charge"]
