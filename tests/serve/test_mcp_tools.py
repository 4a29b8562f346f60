"""The agents' own tools offered over MCP (``kova.serve.app(..., mcp_tools=True)`` at /mcp and
``kova mcp serve --tools`` over stdio), driven by the official ``mcp`` client: listed with their
schemas and hints, called on the agent's tool pool under its approval policy and tool guards,
a cancelled call cancels the tool, names offered twice are refused."""

from __future__ import annotations

import base64
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

import kova.serve
from kova import Image, ToolAnnotations, ToolResult, ToolUse
from kova.agent import AgentBuilder, Deny, ToolGuard
from kova.testing import TestProvider
from kova.tools import tool

from ._agents import TOKEN, open_agent
from ._serving import serving
from .test_mcp import connect

if TYPE_CHECKING:
    from kova.agent import Agent

pytestmark = [
    pytest.mark.filterwarnings("ignore:Async generator 'httpcore2.:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:Async generator 'httpx2.:ResourceWarning"),
]

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n-not-really").decode()


@tool(annotations=ToolAnnotations(read_only=True, title="Add"))
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@tool
def snapshot(label: str) -> ToolResult:
    """A picture with a caption.

    Args:
        label: the caption.
    """
    return ToolResult(
        content=(kova.Text(text=f"caption: {label}"), Image(media_type="image/png", data=PIXEL)),
        structured={"label": label},
    )


@tool
def delete_everything(path: str) -> str:
    """Delete a tree.

    Args:
        path: where.
    """
    raise AssertionError("a denied call must not run")


def _agent(name: str = "calc", **extra: Any) -> Agent:
    builder = AgentBuilder().provider(TestProvider()).name(name).tools(add, snapshot)
    if extra.get("tools"):
        builder = builder.tools(*extra["tools"])
    if extra.get("approval"):
        builder = builder.approval_handler(extra["approval"])
    if extra.get("defer"):
        builder = builder.defer_approvals(extra["defer"])
    if extra.get("guards"):
        builder = builder.guards(*extra["guards"])
    return builder.build()


async def test_the_agents_tools_are_listed_and_called_beside_the_agent() -> None:
    agent = _agent()
    async with agent, serving(kova.serve.app(agent, token=TOKEN, mcp_tools=True)) as url:
        async with connect(url) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            summed = await client.call_tool("add", {"a": 2, "b": 40})
            picture = await client.call_tool("snapshot", {"label": "cat"})
            wrong = await client.call_tool("add", {"a": "two", "b": 40})
            asked = await client.call_tool("calc", {"prompt": "hi"})
    assert sorted(listed) == ["add", "calc", "snapshot"]
    assert listed["add"].input_schema["required"] == ["a", "b"]
    assert (listed["add"].description or "").startswith("Add two numbers.")
    assert listed["add"].annotations is not None
    assert listed["add"].annotations.read_only_hint is True
    assert listed["add"].annotations.title == "Add"
    assert not summed.is_error
    assert summed.content[0].text == "42"  # type: ignore[union-attr]
    text, image = picture.content
    assert text.text == "caption: cat"  # type: ignore[union-attr]
    assert image.type == "image"
    assert image.data == PIXEL
    assert image.mime_type == "image/png"
    assert picture.structured_content == {"label": "cat"}
    # Arguments are checked against the tool's schema, as for the agent's own calls.
    assert wrong.is_error
    assert "a" in wrong.content[0].text  # type: ignore[union-attr]
    assert not asked.is_error  # the agent itself is still a tool


async def test_without_mcp_tools_only_the_agents_are_offered() -> None:
    agent = _agent()
    async with agent, serving(kova.serve.app(agent, token=TOKEN)) as url:
        async with connect(url) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            with pytest.raises(MCPError) as refused:
                await client.call_tool("add", {"a": 1, "b": 2})
    assert listed == ["calc"]
    assert refused.value.error.code == -32602
    assert "no tool named 'add'" in refused.value.error.message


async def test_the_agents_approval_policy_and_tool_guards_decide_each_call() -> None:
    asked: list[str] = []

    def approve(call: ToolUse) -> bool | str:
        asked.append(call.name)
        return call.name != "delete_everything" or "never over MCP"

    approving = _agent("approving", tools=[delete_everything], approval=approve)
    deferring = _agent("deferring", defer=lambda call: True)

    def no_big_sums(call: ToolUse) -> Deny | None:
        a = call.input.get("a", 0)
        return Deny("too big") if isinstance(a, int) and a > 100 else None

    guarded = _agent("guarded", guards=[ToolGuard(no_big_sums, name="sums")])
    cases: list[tuple[Agent, list[tuple[str, dict[str, Any], str | None]]]] = [
        (approving, [("delete_everything", {"path": "/"}, "never over MCP"), ("add", {}, None)]),
        (deferring, [("add", {"a": 1, "b": 2}, "needs a person's approval")]),
        (guarded, [("add", {"a": 500, "b": 1}, "too big"), ("add", {"a": 5, "b": 1}, None)]),
    ]
    for agent, calls in cases:
        async with agent, serving(kova.serve.app(agent, mcp_tools=True)) as url:
            async with connect(url) as client:
                for name, arguments, refusal in calls:
                    if name == "add" and not arguments:
                        arguments = {"a": 1, "b": 1}
                    result = await client.call_tool(name, arguments)
                    text = result.content[0].text  # type: ignore[union-attr]
                    if refusal is None:
                        assert not result.is_error, text
                    else:
                        assert result.is_error
                        assert refusal in text
    assert asked == ["delete_everything", "add"]


async def test_cancelling_a_tool_call_cancels_the_tool() -> None:
    started = trio.Event()
    cancelled = trio.Event()

    @tool
    async def wait_forever(reason: str) -> str:
        """Wait.

        Args:
            reason: why.
        """
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        return "never"  # type: ignore[unreachable]

    agent = _agent(tools=[wait_forever])
    async with agent, serving(kova.serve.app(agent, token=TOKEN, mcp_tools=True)) as url:
        async with connect(url) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "wait_forever", {"reason": "test"})
                with trio.fail_after(10):
                    await started.wait()
                nursery.cancel_scope.cancel()
            with trio.fail_after(2):
                await cancelled.wait()
            after = await client.call_tool("add", {"a": 1, "b": 1})
    assert after.content[0].text == "2"  # type: ignore[union-attr]


def test_a_tool_name_offered_twice_is_refused() -> None:
    one, two = _agent("one"), _agent("two")
    with pytest.raises(ValueError, match=r"'add' of the agent 'two'.*'one' has that name too"):
        kova.serve.app(one, two, mcp_tools=True)
    kova.serve.app(one, two)  # without the tools there is no clash
    named_like = _agent("add")
    with pytest.raises(ValueError, match="an agent has that name too"):
        kova.serve.app(named_like, mcp_tools=True)
    with pytest.raises(TypeError, match="mcp_tools must be True or False"):
        kova.serve.app(one, mcp_tools="yes")  # type: ignore[arg-type]


async def test_kova_mcp_serve_tools_offers_the_demo_agents_weather_lookup() -> None:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kova.cli._main", "mcp", "serve", "--demo", "--name", "weather", "--tools"],
    )
    with trio.fail_after(60):
        async with Client(server) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            result = await client.call_tool("get_weather", {"city": "Oslo"})
    assert names == ["get_weather", "weather"]
    assert not result.is_error
    assert result.content[0].text == "-3°C, light snow, wind 4 m/s"  # type: ignore[union-attr]


async def test_an_agent_in_the_mcp_sessions_serves_the_agents_with_tools() -> None:
    """A served agent whose turn calls its tool still works with mcp_tools (the pool is
    shared by the turn and the MCP calls)."""
    async with (
        open_agent() as (agent, _),
        serving(kova.serve.app(agent, token=TOKEN, mcp_tools=True)) as url,
    ):
        async with connect(url) as client:
            direct = await client.call_tool("get_weather", {"city": "Oslo"})
            turn = await client.call_tool("helper", {"prompt": "weather"})
    assert direct.content[0].text == "-3°C, snow"  # type: ignore[union-attr]
    assert turn.content[0].text == "It is -3°C, snow in Oslo."  # type: ignore[union-attr]
