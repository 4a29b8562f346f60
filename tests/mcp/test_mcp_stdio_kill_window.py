"""The stdio kill window (issue 44, item 4): a request written to a child that was being
killed sits in the pipe, never read. It was reported "may or may not have run" (and a
read-only one waited for a respawn through a whole outage); the bytes still in the pipe
prove it never reached the server, so it goes to the respawned child as not delivered.

The hostile server's ``die_later`` stops reading stdin, then kills itself: the calls made in
between are exactly the calls of that window, every time.
"""

from __future__ import annotations

import sys

import pytest
import trio
from mcp_fixtures import HOSTILE

import kova
from kova.mcp import McpClient, ReconnectPolicy, StdioTransport

GUARD = 60


async def test_a_call_the_dying_child_never_read_goes_to_the_respawned_one() -> None:
    transport = StdioTransport(sys.executable, args=[str(HOSTILE), "stdio"])
    with trio.fail_after(GUARD):
        async with McpClient.connect(
            transport, request_timeout=20, reconnect=ReconnectPolicy(initial=0.05)
        ) as client:
            first_pid = (await client.tools_call("pid", {})).text
            results: dict[str, object] = {}

            async def dying() -> None:
                try:
                    await client.tools_call("die_later", {"seconds": 1.0})
                except kova.McpCallInterruptedError as exc:
                    results["dying"] = exc

            async def in_the_window() -> None:
                # echo is neither read-only nor idempotent: only "not delivered" may resend it.
                results["echo"] = (await client.tools_call("echo", {"n": 1})).text

            async with trio.open_nursery() as nursery:
                nursery.start_soon(dying)
                await trio.sleep(0.3)  # the child has stopped reading
                nursery.start_soon(in_the_window)
            second_pid = (await client.tools_call("pid", {})).text
    # The call the child read is honestly "may or may not have run"...
    assert isinstance(results["dying"], kova.McpCallInterruptedError)
    # ...the one it never read ran on the new child, once.
    assert results["echo"] == '{"n": 1}'
    assert second_pid != first_pid


async def test_a_read_in_the_window_is_unavailable_at_once_during_an_outage() -> None:
    """During an outage (the respawn fails), a read the child never read (it would be sent
    again, being a read) is McpUnavailableError at once, not a wait for the whole timeout."""
    seconds = 0.5
    script = (
        "import os, runpy, sys\n"
        f"marker = {str(HOSTILE.with_name('.kill_window_once'))!r}\n"
        "if os.path.exists(marker):\n"
        "    sys.exit(3)\n"
        "open(marker, 'w').close()\n"
        f"sys.argv = [{str(HOSTILE)!r}, 'stdio']\n"
        f"runpy.run_path({str(HOSTILE)!r}, run_name='__main__')\n"
    )
    marker = HOSTILE.with_name(".kill_window_once")
    marker.unlink(missing_ok=True)
    transport = StdioTransport(sys.executable, args=["-c", script])
    try:
        with trio.fail_after(GUARD):
            async with McpClient.connect(
                transport, request_timeout=15, reconnect=ReconnectPolicy(initial=0.05)
            ) as client:
                await client.tools_list()
                caught: list[BaseException] = []

                async def dying() -> None:
                    with pytest.raises(kova.McpCallInterruptedError):
                        await client.tools_call("die_later", {"seconds": seconds})

                async def in_the_window() -> None:
                    started = trio.current_time()
                    try:
                        await client.resources_list()
                    except (kova.McpUnavailableError, kova.McpCallInterruptedError) as exc:
                        caught.append(exc)
                    caught.append(trio.current_time() - started)  # type: ignore[arg-type]

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(dying)
                    await trio.sleep(0.2)
                    nursery.start_soon(in_the_window)
    finally:
        marker.unlink(missing_ok=True)
    error, waited = caught
    assert isinstance(error, kova.McpUnavailableError), error
    assert waited < 10  # not the 15 s request timeout


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
async def test_200_mb_without_a_newline_fails_at_once_naming_the_limit(id_last: bool) -> None:
    """Issue 44, item 5: a 200 MB answer whose line never ends is discarded as it arrives
    (memory bounded) and its call fails at once naming the size limit, not by timeout. Also
    when its id would come last (TypeScript servers' order), so nothing the server sent names
    the request: the one call waiting is the one it answers (it waited for its timeout)."""
    transport = StdioTransport(sys.executable, args=[str(HOSTILE), "stdio"])
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport, request_timeout=30) as client:
            started = trio.current_time()
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call("no_newline", {"mib": 200, "id_last": id_last})
            assert trio.current_time() - started < 25
            assert client.state.status == "connected"  # the session was not given up
    assert caught.value.code == -32051
    assert "limit of 16777216 bytes" in str(caught.value)


@pytest.mark.parametrize(
    "script",
    ["import sys; sys.exit(3)", "import sys; sys.stdin.readline(); sys.exit(3)"],
    ids=["before-reading", "after-reading-initialize"],
)
async def test_a_child_that_exits_during_initialize_is_reported_with_its_exit_status(
    script: str,
) -> None:
    """Issue 44, item 5: a child (or a respawn) that exits at once lost its exit status; the
    error said "Connection closed"."""
    transport = StdioTransport(sys.executable, args=["-c", script])
    with trio.fail_after(GUARD), pytest.raises(kova.McpError) as caught:
        async with McpClient.connect(transport, connect_timeout=10):
            raise AssertionError("connected to a child that exited")
    assert "the MCP server process exited with status 3" in str(caught.value)
