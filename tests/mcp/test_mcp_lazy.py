"""MCP servers started when needed: ``McpClient.connect(lazy=True)`` and the tool memory.

Real servers (``counted_server.py``) as a stdio child and over Streamable HTTP; their starts
(stdio processes) and sessions (HTTP) are counted by the servers themselves.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import urllib.request
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import structlog
import trio
from counted_server import build
from mcp.server.mcpserver import MCPServer
from mcp_fixtures import RunningServer, start_server, stop_server

import kova
from kova import Message, ToolDefinition, ToolResult
from kova.agent import AgentBuilder
from kova.mcp import (
    InProcessTransport,
    McpClient,
    McpToolMemory,
    StdioTransport,
    StreamableHttpTransport,
)
from kova.mcp._tool_memory import server_key
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

COUNTED = Path(__file__).with_name("counted_server.py")


def _stdio(starts: Path, **env: str) -> StdioTransport:
    return StdioTransport(
        command=sys.executable, args=[str(COUNTED), "stdio", "--starts", str(starts)], env=env
    )


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _sessions(server: RunningServer) -> int:
    with urllib.request.urlopen(f"{server.base_url}/control/stats", timeout=5) as answer:
        return int(json.load(answer)["sessions"])


def _script(*calls: tuple[str, dict[str, object]]) -> ScriptedProvider:
    """Search for the weather, call what is named (if anything), then answer."""
    replies = [reply_tool_calls(("search_tools", {"query": "weather forecast for a city"}))]
    if calls:
        replies.append(reply_tool_calls(*calls))
    replies.append(reply_text("done"))
    return ScriptedProvider(replies)


async def _turn(
    client: McpClient, provider: ScriptedProvider, prefix: str = "w"
) -> kova.agent.AgentResponse:
    builder = AgentBuilder().provider(provider)
    await builder.mcp_client(client, prefix, defer=True)
    async with builder.build() as agent:
        return await agent.run([Message.user("weather in Oslo?")])


def _results(response: kova.agent.AgentResponse) -> list[ToolResult]:
    return [
        block
        for message in response.new_messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]


@pytest.fixture
def memory(tmp_path: Path) -> McpToolMemory:
    return McpToolMemory(tmp_path / "tools.db")


async def test_a_remembered_stdio_server_starts_only_when_a_tool_is_called(tmp_path, memory):
    starts = tmp_path / "starts"
    # The first run knows nothing: the server starts once, to list its tools.
    async with McpClient.connect(_stdio(starts), lazy=True, tool_memory=memory) as client:
        assert client.state.status == "idle"
        assert _starts(starts) == 0
        await _turn(client, _script())
    assert _starts(starts) == 1

    # Later runs: searching (and finding) its tools starts nothing.
    for _ in range(2):
        searching = _script()
        async with McpClient.connect(_stdio(starts), lazy=True, tool_memory=memory) as client:
            await _turn(client, searching)
            assert client.state.status == "idle"
        assert "w__forecast" in [t.name for t in searching.requests[1].tools]
    assert _starts(starts) == 1

    # The model calls one: the server starts, once, for three calls (two at once).
    provider = _script(
        ("w__forecast", {"city": "Oslo"}),
        ("w__forecast", {"city": "Bergen"}),
    )
    async with McpClient.connect(_stdio(starts), lazy=True, tool_memory=memory) as client:
        response = await _turn(client, provider)
        assert client.state.status == "connected"
        assert (await client.tools_call("forecast", {"city": "Rome"})).text == "sunny in Rome"
    assert _starts(starts) == 2
    assert [r.text for r in _results(response)[1:]] == ["sunny in Oslo", "sunny in Bergen"]
    # Only the search tool was offered up front, then the found tool: no server listed them.
    assert [t.name for t in provider.requests[0].tools] == ["search_tools"]
    assert [t.name for t in provider.requests[1].tools] == ["search_tools", "w__forecast"]


async def test_a_remembered_http_server_opens_no_session_until_a_tool_is_called(memory):
    server = start_server("http", script=COUNTED)
    try:
        transport = StreamableHttpTransport(url=f"{server.base_url}/mcp")
        async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
            await _turn(client, _script())
        assert _sessions(server) == 1
        async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
            await _turn(client, _script())
        assert _sessions(server) == 1
        async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
            response = await _turn(client, _script(("w__forecast", {"city": "Oslo"})))
        assert _sessions(server) == 2
        assert _results(response)[-1].text == "sunny in Oslo"
    finally:
        stop_server(server)


async def test_a_new_server_version_replaces_the_remembered_tools(memory):
    # In process (the same server, no child): the memory knows it by its name.
    async with McpClient.connect(
        InProcessTransport(build("1.0.0", "plain")), lazy=True, tool_memory=memory
    ) as client:
        await client.tools_list()
    remembered = await memory.recall(_key(memory))
    assert remembered is not None
    assert remembered.version == "1.0.0"
    assert "Convert an amount" in _description(remembered.tools, "convert_currency")

    # Version 2 describes a tool differently. The agent starts from the remembered list;
    # once the model calls a tool and the server starts, the memory and the agent's view
    # follow the server.
    provider = ScriptedProvider(
        [
            reply_tool_calls(("search_tools", {"query": "weather forecast"})),
            reply_tool_calls(("w__forecast", {"city": "Oslo"})),
            reply_tool_calls(("search_tools", {"query": "exchange money into another currency"})),
            reply_text("done"),
        ]
    )
    upgraded = InProcessTransport(build("2.0.0", "other"))
    async with McpClient.connect(upgraded, lazy=True, tool_memory=memory) as client:
        await _turn(client, provider)
    remembered = await memory.recall(_key(memory))
    assert remembered is not None
    assert remembered.version == "2.0.0"
    assert "Exchange money" in _description(remembered.tools, "convert_currency")
    before = {t.name: t.description for t in provider.requests[0].tools}
    assert list(before) == ["search_tools"]
    offered = {t.name: t.description for t in provider.requests[3].tools}
    assert offered["w__convert_currency"].startswith("Exchange money")


async def test_a_list_changed_notification_updates_the_memory(memory):
    transport = InProcessTransport(build("1.0.0", "plain"))
    async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
        added = trio.Event()

        def listen(tools: tuple[kova.ToolDefinition, ...]) -> None:
            if "klingon" in [tool.name for tool in tools]:
                added.set()

        client.add_tools_listener(listen)
        await client.tools_call("add_tool", {"name": "klingon"})
        with trio.fail_after(10):
            await added.wait()
    remembered = await memory.recall(_key(memory))
    assert remembered is not None
    assert "klingon" in [tool.name for tool in remembered.tools]


async def test_a_lazy_server_that_cannot_start_fails_the_call_in_band(memory):
    # Remembered tools of a server whose command is now broken: the model's call gets an
    # error result naming it, and the turn goes on.
    async with McpClient.connect(
        InProcessTransport(build("1.0.0", "plain")), lazy=True, tool_memory=memory
    ) as client:
        remembered = await client.tools_list()
    broken = StdioTransport(command="/nonexistent/kova-no-such-mcp-server")
    key = server_key(broken)
    assert key is not None
    await memory.remember(key[0], server="broken", version="1", tools=remembered)
    async with McpClient.connect(broken, lazy=True, tool_memory=memory) as client:
        response = await _turn(client, _script(("w__forecast", {"city": "Oslo"})))
        with pytest.raises(kova.McpUnavailableError, match="unavailable"):
            await client.tools_call("forecast", {"city": "Oslo"})
    result = _results(response)[-1]
    assert result.is_error
    assert "unavailable" in result.text


async def test_a_forgotten_server_is_not_recalled_and_others_stay(memory):
    tools = (ToolDefinition(name="forecast", description="d", parameters={"type": "object"}),)
    await memory.remember("a", server="a", version="1", tools=tools)
    await memory.remember("b", server="b", version="2", tools=tools)
    await memory.forget("a")
    assert await memory.recall("a") is None
    kept = await memory.recall("b")
    assert kept is not None
    assert (kept.server, kept.version, kept.tools) == ("b", "2", tools)


async def test_a_remembered_tool_comes_back_whole_and_a_damaged_one_not_at_all(memory):
    # Equality leaves annotations and output_schema out: each is compared by itself.
    tool = ToolDefinition(
        name="forecast",
        description="d",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        annotations=kova.ToolAnnotations(read_only=True, title="Forecast"),
        output_schema={"type": "object"},
    )
    await memory.remember("a", server="a", version="1", tools=(tool,))
    recalled = await memory.recall("a")
    assert recalled is not None
    (back,) = recalled.tools
    assert (back, back.annotations, back.output_schema) == (
        tool,
        tool.annotations,
        tool.output_schema,
    )
    # A stored annotation of the wrong type is an unreadable memory (the server is asked
    # again), not a tool with a wrong hint.
    memory._execute("UPDATE mcp_tool_lists SET tools = replace(tools, 'true', '\"yes\"')", ())
    assert await memory.recall("a") is None
    # Nor is a stored list nested too deeply to read (a RecursionError before).
    memory._execute("UPDATE mcp_tool_lists SET tools = ?", ("[" * 100_000 + "]" * 100_000,))
    assert await memory.recall("a") is None


async def test_the_memory_survives_a_damaged_file(tmp_path, memory):
    memory.path.write_bytes(b"not a database at all" * 100)
    assert await memory.recall("anything") is None


async def test_connect_checks_its_lazy_arguments():
    transport = StdioTransport(command=sys.executable, args=["-c", "pass"])
    with pytest.raises(TypeError, match="lazy must be a bool"):
        async with McpClient.connect(transport, lazy=1):  # type: ignore[arg-type]
            pass
    with pytest.raises(TypeError, match="McpToolMemory"):
        async with McpClient.connect(transport, lazy=True, tool_memory="x.db"):  # type: ignore[arg-type]
            pass


def _key(memory: McpToolMemory) -> str:
    with sqlite3.connect(memory.path) as connection:
        rows = connection.execute("SELECT server_key FROM mcp_tool_lists").fetchall()
    assert len(rows) == 1
    return str(rows[0][0])


def _description(tools: tuple[kova.ToolDefinition, ...], name: str) -> str:
    return next(tool.description for tool in tools if tool.name == name)


def _catalogue_server(prefix: str, definitions: list[kova.ToolDefinition]) -> MCPServer:
    server = MCPServer(prefix)
    for definition in definitions:

        async def run(item_id: str = "") -> str:
            return "ok"

        server.add_tool(
            run, name=definition.name.removeprefix(prefix + "_"), description=definition.description
        )
    return server


async def test_of_ten_remembered_servers_only_those_whose_tools_are_called_start(memory):
    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    from tool_catalog import SERVERS, catalogue

    tools = catalogue()
    servers = {
        prefix: _catalogue_server(prefix, [t for t in tools if t.name.startswith(prefix + "_")])
        for prefix in SERVERS
    }
    # A first run lists every server's tools (nothing is remembered yet).
    async with AsyncExitStack() as stack:
        for server in servers.values():
            client = await stack.enter_async_context(
                McpClient.connect(InProcessTransport(server), lazy=True, tool_memory=memory)
            )
            assert len(await client.tools_list()) == 40
    provider = ScriptedProvider(
        [
            reply_tool_calls(("search_tools", {"query": "open a new ticket in Jira"})),
            reply_tool_calls(("jira__create_ticket", {"item_id": "1"})),
            reply_tool_calls(("search_tools", {"query": "list kubernetes pods"})),
            reply_tool_calls(("k8s__list_pod", {}), ("jira__create_ticket", {"item_id": "2"})),
            reply_text("done"),
        ]
    )
    async with AsyncExitStack() as stack:
        builder = AgentBuilder().provider(provider).max_iterations(10)
        clients = {}
        for prefix, server in servers.items():
            clients[prefix] = await stack.enter_async_context(
                McpClient.connect(InProcessTransport(server), lazy=True, tool_memory=memory)
            )
            await builder.mcp_client(clients[prefix], prefix, defer=True)
        assert {client.state.status for client in clients.values()} == {"idle"}
        async with builder.build() as agent:
            response = await agent.run("file a ticket and check the pods")
        started = sorted(p for p, client in clients.items() if client.state.status != "idle")
        sessions = {p: client.state.session for p, client in clients.items()}
    assert response.text == "done"
    assert not any(result.is_error for result in _results(response))
    assert started == ["jira", "k8s"]
    assert sessions["jira"] == sessions["k8s"] == 1  # each started once
    assert [t.name for t in provider.requests[0].tools] == ["search_tools"]


async def test_a_server_reporting_lone_surrogates_is_listed_and_remembered(memory):
    # A server's name, version and tool text are the server's to choose: a lone surrogate
    # (which SQLite cannot store as text) neither fails the listing nor the memory, and the
    # remembered list reads back as the server said it.
    server = MCPServer("evil\ud800", version="1.0\udfff")

    @server.tool(name="look\ud800", description="half an emoji: \ud83d")
    async def look(query: str) -> str:
        return query

    transport = InProcessTransport(server)
    with structlog.testing.capture_logs() as logs:
        async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
            listed = await client.tools_list()
    assert [(tool.name, tool.description) for tool in listed] == [
        ("look\ud800", "half an emoji: \ud83d")
    ]
    assert not [log for log in logs if log["log_level"] == "warning"]
    remembered = await memory.recall(_key(memory))
    assert remembered is not None
    assert (remembered.server, remembered.version) == ("in-process evil\ud800", "1.0\udfff")
    assert remembered.tools == listed
    # The next run starts from the memory: nothing is started to list them.
    async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
        assert await client.tools_list(remembered=True) == listed
        assert client.state.status == "idle"


@pytest.mark.parametrize(
    "damage",
    [
        "server = X'FF'",  # bytes that are no text, even with a surrogate kept
        "version = CAST(X'C3' AS TEXT)",  # text that is not UTF-8
        'tools = \'[{"name": "\\ud800"}]\'',  # a tool without its fields
        "tools = '\"\\ud800\"'",  # not a list
    ],
)
async def test_a_memory_holding_odd_text_is_read_as_empty(memory, damage):
    transport = InProcessTransport(build("1.0.0", "plain"))
    async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
        listed = await client.tools_list()
    with sqlite3.connect(memory.path) as connection:
        connection.execute(f"UPDATE mcp_tool_lists SET {damage}")
    with structlog.testing.capture_logs() as logs:
        async with McpClient.connect(transport, lazy=True, tool_memory=memory) as client:
            # Nothing to answer from: the server starts to list its tools.
            assert await client.tools_list(remembered=True) == listed
            assert client.state.status == "connected"
    assert "mcp.tool_memory.unreadable" in [log["event"] for log in logs]
    remembered = await memory.recall(_key(memory))  # the server's list saved again
    assert remembered is not None
    assert remembered.tools == listed
