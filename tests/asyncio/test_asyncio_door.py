"""The door between asyncio and kova: clear errors where asyncio code meets kova without the
bridge, asyncio tools without a loop to run on, and the hint for tools that used an asyncio
library under trio."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
import structlog
import trio

import kova
import kova.asyncio
from kova.agent import Agent, AgentBuilder
from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import ToolDefinitionError, tool

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine


def agent_with(*tools: Any, script: Any = None) -> Agent:
    builder = AgentBuilder().provider(ScriptedProvider(script or [reply_text("hi")]))
    for item in tools:
        builder.tool(item)
    return builder.build()


def _check_door(error: RuntimeError) -> None:
    text = str(error)
    assert "kova runs on trio" in text
    assert "kova.asyncio" in text
    assert "run_sync" in text
    assert "docs/asyncio.md" in text


async def _enter(agent: Agent) -> None:
    async with agent:
        pass


async def _run(agent: Agent) -> object:
    return await agent.run("hello")


async def _run_structured(agent: Agent) -> object:
    return await agent.run_structured("hello", kova.ResponseFormat(name="r", schema={}))


async def _stream(agent: Agent) -> None:
    async with agent.stream("hello"):
        pass


@pytest.mark.parametrize("door", [_enter, _run, _run_structured, _stream], ids=lambda d: d.__name__)
def test_awaiting_kova_from_asyncio_without_the_bridge_says_what_to_do(
    door: Callable[[Agent], Coroutine[Any, Any, object]],
) -> None:
    with pytest.raises(RuntimeError) as caught:
        asyncio.run(door(agent_with()))
    _check_door(caught.value)


def test_the_door_is_also_shut_inside_a_running_guest_run() -> None:
    # Under kova.asyncio, trio's run is active in the thread: asyncio code awaiting the
    # agent directly (not through the bridge) still gets the door's error.
    async def main() -> None:
        async with kova.asyncio.open_runtime():
            with pytest.raises(RuntimeError) as caught:
                await agent_with().run("hello")
            _check_door(caught.value)

    asyncio.run(main())


@tool(runs_on="asyncio")
async def lookup(key: str) -> str:
    """Look a key up in an asyncio-only store."""
    await asyncio.sleep(0)
    return key


async def test_an_asyncio_tool_without_a_bridge_is_a_build_error() -> None:
    agent = agent_with(lookup)
    with pytest.raises(kova.BuildError) as caught:
        async with agent:
            pass
    message = str(caught.value)
    assert "'lookup'" in message
    assert "kova.asyncio.open_agent(agent)" in message
    assert "docs/asyncio.md" in message
    assert not agent.is_open


async def test_an_asyncio_tool_registered_later_fails_in_band_with_the_fix() -> None:
    registry = kova.tools.ToolRegistry()
    agent = (
        AgentBuilder()
        .provider(ScriptedProvider([reply_tool_calls(("lookup", {"key": "k"})), reply_text("ok")]))
        .tool_registry(registry)
        .build()
    )
    async with agent:
        registry.register(lookup)
        response = await agent.run("look it up")
    result = response.new_messages[1].content[0]
    assert result.is_error
    assert "kova.asyncio.open_agent(agent)" in result.text


def test_runs_on_is_checked_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="runs_on must be"):
        tool(runs_on="curio")(lookup.function)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match="for async functions"):

        @tool(runs_on="asyncio")
        def plain(key: str) -> str:
            """Not async."""
            return key

    assert lookup.runs_on == "asyncio"
    assert tool(lookup.function).runs_on == "trio"


@tool
async def uses_asyncio(key: str) -> str:
    """A trio tool that (wrongly) uses an asyncio library."""
    loop = asyncio.get_running_loop()  # what asyncpg, aiohttp, redis.asyncio do first
    return f"{key} {loop}"


async def test_a_tool_that_needed_an_asyncio_loop_gets_the_hint_in_band_and_in_the_log() -> None:
    agent = agent_with(
        uses_asyncio, script=[reply_tool_calls(("uses_asyncio", {"key": "k"})), reply_text("ok")]
    )
    with structlog.testing.capture_logs() as logs:
        async with agent:
            response = await agent.run("go")
    result = response.new_messages[1].content[0]
    assert result.is_error
    assert "no running event loop" in result.text
    assert 'runs_on="asyncio"' in result.text
    assert "kova.asyncio" in result.text
    failed = [entry for entry in logs if entry["event"] == "tool.call.failed"]
    assert len(failed) == 1
    assert "kova.asyncio" in failed[0]["hint"]
    assert failed[0]["log_level"] == "warning"  # a wiring mistake the host must fix


async def test_other_tool_failures_get_no_hint() -> None:
    @tool
    async def broken() -> str:
        """Fail."""
        await trio.lowlevel.checkpoint()
        raise RuntimeError("something else")

    agent = agent_with(broken, script=[reply_tool_calls(("broken", {})), reply_text("ok")])
    with structlog.testing.capture_logs() as logs:
        async with agent:
            response = await agent.run("go")
    assert response.new_messages[1].content[0].text == "tool 'broken' failed: something else"
    failed = [entry for entry in logs if entry["event"] == "tool.call.failed"]
    assert "hint" not in failed[0]
    assert failed[0]["log_level"] == "info"  # the model has it in-band


def test_on_asyncio_outside_the_bridge_says_what_to_do() -> None:
    async def ask(call: object) -> bool:
        return True

    wrapped = kova.asyncio.on_asyncio(ask)

    async def main() -> None:
        await wrapped(None)

    with pytest.raises(RuntimeError, match=r"not running under kova\.asyncio"):
        trio.run(main)
