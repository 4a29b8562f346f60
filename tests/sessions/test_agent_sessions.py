"""Turns on a session from every entry point: run, stream, run_structured, stream_structured,
resume (deferred approvals kept in the session), run_sync and the asyncio bridge. A turn is
appended when it completes; a failed or cancelled one appends nothing; two turns on one
session never interleave."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
import trio
from pydantic import BaseModel

import kova.asyncio
from kova import Message, Text, ToolResult
from kova.agent import AgentBuilder, RetryConfig, TurnCompleted
from kova.errors import (
    ProviderError,
    SessionBusyError,
    SessionConflictError,
    SessionError,
    StructuredOutputError,
)
from kova.sessions import (
    PostgresSessionStore,
    SessionStore,
    SessionWrite,
    SqliteSessionStore,
)
from kova.testing import ErrorReply, FunctionProvider, ScriptRequest, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from kova.agent import Agent


class Model:
    """Answers "echo N: <last user text>"; records what each request held."""

    def __init__(self) -> None:
        self.requests: list[tuple[Message, ...]] = []
        self.fail = False
        self.gate: trio.Event | None = None
        self.started = trio.Event()

    async def __call__(self, request: ScriptRequest) -> Any:
        self.requests.append(request.messages)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            return ErrorReply(status_code=400, message="refused")
        last = request.messages[-1]
        text = "".join(b.text for b in last.content if isinstance(b, Text))
        return reply_text(f"echo {len(self.requests)}: {text}")


def build(model: Any, *tools: Any, defer: bool = False) -> Agent:
    builder = (
        AgentBuilder().provider(FunctionProvider(model)).retry_config(RetryConfig(max_retries=0))
    )
    builder.tools(*tools)
    if defer:
        builder.defer_approvals()
    return builder.build()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """Each test on both stores kova ships."""
    opened: SessionStore
    if request.param == "sqlite":
        opened = SqliteSessionStore(tmp_path / "sessions.db")
    else:
        opened = PostgresSessionStore(request.getfixturevalue("postgres_db"))
    async with opened:
        yield opened


async def test_run_continues_the_session_and_appends_each_turn(store: SessionStore) -> None:
    model = Model()
    session = store.session("chat")
    async with build(model) as agent:
        first = await agent.run("hello", session=session)
        second = await agent.run("again", session=session)
    assert first.text == "echo 1: hello"
    # The second request held the first turn: the session's history, then the prompt.
    assert model.requests[1] == (
        Message.user("hello"),
        Message.assistant("echo 1: hello"),
        Message.user("again"),
    )
    assert await session.load() == [
        Message.user("hello"),
        Message.assistant("echo 1: hello"),
        Message.user("again"),
        Message.assistant("echo 2: again"),
    ]
    assert second.new_messages == (Message.assistant("echo 2: again"),)
    (info,) = await store.list()
    assert (info.id, info.title, info.messages) == ("chat", "hello", 4)
    assert (info.input_tokens, info.output_tokens) == (20, 10)


async def test_a_failed_or_cancelled_turn_appends_nothing(store: SessionStore) -> None:
    model = Model()
    session = store.session("chat")
    async with build(model) as agent:
        await agent.run("one", session=session)
        model.fail = True
        with pytest.raises(ProviderError, match="refused"):
            await agent.run("two", session=session)
        model.fail = False
        model.gate = trio.Event()
        with trio.move_on_after(0.2) as scope:
            await agent.run("three", session=session)
        assert scope.cancelled_caught
        model.gate = None
        await agent.run("four", session=session)
    assert [m.content[0].text for m in await session.load()] == [  # type: ignore[union-attr]
        "one",
        "echo 1: one",
        "four",
        "echo 4: four",
    ]


async def test_stream_appends_before_turn_completed_is_handed_on(
    store: SessionStore,
) -> None:
    model = Model()
    session = store.session("chat")
    async with build(model) as agent:
        async with agent.stream("hi", session=session) as events:
            async for event in events:
                if isinstance(event, TurnCompleted):
                    # Already in the session when the consumer sees the outcome.
                    assert await session.load() == [
                        Message.user("hi"),
                        Message.assistant("echo 1: hi"),
                    ]
        # Left early: nothing appended.
        model.gate = trio.Event()
        async with agent.stream("bye", session=session) as events:
            with trio.move_on_after(0.2):
                async for _ in events:
                    pass
        model.gate = None
        with pytest.raises(TypeError, match="needs the prompt"):
            async with agent.stream(session=session):
                pass
    assert len(await session.load()) == 2


class City(BaseModel):
    name: str


async def test_structured_turns_append_every_attempt(store: SessionStore) -> None:
    answers = iter(["not json", '{"name": "Oslo"}', '{"name": "Bergen"}'])

    def model(request: ScriptRequest) -> Any:
        return reply_text(next(answers))

    session = store.session("s")
    async with build(model) as agent:
        city, response = await agent.run_structured("a city", City, session=session)
        assert city == City(name="Oslo")
        assert len(await session.load()) == 1 + len(response.new_messages) == 4
        async with agent.stream_structured("another", City, session=session) as values:
            async for value in values:
                if values.done:
                    assert value == City(name="Bergen")
                    assert len(await session.load()) == 6  # appended before it came
        bad = iter(["no", "still no"])

        def wrong(request: ScriptRequest) -> Any:
            return reply_text(next(bad))

    async with build(wrong) as agent:
        with pytest.raises(StructuredOutputError):
            await agent.run_structured("third", City, session=session)
    assert len(await session.load()) == 6


@tool
def book(room: str) -> str:
    """Book a room."""
    return f"booked {room}"


async def test_a_paused_turn_is_kept_and_resumed_from_the_session(
    store: SessionStore,
) -> None:
    def model(request: ScriptRequest) -> Any:
        last = request.messages[-1]
        if isinstance(last.content[0], ToolResult):
            return reply_text("done: " + str(last.content[0].content))
        return reply_tool_calls(("book", {"room": "blue"}))

    session = store.session("approvals")
    async with build(model, book, defer=True) as agent:
        paused = await agent.run("book blue", session=session)
        assert paused.pending is not None
        pending = await session.pending()
        assert pending == paused.pending
        assert (await session.info()).pending  # type: ignore[union-attr]
        with pytest.raises(SessionError, match="waits for decisions"):
            await agent.run("something else", session=session)
        with pytest.raises(TypeError, match="pass only the decided pending"):
            await agent.resume(await session.load(), pending, session=session)
        decided = pending.approve(pending.calls[0].id)
        resumed = await agent.resume(decided, session=session)
    assert resumed.text == "done: booked blue"
    assert await session.pending() is None
    history = await session.load()
    assert history[0] == Message.user("book blue")
    assert history[-1] == Message.assistant("done: booked blue")
    assert len(history) == 4
    # The paused part and the resumed part are one turn.
    assert await session.rewind() == 4
    assert await session.load() == []


async def test_a_paused_turn_streams_on_from_the_session(store: SessionStore) -> None:
    def model(request: ScriptRequest) -> Any:
        if isinstance(request.messages[-1].content[0], ToolResult):
            return reply_text("ok")
        return reply_tool_calls(("book", {"room": "red"}))

    session = store.session("approvals")
    async with build(model, book, defer=True) as agent:
        await agent.run("book red", session=session)
        pending = await session.pending()
        assert pending is not None
        async with agent.stream(resume=pending.deny(pending.calls[0].id), session=session) as ev:
            (outcome,) = [e async for e in ev if isinstance(e, TurnCompleted)]
    assert outcome.response.text == "ok"
    assert (await session.load())[-1] == Message.assistant("ok")
    assert await session.pending() is None


async def test_two_turns_on_one_session_never_interleave(store: SessionStore) -> None:
    model = Model()
    model.gate = trio.Event()
    session = store.session("busy")
    async with build(model) as agent:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: agent.run("first", session=session))
            await model.started.wait()
            nursery.start_soon(lambda: agent.run("second", session=session))
            await trio.sleep(0.1)
            assert len(model.requests) == 1  # the second waits for the first
            with pytest.raises(SessionBusyError, match="busy"):
                await agent.run("third", session=store.session("busy", wait=False))
            model.gate.set()
    texts = [m.content[0].text for m in await session.load()]  # type: ignore[union-attr]
    assert texts == ["first", "echo 1: first", "second", "echo 2: second"]
    # The second turn ran over the first one's messages.
    assert model.requests[1][:2] == (Message.user("first"), Message.assistant("echo 1: first"))


async def test_a_turn_whose_session_changed_elsewhere_appends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    other = SqliteSessionStore(path)  # another process's store on the same file

    async def model(request: ScriptRequest) -> Any:
        # A writer that bypasses the session's hold (a store of another kind, a process
        # that lost its hold): the version check is the last guard.
        await other.write(
            "c", SessionWrite(version=0, keep=0, messages=(Message.user("elsewhere"),))
        )
        return reply_text("late")

    async with SqliteSessionStore(path) as store, build(model) as agent:
        with pytest.raises(SessionConflictError, match="nothing was appended"):
            await agent.run("hi", session=store.session("c"))
        assert await store.session("c").load() == [Message.user("elsewhere")]
    await other.aclose()


async def test_run_sync_and_the_asyncio_bridge_take_a_session(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    model = Model()
    agent = build(model)
    store = SqliteSessionStore(path)
    session = store.session("sync")

    def in_thread() -> None:
        assert agent.run_sync("one", session=session).text == "echo 1: one"
        assert agent.run_sync("two", session=session).text == "echo 2: two"

        async def main() -> str:
            async with kova.asyncio.open_agent(build(model)) as bridged:
                response = await bridged.run("three", session=session)
                texts = [
                    e.response.text
                    async for e in bridged.stream("four", session=session)
                    if isinstance(e, TurnCompleted)
                ]
                return response.text + " / " + texts[0]

        assert asyncio.run(main()) == "echo 3: three / echo 4: four"

    await trio.to_thread.run_sync(in_thread)
    assert len(await session.load()) == 8
    assert model.requests[3][:2] == (Message.user("one"), Message.assistant("echo 1: one"))
    await store.aclose()


async def test_the_asyncio_bridge_streams_a_paused_session_turn_on(tmp_path: Path) -> None:
    """``bridged.stream(resume=..., session=...)`` with no history: the session holds it."""

    def model(request: ScriptRequest) -> Any:
        if isinstance(request.messages[-1].content[0], ToolResult):
            return reply_text("ok")
        return reply_tool_calls(("book", {"room": "red"}))

    store = SqliteSessionStore(tmp_path / "s.db")
    session = store.session("approvals")

    async def main() -> str:
        async with kova.asyncio.open_agent(build(model, book, defer=True)) as bridged:
            await bridged.run("book red", session=session)
            pending = await bridged.runtime.run(session.pending)
            assert pending is not None
            decided = pending.deny(pending.calls[0].id)
            events = bridged.stream(resume=decided, session=session)
            (outcome,) = [e async for e in events if isinstance(e, TurnCompleted)]
            return outcome.response.text

    assert await trio.to_thread.run_sync(asyncio.run, main()) == "ok"
    assert await session.pending() is None
    assert len(await session.load()) == 4  # the prompt, the call, its denial, "ok"
    await store.aclose()


async def test_a_session_argument_of_another_type_is_refused(store: SessionStore) -> None:
    async with build(Model()) as agent:
        with pytest.raises(TypeError, match=r"session must be a kova\.sessions\.Session"):
            await agent.run("hi", session="chat")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"needs the paused turn's pending"):
            await agent.resume("hi")
    assert await store.list() == []


async def test_a_compacted_turn_keeps_the_full_history_and_the_view(
    store: SessionStore,
) -> None:
    from kova.agent import SlidingWindow

    model = Model()
    session = store.session("long")
    builder = (
        AgentBuilder().provider(FunctionProvider(model)).retry_config(RetryConfig(max_retries=0))
    )
    builder.context(SlidingWindow(), window=400, reserve=50)
    compacted = None
    async with builder.build() as agent:
        for number in range(12):
            response = await agent.run(f"turn {number} " + "x" * 300, session=session)
            if response.compaction is not None:
                compacted = response
                break
        assert compacted is not None, "the window never overflowed"
        view = await session.load(compacted=True)
        assert view == list(compacted.compaction.history)  # type: ignore[union-attr]
        full = await session.load()
        assert len(full) == 2 * (number + 1)  # every message, for audit
        assert len(view) < len(full)
        await agent.run("after", session=session)
    # The next turn started from the view, not from the whole history.
    assert list(model.requests[-1][: len(view)]) == view
    assert model.requests[-1][len(view)] == Message.user("after")
    assert len(await session.load()) == len(full) + 2
