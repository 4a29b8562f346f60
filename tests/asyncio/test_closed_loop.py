"""An asyncio loop closed by hand while kova runs on it (issue 42 item 10). Its trio run can
never finish on that loop, and trio keeps the thread marked as running it: before, neither
kova.asyncio nor trio.run() worked in that thread again, first with a message that sent users
the wrong way ("a trio run is already active in this thread (under trio, use kova
directly...)"), then with an exact one. Now kova.asyncio ends that run from the thread's next
loop (its turn cancelled, the tool's cleanup run) and works, and so does trio.run() after it.
Work that ignores cancellation past kova's wait still gets the exact message. Run in a child
process: the thread it breaks is the child's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys, time, trio
    import kova._guest
    from kova.agent import AgentBuilder
    from kova.asyncio import open_agent, open_runtime
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    kova._guest.ABANDON_WAIT = 0.5
    EVENTS = []
    OPENED = []

    @tool
    async def slow() -> str:
        \"\"\"Slow.\"\"\"
        EVENTS.append("slow started")
        try:
            await trio.sleep(100)
        finally:
            EVENTS.append("slow cancelled")
        return "x"

    @tool
    def blocking() -> str:
        \"\"\"Blocks its worker thread.\"\"\"
        EVENTS.append("blocking started")
        time.sleep(2)
        return "x"

    def agent(tool_name=None):
        replies = [reply_tool_calls((tool_name, {}))] if tool_name else []
        provider = ScriptedProvider([*replies, reply_text("hi")])
        return AgentBuilder().provider(provider).tools(slow, blocking).build()

    async def start_a_turn(tool_name):
        opened = open_agent(agent(tool_name))
        OPENED.append(opened)  # kept open: the loop is closed under it
        bridged = await opened.__aenter__()
        task = asyncio.ensure_future(bridged.run("hello"))
        while not EVENTS:
            await asyncio.sleep(0.01)
        return task

    async def again():
        async with open_agent(agent()) as bridged:
            return (await bridged.run("hello")).text

    async def a_runtime():
        async with open_runtime() as runtime:
            return await runtime.run(trio.to_thread.run_sync, lambda: "ran")

    loop = asyncio.new_event_loop()
    task = loop.run_until_complete(start_a_turn(sys.argv[1]))
    assert not task.done()
    loop.close()  # by hand, mid-turn
    for attempt in range(8):
        try:
            print("again:", asyncio.run(again() if sys.argv[2] == "agent" else a_runtime()))
            break
        except RuntimeError as error:
            print("refused:", error)
            time.sleep(0.5)
    print("events:", EVENTS)
    trio.run(trio.sleep, 0)
    print("trio.run: ok")
    """
)


def _run(tool_name: str, door: str) -> tuple[list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, tool_name, door],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines(), done.stderr


@pytest.mark.parametrize(("door", "answer"), [("agent", "hi"), ("runtime", "ran")])
def test_the_thread_of_a_loop_closed_mid_turn_runs_kova_and_trio_again(
    door: str, answer: str
) -> None:
    lines, log = _run("slow", door)
    assert lines == [
        f"again: {answer}",
        "events: ['slow started', 'slow cancelled']",  # cancelled, its cleanup ran
        "trio.run: ok",
    ]
    assert log.count("asyncio.runtime.abandoned") == 1


def test_work_that_ignores_cancellation_gets_the_exact_message_until_it_stops() -> None:
    """A plain ``def`` tool blocked in its worker thread for 2 s holds the old run past
    kova's wait (0.5 s here): a start is refused saying what happened and what to do; once
    the thread has returned, the next start ends the old run and works."""
    lines, log = _run("blocking", "agent")
    message = lines[0]
    assert message.startswith("refused: kova.asyncio cannot start: the asyncio loop kova ran")
    assert "was closed while kova was running on it" in message
    assert "did not stop within 0.5s" in message
    assert "another thread" in message
    assert "close kova before the loop" in message
    assert "under trio, use kova directly" not in message
    assert lines[-3:] == ["again: hi", "events: ['blocking started']", "trio.run: ok"]
    assert log.count("asyncio.runtime.abandoned") == 1
