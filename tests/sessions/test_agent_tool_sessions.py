"""An agent used as a tool with a session (``inner.as_tool(session=...)``) keeps its own
conversation across calls; a pause of its turn waits in that session and the outer resume
continues it there."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from kova import Message, Role, Text, ToolResult
from kova.agent import AgentBuilder
from kova.sessions import SqliteSessionStore
from kova.testing import FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path


def _inner(request: ScriptRequest) -> Any:
    last = request.messages[-1]
    if isinstance(last.content[0], ToolResult):
        return reply_text("inner done: " + last.content[0].text)
    prompts = [m for m in request.messages if m.role is Role.USER]
    text = "".join(b.text for b in last.content if isinstance(b, Text))
    if text == "book":
        return reply_tool_calls(("book", {"room": "blue"}))
    return reply_text(f"inner saw {len(prompts)} prompts")


def _outer(ask: str) -> Any:
    def model(request: ScriptRequest) -> Any:
        last = request.messages[-1]
        if isinstance(last.content[0], ToolResult):
            return reply_text("outer: " + last.content[0].text)
        return reply_tool_calls(("helper", {"input": ask}))

    return model


@tool
def book(room: str) -> str:
    """Book a room."""
    return f"booked {room}"


async def test_an_agent_tool_keeps_its_conversation_in_a_session(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        session = store.session("helper")
        inner = AgentBuilder().provider(FunctionProvider(_inner)).name("helper").build()
        helper = inner.as_tool(session=session)
        outer = AgentBuilder().provider(FunctionProvider(_outer("hi"))).tool(helper).build()
        async with outer:
            first = await outer.run("go")
            second = await outer.run("go again")
        assert first.text == "outer: inner saw 1 prompts"
        assert second.text == "outer: inner saw 2 prompts"  # it remembered the first call
        assert [m.role for m in await session.load()] == [Role.USER, Role.ASSISTANT] * 2


async def test_a_paused_inner_turn_waits_in_its_session(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        session = store.session("helper")
        inner = (
            AgentBuilder()
            .provider(FunctionProvider(_inner))
            .name("helper")
            .tool(book)
            .defer_approvals()
            .build()
        )
        outer = (
            AgentBuilder()
            .provider(FunctionProvider(_outer("book")))
            .tool(inner.as_tool(session=session))
            .build()
        )
        async with outer:
            paused = await outer.run("book it")
            assert paused.pending is not None
            assert (await session.pending()) is not None  # the inner pause, in the session
            decided = paused.pending.approve(paused.pending.calls[0])
            history = [Message.user("book it"), *paused.new_messages]
            resumed = await outer.resume(history, decided)
        assert resumed.text == "outer: inner done: booked blue"
        assert await session.pending() is None
        stored = await session.load()
        assert stored[0] == Message.user("book")
        assert stored[-1] == Message.assistant("inner done: booked blue")
        assert await session.rewind() == len(stored)  # paused and resumed parts: one turn


def test_session_is_not_taken_with_history_or_output(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    inner = AgentBuilder().provider(FunctionProvider(_inner)).build()
    with pytest.raises(TypeError, match="not with history"):
        inner.as_tool(session=store.session("x"), history=[Message.user("example")])
    with pytest.raises(TypeError, match=r"must be a kova\.sessions\.Session"):
        inner.as_tool(session="x")  # type: ignore[arg-type]
