"""Issue 51's scale check: 500 tools (10 real MCP servers of 40 tools, 100 local tools), all
deferred, over a 10-step turn on the fake OpenAI server. The tool definitions sent are counted
at the server, against sending every tool on every call."""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from kova import ToolDefinition, ToolResult
from kova.agent import AgentBuilder
from kova.mcp import InProcessTransport, McpClient
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import open_openai_server, reply_text, reply_tool_calls

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from tool_catalog import SERVERS, catalogue

RAN: list[str] = []


class LocalTool:
    """A deferred local tool of the catalogue (the Tool protocol by hand)."""

    def __init__(self, definition: ToolDefinition) -> None:
        self.name = definition.name
        self.description = definition.description
        self.parameters = definition.parameters
        self.defer = True

    async def execute(self, arguments: Any) -> ToolResult:
        RAN.append(self.name)
        return ToolResult(content="ok")


def _server(prefix: str, definitions: list[ToolDefinition]) -> MCPServer:
    server = MCPServer(prefix)
    for definition in definitions:
        remote = definition.name.removeprefix(prefix + "_")

        async def run(item_id: str = "", fields: dict[str, str] | None = None) -> str:
            return "ok"

        server.add_tool(run, name=remote, description=definition.description)
    return server


def _tools_bytes(body: Any) -> int:
    return len(json.dumps(body.get("tools", []), separators=(",", ":")))


async def test_500_deferred_tools_cost_under_5_percent_of_sending_them_all() -> None:
    RAN.clear()
    tools = catalogue()
    by_server = {
        prefix: [t for t in tools if t.name.startswith(prefix + "_")] for prefix in SERVERS
    }
    local = [LocalTool(t) for t in tools if not any(t.name.startswith(p + "_") for p in SERVERS)]
    assert sum(map(len, by_server.values())) == 400
    assert len(local) == 100
    # Search, then call what was found: four searches and five calls in ten model calls.
    script = [
        reply_tool_calls(("search_tools", {"query": "open a new ticket in Jira"})),
        reply_tool_calls(("jira__create_ticket", {"ticket_id": "1"})),
        reply_tool_calls(("search_tools", {"query": "refund a Stripe payment"})),
        reply_tool_calls(("stripe__delete_refund", {})),
        reply_tool_calls(("search_tools", {"query": "currency money convert"})),
        reply_tool_calls(("currency", {})),
        reply_tool_calls(("search_tools", {"query": "kubernetes pod list"})),
        reply_tool_calls(("k8s__list_pod", {})),
        reply_tool_calls(("jira__create_ticket", {"ticket_id": "2"})),
        reply_text("all done"),
    ]
    async with AsyncExitStack() as stack:
        clients = []
        for prefix, definitions in by_server.items():
            client = await stack.enter_async_context(
                McpClient.connect(InProcessTransport(_server(prefix, definitions)), name=prefix)
            )
            clients.append((prefix, client))
        server = await stack.enter_async_context(open_openai_server(script))
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(api_key="k", base_url=server.base_url, model="gpt-fake")
        )
        builder = AgentBuilder().provider(provider).tools(*local).max_iterations(20)
        for prefix, client in clients:
            await builder.mcp_client(client, prefix, defer=True)
        agent = builder.build()
        every_tool = len(agent.config.registry)
        async with agent:
            response = await agent.run("do the chores")
            # What sending every tool costs: the same agent's tools, none deferred.
            all_definitions = agent.config.registry.definitions()
        requests = [request.json() for request in server.chat_requests()]
    assert response.text == "all done"
    assert every_tool == 500
    assert len(requests) == 10
    assert RAN == ["currency"]
    # Every call the model made was to a tool offered in that request, and none failed.
    for body, reply in zip(requests, script, strict=True):
        offered = {tool["function"]["name"] for tool in body.get("tools", [])}
        assert {call.name for call in reply.tool_uses} <= offered
    results = [
        block
        for message in response.new_messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]
    assert len(results) == 9
    assert not any(result.is_error for result in results), [r.text for r in results]
    sent = sum(_tools_bytes(body) for body in requests)
    one_call_of_everything = len(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": d.name,
                        "description": d.description,
                        "parameters": d.parameters,
                    },
                }
                for d in all_definitions
            ],
            separators=(",", ":"),
        )
    )
    ratio = sent / (10 * one_call_of_everything)
    print(f"tool definitions sent: {sent} bytes, {ratio:.2%} of sending all 500 on 10 calls")
    assert ratio <= 0.05
