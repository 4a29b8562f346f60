"""kova._guest.held_open: a trio context held open for an asyncio block (what kova.asyncio's
agent and the Temporal worker's agents are opened with). Errors and cancellation on the way
in and on the way out; real but short waits, as in the other kova.asyncio tests."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
import trio
from bridge_helpers import LOOPS, run_on

import kova.asyncio
from kova._guest import held_open

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Context:
    """A trio context that takes ``delay`` seconds to enter and to leave, and says how its
    block ended."""

    def __init__(self, *, delay: float = 0.0, fail_leaving: bool = False) -> None:
        self.delay = delay
        self.fail_leaving = fail_leaving
        self.entered = asyncio.Event()
        self.ended: list[str] = []

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[str]:
        self.entered.set()  # asyncio's Event.set is plain code: fine from the trio side
        await trio.sleep(self.delay)
        try:
            yield "value"
        except BaseException as exc:
            self.ended.append(type(exc).__name__)
            raise
        self.ended.append("left")
        await trio.sleep(self.delay)
        if self.fail_leaving:
            raise ValueError("leaving failed")


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_block_gets_the_value_and_an_error_leaving_is_raised(loop: str) -> None:
    context = Context(fail_leaving=True)

    async def main() -> None:
        async with kova.asyncio.open_runtime() as runtime:
            with pytest.raises(ValueError, match="leaving failed"):
                async with held_open(runtime, context, "the context") as value:
                    assert value == "value"
        assert context.ended == ["left"]

    run_on(loop, main)


def test_a_caller_cancelled_while_entering_leaves_cleanly(loop: str) -> None:
    context = Context(delay=0.05)

    async def main() -> None:
        async with kova.asyncio.open_runtime() as runtime:

            async def enter() -> None:
                async with held_open(runtime, context, "the context"):
                    raise AssertionError("not reached")

            task = asyncio.create_task(enter())
            await context.entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert context.ended == ["left"]  # entered after all, then left as a block ends

    run_on(loop, main)


def test_a_caller_cancelled_while_leaving_sees_it_once_the_context_is_left(loop: str) -> None:
    context = Context(delay=0.05)
    inside = asyncio.Event()

    async def main() -> None:
        async with kova.asyncio.open_runtime() as runtime:

            async def use() -> None:
                async with held_open(runtime, context, "the context"):
                    inside.set()

            task = asyncio.create_task(use())
            await inside.wait()
            await asyncio.sleep(0.01)  # leaving now (the context's own delay)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert context.ended == ["left"]

    run_on(loop, main)
