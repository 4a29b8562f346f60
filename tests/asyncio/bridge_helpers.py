"""Shared by the kova.asyncio tests: event loops to run on, a fake model server in a thread
of its own, and a census of the trio tasks in a guest run."""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import trio
import uvloop

from kova.testing import ScriptLike, open_openai_server

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator

T = TypeVar("T")

LOOPS = ("asyncio", "uvloop")


def run_on(loop: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run(main())`` on the standard loop, or on uvloop."""
    if loop == "uvloop":
        return uvloop.run(main())
    return asyncio.run(main())


@contextmanager
def fake_openai_in_thread(script: ScriptLike) -> Iterator[str]:
    """kova's fake OpenAI server on loopback, served by ``trio.run`` in a thread of its own
    (so the code under test can have the main thread's event loop); yields its base URL."""
    ready: list[str] = []
    started = threading.Event()
    stop: list[Callable[[], None]] = []

    async def serve() -> None:
        async with open_openai_server(script) as server:
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                stop.append(lambda: token.run_sync_soon(scope.cancel))
                ready.append(server.base_url)
                started.set()
                await trio.sleep_forever()

    thread = threading.Thread(target=trio.run, args=(serve,), name="fake model server")
    thread.start()
    try:
        assert started.wait(10), "the fake model server did not start"
        yield ready[0]
    finally:
        if stop:
            stop[0]()
        thread.join(10)
        assert not thread.is_alive()


async def trio_task_count() -> int:
    """How many trio tasks exist in the current run (a trio function: run it in the guest
    run with ``runtime.run``)."""

    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(
            count(child) for nursery in task.child_nurseries for child in nursery.child_tasks
        )

    await trio.lowlevel.checkpoint()
    return count(trio.lowlevel.current_root_task())
