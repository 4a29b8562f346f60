"""An asyncio loop closed by hand while kova runs on it (issue 42 item 10): its trio run can
never finish and trio keeps the thread marked as running it; kova.asyncio then says exactly
what happened and what to do, instead of "a trio run is already active in this thread
(under trio, use kova directly...)", which sent users the wrong way. Run in a child process:
the thread it breaks is the child's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import asyncio, trio
    from kova.agent import AgentBuilder
    from kova.asyncio import open_agent
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    @tool
    async def slow() -> str:
        \"\"\"Slow.\"\"\"
        await trio.sleep(100)
        return "x"

    def agent(calls):
        replies = [reply_tool_calls(("slow", {}))] * calls + [reply_text("hi")]
        return AgentBuilder().provider(ScriptedProvider(replies)).tool(slow).build()

    async def start_a_turn():
        bridged = await open_agent(agent(1)).__aenter__()
        task = asyncio.ensure_future(bridged.run("hello"))
        await asyncio.sleep(0.2)
        return task

    loop = asyncio.new_event_loop()
    task = loop.run_until_complete(start_a_turn())
    loop.close()  # by hand, mid-turn

    async def again():
        async with open_agent(agent(0)) as bridged:
            return (await bridged.run("hello")).text

    try:
        asyncio.run(again())
    except RuntimeError as error:
        print(error)
    """
)


def test_a_loop_closed_mid_turn_says_what_happened_and_what_to_do() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message = done.stdout
    assert "was closed while kova was running on it" in message
    assert "another thread" in message
    assert "close kova before the loop" in message
    assert "under trio, use kova directly" not in message
