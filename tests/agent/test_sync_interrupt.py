"""Ctrl-C during agent.run_sync cancels the turn, waits for it, then raises
KeyboardInterrupt: with no loop running, inside a running one (a notebook cell, whose kernel
raises KeyboardInterrupt in the main thread), and on asyncio.run for asyncio tools. In a
subprocess: it takes a signal."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import asyncio, os, signal, sys, threading
import trio
from kova.agent import AgentBuilder
from kova.testing import ScriptedProvider
from kova.tools import tool

stopped = []

async def stall(request):
    try:
        # The user presses Ctrl-C while the model thinks.
        ctrl_c.start()
        await trio.sleep_forever()
    finally:
        stopped.append(True)

ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))

@tool(runs_on="asyncio")
async def noop() -> str:
    'Nothing (its presence makes run_sync use asyncio.run and the guest run).'
    return ""

tools = [noop] if sys.argv[1] == "asyncio-tools" else []
agent = AgentBuilder().provider(ScriptedProvider(stall)).tools(*tools).build()

async def cell():
    # A notebook kernel turns SIGINT into KeyboardInterrupt in the main thread.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    agent.run_sync("hello")

try:
    if sys.argv[1] == "in-loop":
        asyncio.run(cell())
    else:
        agent.run_sync("hello")
except KeyboardInterrupt:
    ctrl_c.join()
    left = [t.name for t in threading.enumerate() if not t.name.startswith("Trio thread")]
    print("interrupted", stopped, left, agent.is_open)
"""


@pytest.mark.parametrize("where", ["no-loop", "in-loop", "asyncio-tools"])
def test_ctrl_c_cancels_the_turn_before_keyboard_interrupt(where: str) -> None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", SCRIPT, where],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "interrupted [True] ['MainThread'] False"
    assert result.stderr == ""
