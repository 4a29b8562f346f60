"""The rest of the client side of MCP, in process: structured results, annotations and
output schemas, choosing tools, list_changed reaching an agent, progress, roots, resource
subscriptions and server log messages."""

from __future__ import annotations

import attrs
import pytest
import structlog.testing
from mcp_test_server import build_server

import kova
from kova.agent import AgentBuilder
from kova.mcp import InProcessTransport, McpClient, McpLogMessage, McpProgress, McpRoot, mcp_tools
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls


async def test_structured_content_reaches_the_host_and_text_the_model():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("weather", {"city": "Oslo"})
    assert result.structured == {"city": "Oslo", "celsius": 21.5}
    assert '"celsius": 21.5' in result.text  # what the model reads
    stored = kova.Message.tool_results([attrs.evolve(result, tool_use_id="c1")])
    assert kova.Message.from_dict(stored.to_dict()) == stored


async def test_definitions_carry_annotations_and_output_schema():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        tools = {tool.name: tool for tool in await client.tools_list()}
        wrapped = {tool.remote_name: tool for tool in await mcp_tools(client, "srv")}
    weather = tools["weather"]
    assert weather.annotations == kova.ToolAnnotations(title="Weather", read_only=True)
    assert weather.output_schema is not None
    assert set(weather.output_schema["properties"]) == {"city", "celsius"}  # type: ignore[arg-type]
    assert tools["hang_once"].annotations == kova.ToolAnnotations(read_only=False, idempotent=True)
    assert tools["echo"].annotations is None
    assert wrapped["weather"].annotations == weather.annotations
    assert wrapped["weather"].output_schema == weather.output_schema


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (["echo", "add"], None, {"srv__echo", "srv__add"}),
        (None, ["exit_now", "protocol_error"], None),
        (
            lambda tool: tool.annotations is not None and tool.annotations.is_read_only,
            ["pid"],
            {"srv__wait", "srv__weather"},
        ),
    ],
)
async def test_builder_takes_only_the_chosen_tools(include, exclude, expected):
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        builder = AgentBuilder().provider(ScriptedProvider([]))
        await builder.mcp_client(client, "srv", include=include, exclude=exclude)
        names = set(builder.build().config.registry.names())
        everything = {f"srv__{tool.name}" for tool in await client.tools_list()}
    if expected is None:
        expected = everything - {"srv__exit_now", "srv__protocol_error"}
    assert names == expected


async def test_a_misspelled_tool_name_is_a_build_error():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        builder = AgentBuilder().provider(ScriptedProvider([]))
        with pytest.raises(kova.BuildError, match="does not have: exit-now"):
            await builder.mcp_client(client, "srv", exclude=["exit-now"])


async def test_list_changed_reaches_the_agent_between_turns():
    model = ScriptedProvider(
        [
            reply_tool_calls(("srv__grow", {"name": "fresh"})),
            reply_text("grown"),
            reply_text("I see it"),
        ]
    )
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        builder = AgentBuilder().provider(model)
        await builder.mcp_client(client, "srv", include=["grow", "echo"])
        agent = builder.build()
        async with agent:
            history = [kova.Message.user("grow a tool")]
            history += (await agent.run(history)).new_messages
            history.append(kova.Message.user("and now?"))
            await agent.run(history)
    first, _, third = ([tool.name for tool in request.tools] for request in model.requests)
    assert sorted(first) == ["srv__echo", "srv__grow"]
    # include names the server's tools at build time; a tool the server adds later passes
    # the same filter only when it is named, so "fresh" is not taken here...
    assert sorted(third) == ["srv__echo", "srv__grow"]


async def test_list_changed_adds_new_tools_the_filter_lets_in():
    model = ScriptedProvider(
        [
            reply_tool_calls(("srv__grow", {"name": "fresh"})),
            reply_text("grown"),
            reply_tool_calls(("srv__fresh", {})),
            reply_text("called it"),
        ]
    )
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        builder = AgentBuilder().provider(model)
        await builder.mcp_client(client, "srv", exclude=["exit_now"])
        agent = builder.build()
        async with agent:
            history = [kova.Message.user("grow a tool")]
            history += (await agent.run(history)).new_messages
            history.append(kova.Message.user("use it"))
            response = await agent.run(history)
    names = [[tool.name for tool in request.tools] for request in model.requests]
    assert "srv__fresh" not in names[0]
    assert "srv__fresh" in names[2]  # the next turn's first step
    results = [
        block
        for message in response.new_messages
        for block in message.content
        if isinstance(block, kova.ToolResult)
    ]
    assert results[0].text == "I am fresh"


async def test_progress_reaches_the_callers_handler():
    seen: list[McpProgress] = []

    async def on_progress(progress: McpProgress) -> None:
        seen.append(progress)

    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("count_up", {"steps": 3}, progress=on_progress)
    assert result.text == "counted 3"
    assert seen == [
        McpProgress(progress=step, total=3, message=f"step {step}") for step in (1, 2, 3)
    ]


async def test_roots_are_offered_and_changes_announced():
    events: list[str] = []
    async with McpClient.connect(
        InProcessTransport(build_server(events)), roots=["file:///srv/docs"]
    ) as client:
        assert (await client.tools_call("roots")).text == "file:///srv/docs None"
        await client.set_roots([McpRoot(uri="file:///srv/other", name="other")])
        assert (await client.tools_call("roots")).text == "file:///srv/other other"
        with pytest.raises(ValueError, match="file://"):
            await client.set_roots(["https://example.com"])


async def test_roots_need_the_capability():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        with pytest.raises(kova.McpError, match="offers no roots"):
            await client.set_roots(["file:///x"])


async def test_resource_subscriptions_deliver_updates():
    events: list[str] = []
    updated: list[str] = []

    async def on_updated(uri: str) -> None:
        updated.append(uri)

    async with McpClient.connect(
        InProcessTransport(build_server(events)), on_resource_updated=on_updated
    ) as client:
        await client.resources_subscribe("kova://greeting")
        await client.tools_call("touch", {"uri": "kova://greeting"})
        await client.resources_unsubscribe("kova://greeting")
        # A new session subscribes again to what is still subscribed.
        await client.resources_subscribe("kova://items/1")
        await client.reconnect()
    assert updated == ["kova://greeting"]
    assert events == [
        "subscribed kova://greeting",
        "unsubscribed kova://greeting",
        "subscribed kova://items/1",
        "subscribed kova://items/1",
    ]


async def test_server_log_messages_reach_the_host_and_structlog():
    messages: list[McpLogMessage] = []

    async def on_log(message: McpLogMessage) -> None:
        messages.append(message)

    with structlog.testing.capture_logs() as logs:
        async with McpClient.connect(
            InProcessTransport(build_server()), on_log=on_log, log_level="info"
        ) as client:
            await client.tools_call("say", {"text": "disk almost full"})
    assert messages == [McpLogMessage(level="warning", logger="kova-test", data="disk almost full")]
    entry = next(entry for entry in logs if entry["event"] == "mcp.server.log")
    assert entry["log_level"] == "warning"
    assert entry["data"] == "disk almost full"


async def test_bad_log_level_is_refused_before_anything_is_sent():
    with pytest.raises(ValueError, match="log_level"):
        async with McpClient.connect(InProcessTransport(build_server()), log_level="loud"):
            pass
