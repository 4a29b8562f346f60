"""McpClient against the test MCPServer in process (memory streams, so MockClock works)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from mcp_test_server import PNG_1X1, build_server

import kova
from kova.actors import UnknownMessage, open_runtime
from kova.mcp import (
    InProcessTransport,
    McpClient,
    McpPromptResult,
    McpResourceContents,
    mcp_tools,
)


async def _constant() -> str:
    return "x"


async def test_tools_list_returns_the_servers_tools_as_definitions():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        tools = {tool.name: tool for tool in await client.tools_list()}
    assert {"echo", "add", "picture", "wait", "grow"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert set(add.parameters["properties"]) == {"a", "b"}


async def test_server_info_comes_from_initialize():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        info = await client.server_info()
    assert info.name == "kova-test-server"
    assert info.instructions == "a server for kova's tests"
    assert info.protocol_version == "2025-11-25"


async def test_tools_call_converts_text():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("add", {"a": 2, "b": 40})
    assert result == kova.ToolResult(content="42", structured={"result": 42})


async def test_tools_call_converts_text_and_image():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("picture")
    assert result.content == (
        kova.Text(text="a pixel"),
        kova.Image(media_type="image/png", data=PNG_1X1),
    )
    assert not result.is_error


async def test_tools_call_converts_embedded_resources():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("attachment")
    assert result.content == (
        kova.Text(text="note one"),
        kova.Image(media_type="image/png", data=PNG_1X1),
    )


async def test_tool_failure_keeps_is_error():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        result = await client.tools_call("fail", {"reason": "disk on fire"})
    assert result.is_error
    assert "disk on fire" in result.text


async def test_json_rpc_error_raises_mcp_error_and_connection_survives():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        with pytest.raises(kova.McpError) as caught:
            await client.tools_call("protocol_error")
        assert caught.value.code == -32099
        assert "refuses" in caught.value.message
        # Not a crash: the same connection keeps serving.
        assert (await client.tools_call("echo", {"text": "still here"})).text == "still here"


async def test_concurrent_calls_share_one_connection():
    events: list[str] = []
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        results: dict[int, str] = {}

        async def one(index: int) -> None:
            result = await client.tools_call("wait", {"seconds": 0, "tag": str(index)})
            results[index] = result.text

        async with trio.open_nursery() as nursery:
            for index in range(10):
                nursery.start_soon(one, index)
    assert results == {index: "waited 0.0" for index in range(10)}
    assert sorted(events) == sorted(
        [f"started {i}" for i in range(10)] + [f"finished {i}" for i in range(10)]
    )


async def test_tools_list_is_cached_until_list_changed():
    server = build_server()
    async with McpClient.connect(InProcessTransport(server)) as client:
        first = await client.tools_list()
        # Changing the server behind the client's back: the cache still answers.
        server.add_tool(_constant, name="sneaky")
        assert await client.tools_list() == first
        # A tool that sends notifications/tools/list_changed invalidates the cache.
        await client.tools_call("grow", {"name": "sprout"})
        names = {tool.name for tool in await client.tools_list()}
    assert {"sneaky", "sprout"} <= names
    assert "sprout" not in {tool.name for tool in first}


async def test_reconnect_clears_the_cache_and_reinitializes():
    server = build_server()
    async with McpClient.connect(InProcessTransport(server)) as client:
        first = await client.tools_list()
        server.add_tool(_constant, name="later")
        assert await client.tools_list() == first
        await client.reconnect()
        names = {tool.name for tool in await client.tools_list()}
        assert "later" in names
        assert (await client.tools_call("echo", {"text": "after"})).text == "after"


async def test_read_only_calls_in_flight_during_reconnect_are_sent_again(autojump_clock):
    events: list[str] = []
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        async with trio.open_nursery() as nursery:
            outcome: list[str] = []

            async def slow() -> None:
                outcome.append((await client.tools_call("wait", {"seconds": 5, "tag": "a"})).text)

            nursery.start_soon(slow)
            await trio.testing.wait_all_tasks_blocked()
            await client.reconnect()
    assert outcome == ["waited 5.0"]
    # The first attempt died with the old connection; the second ran to the end.
    assert events.count("started a") == 2
    assert events.count("finished a") == 1


async def test_per_call_timeout_fires_on_a_server_that_never_answers(autojump_clock):
    events: list[str] = []
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        start = trio.current_time()
        with pytest.raises(kova.KovaTimeoutError) as caught:
            await client.tools_call_with_timeout("wait", {"seconds": 1e6, "tag": "t"}, 2.5)
        assert caught.value.timeout == 2.5
        assert trio.current_time() - start == 2.5
        # The server was told to stop (notifications/cancelled), and the connection works.
        await trio.testing.wait_all_tasks_blocked()
        assert "cancelled t" in events
        assert (await client.tools_call("echo", {"text": "ok"})).text == "ok"


async def test_default_request_timeout_applies(autojump_clock):
    async with McpClient.connect(InProcessTransport(build_server()), request_timeout=7) as client:
        start = trio.current_time()
        with pytest.raises(kova.KovaTimeoutError):
            await client.tools_call("wait", {"seconds": 1e6})
        assert trio.current_time() - start == 7


async def test_cancelling_the_caller_cancels_the_call_on_the_server(autojump_clock):
    events: list[str] = []
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        with trio.move_on_after(3):
            await client.tools_call("wait", {"seconds": 1e6, "tag": "c"})
        await trio.testing.wait_all_tasks_blocked()
        assert events == ["started c", "cancelled c"]


async def test_resources_list_read_and_templates():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        resources = {item.uri: item for item in await client.resources_list()}
        templates = await client.resource_templates_list()
        greeting = await client.resources_read("kova://greeting")
        item = await client.resources_read("kova://items/7")
        pixel = await client.resources_read("kova://pixel")
    assert resources["kova://greeting"].name == "greeting"
    assert resources["kova://greeting"].mime_type == "text/plain"
    assert [template.uri_template for template in templates] == ["kova://items/{item_id}"]
    assert greeting == (
        McpResourceContents(
            uri="kova://greeting", mime_type="text/plain", text="hello from the server"
        ),
    )
    assert item[0].text == '{"id": "7"}'
    assert pixel[0].blob == PNG_1X1
    assert pixel[0].text is None


async def test_prompts_list_and_get():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        prompts = await client.prompts_list()
        rendered = await client.prompts_get("review", {"code": "x = 1"})
    assert [(p.name, p.description) for p in prompts] == [("review", "Review some code")]
    assert [(a.name, a.required) for a in prompts[0].arguments] == [("code", True)]
    assert rendered == McpPromptResult(
        description="Review some code",
        messages=(kova.Message.user("Please review:\nx = 1"),),
    )


async def test_mcp_tools_prefixes_names_and_executes_remotely():
    async with McpClient.connect(InProcessTransport(build_server())) as client:
        tools = {tool.name: tool for tool in await mcp_tools(client, "test")}
        assert "test__echo" in tools
        echo = tools["test__echo"]
        assert echo.remote_name == "echo"
        assert echo.description == "Echo the text back."
        assert (await echo.execute({"text": "via adapter"})).text == "via adapter"
        # A JSON-RPC error reaches the model in-band, as an error result.
        refused = await tools["test__protocol_error"].execute({})
        assert refused.is_error
        assert "refuses" in refused.text


async def test_mcp_tools_satisfy_the_tool_protocol():
    from kova.tools import Tool

    async with McpClient.connect(InProcessTransport(build_server())) as client:
        tools = await mcp_tools(client, "srv")
    assert tools
    assert all(isinstance(tool, Tool) for tool in tools)


def test_an_mcp_tool_is_a_frozen_value():
    import attrs

    from kova.mcp import McpTool

    client = object()
    tool = McpTool(client=client, prefix="srv", remote_name="add")  # type: ignore[arg-type]
    other = McpTool(client=client, prefix="srv", remote_name="add")  # type: ignore[arg-type]
    assert tool.parameters == {"type": "object", "properties": {}}
    assert tool.parameters is not other.parameters  # each tool its own default schema
    assert tool == other
    assert repr(tool) == (
        "McpTool(prefix='srv', remote_name='add', description='', "
        "parameters={'type': 'object', 'properties': {}}, annotations=None, output_schema=None, "
        "defer=False)"
    )  # the client is not shown
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tool.prefix = "other"  # type: ignore[misc]
    assert attrs.evolve(tool, remote_name="sub").name == "srv__sub"


def test_prefix_rules_make_collisions_impossible():
    from kova.mcp._tool import check_prefix

    for good in ("files", "my-server", "a_b", "x1"):
        assert check_prefix(good) == good
    for bad in ("", "a__b", "a_", "_a", "has space", "dot.ted"):
        with pytest.raises(ValueError, match="prefix"):
            check_prefix(bad)


async def test_connect_under_a_shared_runtime():
    async with open_runtime() as runtime:
        async with McpClient.connect(
            InProcessTransport(build_server()), runtime=runtime, name="srv"
        ) as client:
            assert client.name == "srv"
            assert runtime.supervisor.children == ("srv",)
            assert (await client.server_info()).name == "kova-test-server"
        # Leaving the block stopped the connection actor.
        assert runtime.supervisor.children == ()


async def test_an_unknown_message_fails_the_request_and_never_the_connection():
    """The connection actor answers a message it does not know like every actor does: an
    :class:`UnknownMessage` for that request, and it goes on serving."""
    async with (
        open_runtime() as runtime,
        McpClient.connect(
            InProcessTransport(build_server()), runtime=runtime, name="srv"
        ) as client,
    ):
        ref = runtime.supervisor.ref("srv")
        with pytest.raises(UnknownMessage, match="'srv' does not handle call str"):
            await ref.call("hello")
        with pytest.raises(UnknownMessage, match="'srv' does not handle stream str"):
            async with ref.stream("hello") as items:
                await items.receive()
        assert (await client.tools_call("add", {"a": 2, "b": 40})).text == "42"
        assert client.state.status == "connected"


async def test_cancelling_an_mcp_tool_cancels_the_call_on_the_server(autojump_clock):
    # What the agent loop does when a turn is cancelled mid-tool.
    events: list[str] = []
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        tools = {tool.name: tool for tool in await mcp_tools(client, "srv")}
        with trio.move_on_after(1) as scope:
            await tools["srv__wait"].execute({"seconds": 1e6, "tag": "turn"})
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert events == ["started turn", "cancelled turn"]
        # The connection is intact.
        assert (await tools["srv__echo"].execute({"text": "ok"})).text == "ok"


async def test_timeout_reaches_the_model_in_band_through_the_adapter(autojump_clock):
    async with McpClient.connect(InProcessTransport(build_server()), request_timeout=5) as client:
        (wait,) = [tool for tool in await mcp_tools(client, "srv") if tool.remote_name == "wait"]
        result = await wait.execute({"seconds": 1e6})
    assert result.is_error
    assert "timed out after 5s" in result.text


def test_importing_kova_does_not_import_mcp():
    import subprocess
    import sys

    code = "import sys, kova; print('mcp' in sys.modules, 'kova.mcp' in sys.modules)"
    output = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert output.split() == ["False", "False"]


async def test_cancelling_an_agent_turn_mid_mcp_call_cancels_the_call(autojump_clock):
    from kova.agent import AgentBuilder
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls

    events: list[str] = []
    model = ScriptedProvider(
        [reply_tool_calls(("srv__wait", {"seconds": 1e6, "tag": "agent"})), reply_text("done")]
    )
    async with McpClient.connect(InProcessTransport(build_server(events))) as client:
        builder = AgentBuilder().provider(model)
        await builder.mcp_client(client, "srv")
        agent = builder.build()
        history = [kova.Message.user("wait for it")]
        async with agent:
            with trio.move_on_after(10) as scope:
                await agent.run(history)
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert events == ["started agent", "cancelled agent"]
        assert history == [kova.Message.user("wait for it")]
