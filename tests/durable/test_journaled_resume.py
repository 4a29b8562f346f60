"""agent.resume(history, pending, journal=, turn_id=): deferred approvals saved in the journal
resume through it, and a crash during the resumed part goes on without repeating finished
calls; SqliteJournal(rerun_interrupted=...) overrides the annotations per tool."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio

from kova import Message, ToolAnnotations
from kova.agent import AgentBuilder, ToolCallFinished, ToolCallStarted, TurnCompleted
from kova.durable import JournalError, SqliteJournal
from kova.errors import ApprovalMismatchError
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path

    from kova.agent import Agent, AgentResponse

# One program, run as a child process in three phases: "pause" runs the journaled turn until
# it pauses (book and lookup are left to a person: not read-only) and saves the history and
# the pending calls; "resume" approves them and resumes through the journal; "run" continues
# with agent.run (the resumed history, the same turn id). The tools count their runs in a
# file; the program kills itself (SIGKILL: no cleanup) where the test asks.
PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, trio
    from kova import Message, Secret, ToolAnnotations, ToolResult
    from kova import messages_from_json, messages_to_json
    from kova.agent import AgentBuilder, PendingApprovals
    from kova.durable import SqliteJournal
    from kova.testing import FunctionProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    journal_path, state_path, counts_path, phase, kill_at = sys.argv[1:6]
    rerun = json.loads(sys.argv[6])

    def count(name):
        counts = json.loads(open(counts_path).read()) if os.path.exists(counts_path) else {}
        counts[name] = counts.get(name, 0) + 1
        with open(counts_path, "w") as file:
            file.write(json.dumps(counts))

    async def die_once_recorded(point, call_id):
        # Die once the other call's result is committed to the journal (not a race with it).
        if kill_at != point:
            return
        import sqlite3
        while True:
            with sqlite3.connect(journal_path) as db:
                row = db.execute(
                    "SELECT result FROM kova_tool_calls WHERE call_id = ?", (call_id,)
                ).fetchone()
            if row and row[0]:
                break
            await trio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)

    @tool(annotations=ToolAnnotations(read_only=True))
    async def weather(city: str) -> str:
        \"\"\"The weather (read-only: never deferred).\"\"\"
        count("weather")
        return f"{city}: sunny"

    @tool(annotations=ToolAnnotations(idempotent=True))
    async def lookup(room: str) -> str:
        \"\"\"Look a room up (idempotent).\"\"\"
        count("lookup")
        await trio.sleep(0.2)
        await die_once_recorded("lookup", "call_3")
        return f"{room}: free"

    @tool
    async def book(room: str) -> str:
        \"\"\"Book a room (not idempotent).\"\"\"
        count("book")
        await trio.sleep(0.2)
        await die_once_recorded("book", "call_2")
        return f"{room}: booked"

    def model(request):
        count("model")
        results = [b for m in request.messages for b in m.content if isinstance(b, ToolResult)]
        if not results:
            return reply_tool_calls(
                ("weather", {"city": "Oslo"}), ("lookup", {"room": "A"}), ("book", {"room": "A"})
            )
        if kill_at == "model-after-resume":
            os.kill(os.getpid(), signal.SIGKILL)
        return reply_text(" | ".join(r.text for r in results))

    async def main():
        journal = SqliteJournal(journal_path, rerun_interrupted=rerun)
        builder = AgentBuilder().provider(FunctionProvider(model)).tools(weather, lookup, book)
        builder = builder.approval_key(Secret("a test key, 32 characters long.."))
        async with builder.defer_approvals().build() as agent:
            if phase == "pause":
                history = [Message.user("book the room and check the weather")]
                response = await agent.run(history, journal=journal, turn_id="turn-1")
                with open(state_path, "w") as file:
                    json.dump({
                        "history": messages_to_json([*history, *response.new_messages]),
                        "pending": response.pending.to_json(),
                    }, file)
                print(json.dumps({"pending": [c.name for c in response.pending.calls]}))
                return
            state = json.loads(open(state_path).read())
            history = messages_from_json(state["history"])
            if phase == "resume":
                pending = PendingApprovals.from_json(state["pending"])
                for call in pending.calls:
                    pending = pending.approve(call.id)
                response = await agent.resume(history, pending, journal=journal, turn_id="turn-1")
            else:
                response = await agent.run(history, journal=journal, turn_id="turn-1")
        print(json.dumps({"text": response.text, "messages": len(response.new_messages)}))

    trio.run(main)
    """
)


async def _run(
    tmp_path: Path, phase: str, kill_at: str = "none", rerun: dict[str, bool] | None = None
) -> dict[str, object] | None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    paths = [tmp_path / name for name in ("j.db", "state.json", "n.json")]
    result = await trio.run_process(
        [sys.executable, str(script), *map(str, paths), phase, kill_at, json.dumps(rerun or {})],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if result.returncode == 0:
        output: dict[str, object] = json.loads(result.stdout)
        return output
    assert result.returncode == -9, result.stderr.decode()[-2000:]
    return None


def _counts(tmp_path: Path) -> dict[str, int]:
    counts: dict[str, int] = json.loads((tmp_path / "n.json").read_text())
    return counts


@pytest.fixture(scope="module")
def paused_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The journal, state and counts of the turn run once until it paused (copied into each
    test's own folder: one child process less per test)."""
    folder = tmp_path_factory.mktemp("paused")
    (folder / "program.py").write_text(PROGRAM)
    paths = [folder / name for name in ("j.db", "state.json", "n.json")]
    result = subprocess.run(
        [sys.executable, str(folder / "program.py"), *map(str, paths), "pause", "none", "{}"],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert json.loads(result.stdout) == {"pending": ["lookup", "book"]}
    return folder


@pytest.fixture
def paused(paused_files: Path, tmp_path: Path) -> Path:
    for name in ("j.db", "j.db-wal", "j.db-shm", "state.json", "n.json"):
        if (paused_files / name).exists():
            shutil.copy(paused_files / name, tmp_path / name)
    assert _counts(tmp_path) == {"model": 1, "weather": 1}
    return tmp_path


@pytest.mark.parametrize("again", ["resume", "run"])
async def test_a_resume_killed_mid_tool_goes_on_without_repeating_finished_calls(
    paused: Path, again: str
) -> None:
    tmp_path = paused
    assert await _run(tmp_path, "resume", kill_at="book") is None  # SIGKILLed
    assert _counts(tmp_path) == {"model": 1, "weather": 1, "lookup": 1, "book": 1}
    # Resumed again (the same decisions), or run with the resumed history: the same turn.
    output = await _run(tmp_path, again)
    assert output is not None
    # lookup's result was recorded: not run again; book was interrupted and is not
    # idempotent: answered in-band, never run twice; weather ran before the pause.
    assert _counts(tmp_path) == {"model": 2, "weather": 1, "lookup": 1, "book": 1}
    text = str(output["text"])
    assert text.startswith("Oslo: sunny | A: free | ")
    assert "may or may not have taken effect" in text
    assert output["messages"] == 2  # the resumed part's: the results, then the answer
    if again == "resume":
        # Finished: answered from the journal, nothing sent or run.
        assert await _run(tmp_path, "resume", kill_at="book") == output
        assert _counts(tmp_path)["model"] == 2


async def test_a_resume_killed_mid_idempotent_tool_runs_it_again(paused: Path) -> None:
    tmp_path = paused
    assert await _run(tmp_path, "resume", kill_at="lookup") is None
    output = await _run(tmp_path, "resume")
    assert output is not None
    counts = _counts(tmp_path)
    assert counts["lookup"] == 2  # idempotent: run again
    assert counts["book"] == 1  # finished before the kill: its result recorded
    assert output["text"] == "Oslo: sunny | A: free | A: booked"


async def test_a_resume_killed_mid_model_call_sends_only_that_call_again(paused: Path) -> None:
    tmp_path = paused
    assert await _run(tmp_path, "resume", kill_at="model-after-resume") is None
    assert _counts(tmp_path) == {"model": 2, "weather": 1, "lookup": 1, "book": 1}
    output = await _run(tmp_path, "resume")
    assert output == {"text": "Oslo: sunny | A: free | A: booked", "messages": 2}
    assert _counts(tmp_path) == {"model": 3, "weather": 1, "lookup": 1, "book": 1}


@pytest.mark.parametrize(
    ("rerun", "counts", "interrupted"),
    [
        # book is not idempotent, but the host says its calls may run again.
        ({"book": True}, {"lookup": 1, "book": 2}, None),
        # lookup is annotated idempotent, but the host says no.
        ({"lookup": False}, {"lookup": 1, "book": 1}, "rerun_interrupted"),
    ],
)
async def test_rerun_interrupted_overrides_the_annotations_per_tool(
    paused: Path, rerun: dict[str, bool], counts: dict[str, int], interrupted: str | None
) -> None:
    tmp_path = paused
    killed_in = "book" if "book" in rerun else "lookup"
    assert await _run(tmp_path, "resume", kill_at=killed_in, rerun=rerun) is None
    output = await _run(tmp_path, "resume", rerun=rerun)
    assert output is not None
    assert {name: _counts(tmp_path)[name] for name in counts} == counts
    if interrupted is None:
        assert "may or may not" not in str(output["text"])
    else:
        assert f"because the journal's {interrupted}" in str(output["text"])


# --- in this process -----------------------------------------------------------------------


RUNS: list[str] = []


@tool
async def send(to: str) -> str:
    """Send a message (not read-only: deferred)."""
    RUNS.append(to)
    return f"sent to {to}"


def _agent(*replies: object) -> Agent:
    provider = ScriptedProvider(
        [reply_tool_calls(("send", {"to": "ann"}), ("send", {"to": "bob"})), *replies]  # type: ignore[list-item]
    )
    return AgentBuilder().provider(provider).tool(send).defer_approvals().build()


async def _pause(
    agent: Agent, journal: SqliteJournal, turn_id: str = "t"
) -> tuple[list[Message], AgentResponse]:
    history = [Message.user("tell ann and bob")]
    paused = await agent.run(history, journal=journal, turn_id=turn_id)
    assert paused.pending is not None
    return [*history, *paused.new_messages], paused


async def test_a_journaled_resume_is_recorded_and_answers_again(tmp_path: Path) -> None:
    RUNS.clear()
    journal = SqliteJournal(tmp_path / "j.db")
    async with _agent(reply_text("done")) as agent:
        history, paused = await _pause(agent, journal)
        assert paused.pending is not None
        # Run again before deciding: the journal answers with the same pause.
        again = await agent.run(history[:1], journal=journal, turn_id="t")
        assert again.pending == paused.pending
        decided = paused.pending.approve("call_1").deny("call_2", "not bob")
        resumed = await agent.resume(history, decided, journal=journal, turn_id="t")
        assert resumed.text == "done"
        assert len(resumed.new_messages) == 2  # this part's: the results and the answer
        assert RUNS == ["ann"]
        # Resumed again: the recorded outcome, nothing run or sent.
        assert await agent.resume(history, decided, journal=journal, turn_id="t") == resumed
        assert await agent.run(history, journal=journal, turn_id="t") == resumed
    assert RUNS == ["ann"]


async def test_a_journaled_resume_fails_closed(tmp_path: Path) -> None:
    RUNS.clear()
    journal = SqliteJournal(tmp_path / "j.db")
    async with _agent(reply_text("done")) as agent:
        history, paused = await _pause(agent, journal)
        assert paused.pending is not None
        decided = paused.pending.approve("call_1").approve("call_2")
        # The history without the paused part's messages.
        with pytest.raises(ApprovalMismatchError, match="does not end with"):
            await agent.resume(history[:1], decided, journal=journal, turn_id="t")
        # Another history under this turn id.
        with pytest.raises(JournalError, match="not paused at this history"):
            await agent.resume(
                [Message.user("other"), *history[1:]], decided, journal=journal, turn_id="t"
            )
        # Undecided calls.
        with pytest.raises(ApprovalMismatchError):
            await agent.resume(history, paused.pending, journal=journal, turn_id="t")
        # Decisions of another paused turn.
        async with _agent() as other_agent:
            _, elsewhere = await _pause(other_agent, SqliteJournal(tmp_path / "o.db"), "u")
        assert elsewhere.pending is not None
        foreign = elsewhere.pending.approve("call_1").approve("call_2")
        assert foreign.turn_id != decided.turn_id
        with pytest.raises(ApprovalMismatchError, match="other pending calls"):
            await agent.resume(history, foreign, journal=journal, turn_id="t")
        with pytest.raises(TypeError, match="turn_id"):
            await agent.resume(history, decided, journal=journal)
        assert RUNS == []  # nothing ran
        # Still resumable.
        resumed = await agent.resume(history, decided, journal=journal, turn_id="t")
    assert resumed.text == "done"
    assert sorted(RUNS) == ["ann", "bob"]


async def test_a_paused_turn_without_a_journal_is_recorded_from_its_resume(
    tmp_path: Path,
) -> None:
    RUNS.clear()
    journal = SqliteJournal(tmp_path / "j.db")
    async with _agent(reply_text("done")) as agent:
        history = [Message.user("tell ann and bob")]
        paused = await agent.run(history)  # no journal
        assert paused.pending is not None
        history += paused.new_messages
        decided = paused.pending.approve("call_1").approve("call_2")
        resumed = await agent.resume(history, decided, journal=journal, turn_id="r")
        assert resumed.text == "done"
        record = await journal.load("r")
        assert record is not None
        assert set(record.results) == {"call_1", "call_2"}
        assert await agent.resume(history, decided, journal=journal, turn_id="r") == resumed
    assert sorted(RUNS) == ["ann", "bob"]


async def test_a_journaled_resume_streams(tmp_path: Path) -> None:
    RUNS.clear()
    journal = SqliteJournal(tmp_path / "j.db")
    async with _agent(reply_text("done")) as agent:
        history, paused = await _pause(agent, journal)
        assert paused.pending is not None
        decided = paused.pending.approve("call_1").deny("call_2")
        async with agent.stream(history, resume=decided, journal=journal, turn_id="t") as events:
            seen = [event async for event in events]
    started = [e.call.id for e in seen if isinstance(e, ToolCallStarted)]
    finished = [e.call.id for e in seen if isinstance(e, ToolCallFinished)]
    assert sorted(started) == sorted(finished) == ["call_1", "call_2"]  # the denial too
    assert isinstance(seen[-1], TurnCompleted)
    assert seen[-1].response.text == "done"
    assert RUNS == ["ann"]


def test_rerun_interrupted_is_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="rerun_interrupted"):
        SqliteJournal(tmp_path / "j.db", rerun_interrupted=["book"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rerun_interrupted"):
        SqliteJournal(tmp_path / "j.db", rerun_interrupted={"book": "yes"})  # type: ignore[dict-item]
    journal = SqliteJournal(tmp_path / "j.db", rerun_interrupted={"book": True})
    assert dict(journal.rerun_interrupted) == {"book": True}


async def test_the_annotations_decide_without_an_override(tmp_path: Path) -> None:
    # A read-only tool's interrupted call runs again; the override can forbid it.
    calls: list[str] = []

    @tool(annotations=ToolAnnotations(read_only=True))
    async def read(name: str) -> str:
        """Read something slowly."""
        calls.append(name)
        if len(calls) == 1:
            await trio.sleep_forever()
        return f"{name} read"

    for rerun, expected in (({}, ["x", "x"]), ({"read": False}, ["x"])):
        calls.clear()
        journal = SqliteJournal(tmp_path / f"{len(rerun)}.db", rerun_interrupted=rerun)
        provider = ScriptedProvider([reply_tool_calls(("read", {"name": "x"})), reply_text("ok")])
        async with AgentBuilder().provider(provider).tool(read).build() as agent:
            with trio.move_on_after(0.3):
                await agent.run([Message.user("read x")], journal=journal, turn_id="t")
            response = await agent.run([Message.user("read x")], journal=journal, turn_id="t")
        assert response.text == "ok"
        assert calls == expected
