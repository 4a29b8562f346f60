"""``async for event in agent.stream(...)`` without ``async with`` (issue 44, item 8): one
line naming the pattern, instead of Python's "'async for' requires an object with __aiter__
method, got TurnStream". On trio the turn runs inside the stream's block, so iterating the
stream without entering it cannot be made safe; kova.asyncio's bridged agent iterates
directly (docs/asyncio.md) and is unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kova.agent import AgentBuilder
from kova.sessions import SqliteSessionStore
from kova.testing import ScriptedProvider, reply_text

if TYPE_CHECKING:
    from pathlib import Path


async def test_async_for_over_agent_stream_names_async_with() -> None:
    model = ScriptedProvider([reply_text("hi")])
    async with AgentBuilder().provider(model).build() as agent:
        with pytest.raises(TypeError) as caught:
            async for _event in agent.stream("hello"):  # type: ignore[attr-defined]
                pass
        message = str(caught.value)
        assert "\n" not in message
        assert "async with agent.stream(...) as events" in message
        # Nothing ran: the agent serves the next stream as usual.
        async with agent.stream("hello") as events:
            texts = [event async for event in events]
    assert texts
    assert len(model.requests) == 1


async def test_async_for_over_a_session_stream_names_async_with(tmp_path: Path) -> None:
    model = ScriptedProvider([reply_text("hi")])
    async with (
        SqliteSessionStore(tmp_path / "s.db") as store,
        AgentBuilder().provider(model).build() as agent,
    ):
        with pytest.raises(TypeError, match=r"async with agent\.stream\(\.\.\., session=\.\.\.\)"):
            async for _event in agent.stream("hello", session=store.session("a")):
                pass
        assert await store.session("a").load() == []


async def test_async_for_over_stream_structured_names_async_with() -> None:
    model = ScriptedProvider([reply_text('{"result": 3}'), reply_text('{"result": 3}')])
    async with AgentBuilder().provider(model).build() as agent:
        with pytest.raises(TypeError) as caught:
            async for _value in agent.stream_structured("a number", int):  # type: ignore[attr-defined]
                pass
        assert "async with agent.stream_structured(...) as values" in str(caught.value)
        async with agent.stream_structured("a number", int) as values:
            seen = [value async for value in values]
    assert seen[-1] == 3
    assert len(model.requests) == 1
