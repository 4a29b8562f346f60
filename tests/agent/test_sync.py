"""agent.run_sync and run_structured_sync: one turn from plain synchronous code, with no loop
running and inside a running asyncio loop (a notebook cell), leaving nothing behind."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import TYPE_CHECKING

import pytest
import trio
from pydantic import BaseModel

import kova
from kova.agent import Agent, AgentBuilder, RetryConfig
from kova.testing import ErrorReply, ScriptedProvider, reply_text, reply_tool_calls
from kova.tools import tool

if TYPE_CHECKING:
    from pathlib import Path


def agent_of(*replies: object, tools: tuple[object, ...] = ()) -> Agent:
    builder = (
        AgentBuilder()
        .provider(ScriptedProvider(list(replies)))  # type: ignore[arg-type]
        .retry_config(RetryConfig(max_retries=0))
    )
    for item in tools:
        builder.tool(item)  # type: ignore[arg-type]
    return builder.build()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(runs_on="asyncio")
async def ticket(title: str) -> str:
    """File a ticket with an asyncio-only client.

    Args:
        title: the ticket's title.
    """
    await asyncio.sleep(0)
    return f"filed {title!r} on {type(asyncio.get_running_loop()).__name__}"


class NewThreads:
    """Threads started since this was made that are still alive (trio's thread cache keeps
    idle workers, "Trio thread N", for a few seconds: those are not left behind work)."""

    def __init__(self) -> None:
        self._before = set(threading.enumerate())

    def left(self) -> list[str]:
        return [
            thread.name
            for thread in threading.enumerate()
            if thread not in self._before and not thread.name.startswith("Trio thread")
        ]


def test_run_sync_with_no_loop_running() -> None:
    agent = agent_of(reply_tool_calls(("add", {"a": 2, "b": 2})), reply_text("4"), tools=(add,))
    threads = NewThreads()
    response = agent.run_sync("2 + 2?")
    assert response.text == "4"
    assert response.llm_calls == 2
    assert not agent.is_open
    assert threads.left() == []


def test_run_sync_twice_on_one_agent() -> None:
    agent = agent_of(reply_text("one"), reply_text("two"))
    assert [agent.run_sync("a").text, agent.run_sync("b").text] == ["one", "two"]


def test_run_sync_inside_a_running_asyncio_loop_uses_a_worker_thread() -> None:
    agent = agent_of(reply_text("from a notebook cell"))
    threads = NewThreads()
    during: list[str] = []

    async def cell() -> str:
        response = agent.run_sync("hello")
        during.extend(threads.left())  # the worker thread is joined before run_sync returns
        return response.text

    assert asyncio.run(cell()) == "from a notebook cell"
    assert during == []
    assert threads.left() == []


def test_run_sync_runs_asyncio_tools_on_an_asyncio_loop_of_its_own() -> None:
    agent = agent_of(
        reply_tool_calls(("ticket", {"title": "disk full"})), reply_text("done"), tools=(ticket,)
    )
    result = agent.run_sync("file it").new_messages[1].content[0]
    assert result.text == "filed 'disk full' on _UnixSelectorEventLoop"


def test_run_sync_with_asyncio_tools_inside_a_running_loop() -> None:
    agent = agent_of(
        reply_tool_calls(("ticket", {"title": "x"})), reply_text("done"), tools=(ticket,)
    )

    threads = NewThreads()

    async def cell() -> str:
        return agent.run_sync("file it").text

    assert asyncio.run(cell()) == "done"
    assert threads.left() == []


def test_run_sync_raises_the_turns_error_as_itself() -> None:
    with pytest.raises(kova.RateLimited) as caught:
        agent_of(ErrorReply(status_code=429)).run_sync("hello")
    assert not isinstance(caught.value, BaseExceptionGroup)

    async def cell() -> None:
        agent_of(ErrorReply(status_code=401)).run_sync("hello")

    with pytest.raises(kova.ProviderAuthError):
        asyncio.run(cell())


def test_run_sync_checks_its_input() -> None:
    with pytest.raises(TypeError, match="history"):
        agent_of(reply_text("x")).run_sync(42)  # type: ignore[arg-type]


class Verdict(BaseModel):
    ok: bool


def test_run_structured_sync() -> None:
    agent = agent_of(reply_text(json.dumps({"ok": True})))
    value, response = agent.run_structured_sync("is it ok?", Verdict)
    assert value == Verdict(ok=True)
    assert response.llm_calls == 1


def test_run_sync_takes_what_run_takes_a_journaled_turn_goes_on(tmp_path: Path) -> None:
    """A script's turn with ``journal=``: run again with its ``turn_id``, it is the recorded
    one (the provider has no second answer to give)."""
    from kova.durable import SqliteJournal

    agent = agent_of(reply_text("once"))
    journal = SqliteJournal(tmp_path / "j.db")
    first = agent.run_sync("hello", journal=journal, turn_id="t", deps=object())
    again = agent.run_sync("hello", journal=journal, turn_id="t")
    assert first.text == again.text == "once"


@pytest.mark.parametrize("name", ["run", "resume", "run_structured"])
def test_the_sync_methods_show_the_async_ones_parameters(name: str) -> None:
    shown = inspect.signature(getattr(Agent, f"{name}_sync"))
    assert shown == inspect.signature(getattr(Agent, name))
    assert getattr(Agent, f"{name}_sync").__name__ == f"{name}_sync"


async def test_run_sync_from_a_trio_task_says_to_await_instead() -> None:
    agent = agent_of(reply_text("x"))
    with pytest.raises(RuntimeError, match=r"await the async form \(agent.run\(\.\.\.\)\)"):
        agent.run_sync("hello")


async def test_run_sync_on_an_open_agent_is_refused() -> None:
    agent = agent_of(reply_text("x"))
    async with agent:

        def blocking() -> None:
            agent.run_sync("hello")

        with pytest.raises(kova.BuildError, match="already open"):
            # From a worker thread, as a sync helper would call it.
            await trio.to_thread.run_sync(blocking)
