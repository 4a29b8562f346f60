"""A journaled turn records its guards' decisions (issue 50): run again after its process
was killed, it runs no guard that already decided, and a tripped turn stays tripped."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
import trio

from kova import Message
from kova.agent import AgentBuilder, InputGuard, Trip
from kova.durable import SqliteJournal
from kova.errors import GuardrailTripped
from kova.testing import ScriptedProvider, reply_text

if TYPE_CHECKING:
    from pathlib import Path

# One program, run as a child process: its guards, model and tool count their runs in a
# file, and it kills itself (SIGKILL: no cleanup, no finally) where the test asks.
PROGRAM = textwrap.dedent(
    """
    import json, os, signal, sys, trio
    from kova import Message, ToolAnnotations, ToolResult
    from kova.agent import AgentBuilder, InputGuard, OutputGuard, ToolGuard, Trip
    from kova.durable import SqliteJournal
    from kova.errors import GuardrailTripped
    from kova.testing import FunctionProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    journal_path, counts_path, kill_at, verdict = sys.argv[1:5]

    def count(name):
        counts = json.loads(open(counts_path).read()) if os.path.exists(counts_path) else {}
        counts[name] = counts.get(name, 0) + 1
        with open(counts_path, "w") as file:
            file.write(json.dumps(counts))

    def die_if(point):
        if kill_at == point:
            os.kill(os.getpid(), signal.SIGKILL)

    async def screen(text):
        count("input_guard")
        await trio.sleep(0.05)  # beside the model call
        return Trip("off topic") if verdict == "trip" else None

    def no_secrets(text):
        count("output_guard")
        return None

    def rooms_only(call):
        count("tool_guard")
        return None

    @tool(annotations=ToolAnnotations(idempotent=True))
    async def lookup(room: str) -> str:
        \"\"\"Look a room up.\"\"\"
        count("lookup")
        die_if("tool")
        return f"{room}: free"

    async def model(request):
        count("model")
        await trio.sleep(0.2)
        if not any(isinstance(b, ToolResult) for m in request.messages for b in m.content):
            return reply_tool_calls(("lookup", {"room": "A"}))
        return reply_text("room A is free")

    async def main():
        agent = (
            AgentBuilder()
            .provider(FunctionProvider(model))
            .tool(lookup)
            .guards(InputGuard(screen), OutputGuard(no_secrets), ToolGuard(rooms_only))
        )
        async with agent.build() as running:
            try:
                response = await running.run(
                    [Message.user("is room A free?")],
                    journal=SqliteJournal(journal_path),
                    turn_id="turn-1",
                )
            except GuardrailTripped as exc:
                die_if("tripped")
                print(json.dumps({"tripped": exc.guard, "reason": exc.reason}))
                return
        print(json.dumps({"text": response.text}))

    trio.run(main)
    """
)


async def _run(
    tmp_path: Path, kill_at: str, verdict: str = "pass"
) -> tuple[int, dict[str, object] | None]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    result = await trio.run_process(
        [
            sys.executable,
            str(script),
            str(tmp_path / "j.db"),
            str(tmp_path / "n.json"),
            kill_at,
            verdict,
        ],
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


async def test_a_killed_turn_does_not_run_again_the_guards_that_passed(tmp_path: Path) -> None:
    code, _ = await _run(tmp_path, "tool")
    assert code == -9
    assert _counts(tmp_path) == {"input_guard": 1, "model": 1, "tool_guard": 1, "lookup": 1}
    code, output = await _run(tmp_path, "none")
    assert (code, output) == (0, {"text": "room A is free"})
    # The guards decided before the kill: recorded, not run again. The idempotent tool runs
    # again; the model is asked once more, for the answer; the output guard checks it.
    assert _counts(tmp_path) == {
        "input_guard": 1,
        "model": 2,
        "tool_guard": 1,
        "lookup": 2,
        "output_guard": 1,
    }
    code, again = await _run(tmp_path, "none")  # finished: its output guard's pass is recorded
    assert (code, again) == (0, output)
    assert _counts(tmp_path)["output_guard"] == 1


async def test_a_tripped_turn_stays_tripped_when_run_again(tmp_path: Path) -> None:
    code, _ = await _run(tmp_path, "tripped", verdict="trip")
    assert code == -9  # killed right after the trip
    assert _counts(tmp_path) == {"input_guard": 1, "model": 1}
    # Run again with a guard that would pass now: the recorded trip stands, nothing is sent.
    code, output = await _run(tmp_path, "none", verdict="pass")
    assert (code, output) == (0, {"tripped": "screen", "reason": "off topic"})
    assert _counts(tmp_path) == {"input_guard": 1, "model": 1}


async def test_per_call_guards_apply_to_a_journaled_turn(tmp_path: Path) -> None:
    provider = ScriptedProvider([reply_text("hi")], latency=0.01)
    agent = AgentBuilder().provider(provider).build()
    guard = InputGuard(lambda text: Trip("no"), blocking=True, name="stop")
    async with agent:
        with pytest.raises(GuardrailTripped, match="no"):
            await agent.run(
                [Message.user("hello")],
                journal=SqliteJournal(tmp_path / "j.db"),
                turn_id="t",
                guards=[guard],
            )
    assert provider.requests == []
