"""Faults against real server processes: a server killed mid-call, a server that exits
under every call, a server that cannot start again. The connection actor opens a new
session by itself, replays only calls that are safe to replay, and no child process is
left behind.
"""

from __future__ import annotations

import os
import signal
import sys

import psutil
import pytest
import structlog.testing
import trio
from mcp_fixtures import SERVER

import kova
from kova.mcp import McpClient, StdioTransport

GUARD = 60  # seconds; a hang guard, never reached when things work

STDIO = StdioTransport(sys.executable, args=[str(SERVER), "stdio"])


def _server_children() -> set[int]:
    """Live (non-zombie) child processes of this test process running the test server."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and str(SERVER) in child.cmdline():
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return pids


async def _wait_for_file(path: trio.Path) -> str:
    # The server process writes it; polling is the only way to see another process's file.
    while not await path.exists():  # noqa: ASYNC110 - another process writes it
        await trio.sleep(0.02)
    return await path.read_text()


async def test_server_killed_mid_idempotent_call_is_restarted_and_the_call_replayed(tmp_path):
    marker = trio.Path(tmp_path / "hung")
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(STDIO) as client:
            first_pid = int((await client.tools_call("pid")).text)
            results: list[kova.ToolResult] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    results.append(await client.tools_call("hang_once", {"marker": str(marker)}))

                nursery.start_soon(call)
                hung_pid = int(await _wait_for_file(marker))
                assert hung_pid == first_pid
                os.kill(hung_pid, signal.SIGKILL)
            # hang_once is annotated idempotent: the replay reached a new server process,
            # which found the marker and answered.
            assert [result.text for result in results] == ["recovered"]
            second_pid = int((await client.tools_call("pid")).text)
            assert second_pid != first_pid
            assert _server_children() == {second_pid}
            assert (await client.tools_call("echo", {"text": "next"})).text == "next"
    assert _server_children() == set()
    events = [entry["event"] for entry in logs]
    assert "actor.restarted" not in events  # recovered by the connection actor itself
    assert "mcp.connection.lost" in events
    assert "mcp.request.replayed" in events


async def test_call_that_may_have_run_is_not_replayed():
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(STDIO) as client:
            # exit_now is not annotated: it may have done its work before the server died.
            with pytest.raises(
                kova.McpCallInterruptedError, match="may or may not have run"
            ) as info:
                await client.tools_call("exit_now")
            # The reason is how the server ended, not the mcp package's "Connection closed".
            assert "(the MCP server process exited with status 3)" in str(info.value)
            # A new session is up: the next call works.
            assert (await client.tools_call("echo", {"text": "alive"})).text == "alive"
            assert len(_server_children()) == 1
            assert client.state.status == "connected"
            assert client.state.session == 2
    assert _server_children() == set()
    assert "mcp.request.replayed" not in [entry["event"] for entry in logs]


async def test_json_rpc_error_is_not_retried():
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(STDIO) as client:
            pid = int((await client.tools_call("pid")).text)
            with pytest.raises(kova.McpError):
                await client.tools_call("protocol_error")
            assert int((await client.tools_call("pid")).text) == pid
    events = [entry["event"] for entry in logs]
    assert "mcp.request.replayed" not in events
    assert "mcp.connection.lost" not in events


async def test_server_dying_while_idle_is_replaced_before_the_next_call():
    states: list[str] = []
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(
            STDIO, on_state_change=lambda state: states.append(state.status)
        ) as client:
            first_pid = int((await client.tools_call("pid")).text)
            os.kill(first_pid, signal.SIGKILL)
            # Nobody is calling: the actor notices the closed stream by itself and opens a
            # new session.
            await client.wait_for_state("connecting")
            state = await client.wait_for_state("connected")
            assert state.session == 2
            second_pid = int((await client.tools_call("pid")).text)
            assert second_pid != first_pid
            assert _server_children() == {second_pid}
    assert states == ["connected", "connecting", "connected", "closed"]
    events = [entry["event"] for entry in logs]
    assert "mcp.connection.lost" in events
    assert "mcp.request.replayed" not in events
    assert "actor.restarted" not in events


async def test_server_that_cannot_start_again_leaves_the_block_running(tmp_path):
    script = tmp_path / "server.py"
    script.write_bytes(SERVER.read_bytes())
    transport = StdioTransport(sys.executable, args=[str(script), "stdio"])
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.tools_call("echo", {"text": "up"})).text == "up"
            script.unlink()  # every later start fails
            with pytest.raises(kova.McpUnavailableError, match="is unavailable since"):
                await client.reconnect()
            assert client.state.status == "unavailable"
            with pytest.raises(kova.McpUnavailableError) as caught:
                await client.tools_call("echo", {"text": "down"})
            assert caught.value.server == f"{sys.executable} {script}"
            assert caught.value.attempts >= 1
            script.write_bytes(SERVER.read_bytes())  # the server can start again
            await client.reconnect()
            assert (await client.tools_call("echo", {"text": "back"})).text == "back"
    assert _server_children() == set()
