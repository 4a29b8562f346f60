"""``notifications/tools/list_changed`` is coalesced (issue 44, item 2): at most one refresh
in flight and one pending, and a listing that found nothing new starts no other.

Before, every notification started a refresh task and a ``tools/list``: 20,000 notifications
made 20,001 listings and ~20,000 concurrent tasks, and a server that says "changed" with
every listing kept an idle client listing forever.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
from mcp_fixtures import SERVER, start_server, stop_server
from mcp_test_server import build_server

from kova.mcp import (
    InProcessTransport,
    McpClient,
    SseTransport,
    StdioTransport,
    StreamableHttpTransport,
    Transport,
)

if TYPE_CHECKING:
    from kova import ToolDefinition

GUARD = 60


class TaskCount(trio.abc.Instrument):
    """How many tasks were alive at most, counting from when it was added."""

    def __init__(self) -> None:
        self.alive = 0
        self.peak = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.alive += 1
        self.peak = max(self.peak, self.alive)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.alive -= 1


async def _listed(client: McpClient) -> int:
    return int((await client.tools_call("listed", {})).text)


async def test_twenty_thousand_list_changed_cost_a_handful_of_listings(
    autojump_clock: trio.testing.MockClock,
) -> None:
    told: list[tuple[ToolDefinition, ...]] = []
    with trio.fail_after(GUARD):
        async with McpClient.connect(InProcessTransport(build_server())) as client:
            client.add_tools_listener(told.append)
            await client.tools_list()
            before = await _listed(client)
            tasks = TaskCount()
            trio.lowlevel.add_instrument(tasks)
            try:
                assert (await client.tools_call("flood", {"count": 20_000})).text == "sent 20000"
                await trio.sleep(2)  # every refresh it caused is done
            finally:
                trio.lowlevel.remove_instrument(tasks)
            listings = await _listed(client) - before
    assert 1 <= listings <= 4, listings
    assert tasks.peak <= 40, tasks.peak
    assert len(told) <= 1  # nothing changed: the listeners hear of a change at most once


async def test_a_server_that_says_changed_with_every_listing_does_not_keep_us_listing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(InProcessTransport(build_server())) as client:
            client.add_tools_listener(lambda tools: None)
            await client.tools_list()
            before = await _listed(client)
            await client.tools_call("chatter", {})
            await trio.sleep(1.5)  # past the first quiet window
            settled = await _listed(client)
            await trio.sleep(45)
            idle = await _listed(client)
    assert settled - before <= 3, settled - before
    assert idle == settled  # an idle client lists no more


async def test_a_real_change_still_reaches_the_listeners() -> None:
    told: list[Any] = []
    with trio.fail_after(GUARD):
        async with McpClient.connect(InProcessTransport(build_server())) as client:
            client.add_tools_listener(told.append)
            await client.tools_list()
            await client.tools_call("flood", {"count": 100})
            await trio.sleep(0.5)
            await client.tools_call("grow", {"name": "fresh"})
            await client.tools_call("grow", {"name": "fresher"})
    names = {tool.name for tool in told[-1]}
    assert {"fresh", "fresher"} <= names


@pytest.mark.parametrize("kind", ["stdio", "sse", "http"])
async def test_a_flood_costs_a_handful_of_listings_on_every_transport(kind: str) -> None:
    """The same over the three transports, on the real clock (kova's test server as a child
    process), where the flood takes seconds: a few listings, not one per notification."""
    server = None if kind == "stdio" else start_server(kind)
    try:
        if server is None:
            transport: Transport = StdioTransport(sys.executable, args=[str(SERVER), "stdio"])
        elif kind == "sse":
            transport = SseTransport(f"{server.base_url}/sse")
        else:
            transport = StreamableHttpTransport(f"{server.base_url}/mcp")
        with trio.fail_after(GUARD * 2):
            async with McpClient.connect(transport, request_timeout=GUARD) as client:
                client.add_tools_listener(lambda tools: None)
                await client.tools_list()
                before = await _listed(client)
                tasks = TaskCount()
                trio.lowlevel.add_instrument(tasks)
                try:
                    # 5,000 here (each listing was one per notification before); the
                    # 20,000 of the issue run on the mock clock above.
                    await client.tools_call("flood", {"count": 5_000})
                    await trio.sleep(1.5)
                finally:
                    trio.lowlevel.remove_instrument(tasks)
                listings = await _listed(client) - before
    finally:
        if server is not None:
            stop_server(server)
    assert 1 <= listings <= 8, listings
    assert tasks.peak <= 60, tasks.peak
