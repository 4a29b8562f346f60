"""AgentBuilder.mcp_client: MCP tools under a prefix, indistinguishable from native tools."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver import MCPServer

import kova
from kova import Message, ToolResult
from kova.agent import AgentBuilder
from kova.mcp import InProcessTransport, McpClient
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls


def weather_server(name: str, reading: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"{city}: {reading}"

    return server


async def test_tools_of_two_servers_never_collide_and_run_like_native_tools() -> None:
    provider = ScriptedProvider(
        [
            reply_tool_calls(
                ("north__get_weather", {"city": "Oslo"}), ("south__get_weather", {"city": "Faro"})
            ),
            reply_text("both fetched"),
        ]
    )
    async with (
        McpClient.connect(InProcessTransport(weather_server("north", "-3°C"))) as north,
        McpClient.connect(InProcessTransport(weather_server("south", "21°C"))) as south,
    ):
        builder = AgentBuilder().provider(provider)
        await builder.mcp_client(north, "north")
        await builder.mcp_client(south, "south")
        async with builder.build() as agent:
            response = await agent.run([Message.user("weather?")])
    names = [tool.name for tool in provider.requests[0].tools]
    assert sorted(names) == ["north__get_weather", "south__get_weather"]
    results = [b for b in response.new_messages[1].content if isinstance(b, ToolResult)]
    assert [r.text for r in results] == ["Oslo: -3°C", "Faro: 21°C"]
    assert not any(r.is_error for r in results)


@pytest.mark.parametrize("prefix", ["", "has space", "a__b"])
async def test_bad_prefix_is_a_build_error(prefix: str) -> None:
    async with McpClient.connect(InProcessTransport(weather_server("x", "0°C"))) as client:
        with pytest.raises(kova.BuildError, match="prefix"):
            await AgentBuilder().provider(ScriptedProvider([])).mcp_client(client, prefix)
