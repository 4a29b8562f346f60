"""Agents as MCP tools at /mcp (Streamable HTTP), driven by the official ``mcp`` client: list
the tools, call one with progress, cancel a call (the turn and its model connection stop),
bad calls get MCP's errors."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import kova.serve

from ._agents import TOKEN, open_agent, open_connections, released_within
from ._serving import serving

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
]


@asynccontextmanager
async def connect(url: str, token: str = TOKEN) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
            yield client


async def test_list_tools_and_call_an_agent_with_progress() -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with open_agent() as (agent, _), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with connect(url) as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "helper", {"prompt": "weather"}, progress_callback=on_progress
            )
    (tool,) = tools.tools
    assert tool.name == "helper"
    assert tool.input_schema["required"] == ["prompt"]
    assert not result.is_error
    assert result.content[0].text == "It is -3°C, snow in Oslo."  # type: ignore[union-attr]
    assert result.structured_content is not None
    assert result.structured_content["usage"]["output_tokens"] > 0
    messages = [message for _, message in progress]
    assert messages == [
        "the turn started",
        "calling get_weather",
        "get_weather done",
        "answering",
    ]
    assert [value for value, _ in progress] == [1, 2, 3, 4]


async def test_bad_calls_get_mcp_errors_and_the_server_serves_on() -> None:
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with connect(url) as client:
            for name, arguments, words in [
                ("ghost", {"prompt": "hi"}, "no tool named 'ghost'"),
                ("helper", {}, "'prompt' must be"),
                ("helper", {"prompt": 5}, "'prompt' must be"),
                ("helper", {"prompt": "hi", "x": 1}, "unknown arguments: x"),
            ]:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, arguments)
                assert refused.value.error.code == -32602
                assert words in refused.value.error.message
            result = await client.call_tool("helper", {"prompt": "still here"})
        async with httpx2.AsyncClient() as plain:
            unauthorized = await plain.post(url + "/mcp", json={"jsonrpc": "2.0", "id": 1})
    assert result.content[0].text == "You said: still here"  # type: ignore[union-attr]
    assert len(fake.chat_requests()) == 1
    assert unauthorized.status_code == 401
    assert unauthorized.json()["error"]["code"] == -32001


async def test_cancelling_a_call_cancels_the_turn_and_frees_its_model_connection() -> None:
    """20 calls cancelled while the model streams: each provider connection is closed. The
    official client speaks MCP 2026-07-28 here, where cancelling a call is closing its
    response stream (a client disconnect), which the server takes as the cancel."""
    times: list[float] = []
    async with open_agent() as (agent, fake), serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with connect(url) as client:
            assert client.protocol_version == "2026-07-28"
            for trial in range(20):
                with trio.move_on_after(10) as waited:
                    async with trio.open_nursery() as nursery:

                        async def call() -> Any:
                            return await client.call_tool("helper", {"prompt": "hold"})

                        nursery.start_soon(call)
                        while len(fake.chat_requests()) <= trial:  # noqa: ASYNC110
                            await trio.sleep(0.002)
                        await trio.sleep(0.02)
                        assert open_connections(fake.base_url) == 1
                        nursery.cancel_scope.cancel()
                assert not waited.cancelled_caught
                released = await released_within(fake.base_url, 1.0)
                assert released is not None
                times.append(released)
            after = await client.call_tool("helper", {"prompt": "after"})
    assert after.content[0].text == "You said: after"  # type: ignore[union-attr]
    times.sort()
    print(f"released after a cancel: median {times[10] * 1000:.0f} ms, max {times[-1] * 1000:.0f}")


async def test_kova_mcp_serve_over_stdio_with_the_official_client() -> None:
    """``kova mcp serve --demo`` launched by the mcp client: the agent is a tool, called with
    progress; a cancelled call leaves the server serving."""
    import sys

    from mcp import StdioServerParameters

    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kova.cli._main", "mcp", "serve", "--demo", "--name", "weather"],
    )
    with trio.fail_after(60):
        async with Client(server) as client:
            (tool,) = (await client.list_tools()).tools
            result = await client.call_tool(
                "weather", {"prompt": "Weather in Oslo?"}, progress_callback=on_progress
            )
            with trio.move_on_after(0.05):
                await client.call_tool("weather", {"prompt": "Weather in Lisbon?"})
            again = await client.call_tool("weather", {"prompt": "Weather in Tokyo?"})
    assert tool.name == "weather"
    assert "Oslo" in result.content[0].text  # type: ignore[union-attr]
    assert "calling get_weather" in progress
    assert "Tokyo" in again.content[0].text  # type: ignore[union-attr]


async def test_a_failed_turn_is_an_error_result_naming_the_error() -> None:
    from kova import InvalidRequest
    from kova.agent import AgentBuilder
    from kova.testing import FunctionProvider

    def model(request: object) -> object:
        raise InvalidRequest("no such thing", provider="hand")

    agent = AgentBuilder().provider(FunctionProvider(model)).name("broken")
    async with agent.build() as opened, serving(kova.serve.app(opened, token=TOKEN)) as url:
        async with connect(url) as client:
            result = await client.call_tool("broken", {"prompt": "hi"})
    assert result.is_error
    (part,) = result.content
    assert part.text.startswith("InvalidRequest: ")  # type: ignore[union-attr]
    assert "no such thing" in part.text  # type: ignore[union-attr]
