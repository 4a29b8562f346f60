"""``agent.run_sync``: one turn from plain synchronous code (scripts, CLIs, notebooks).

The agent is opened for the call and closed after it, in an event loop of the call's own:

- no loop running in this thread: ``trio.run`` right here;
- a loop already running in this thread (a Jupyter cell, a sync helper called from async
  code): the same in a worker thread, which the call joins, because a thread runs one event
  loop at a time; the running loop is blocked meanwhile, as by any blocking call;
- the agent has tools marked ``@tool(runs_on="asyncio")``: ``asyncio.run`` with kova's trio
  guest run (:mod:`kova.asyncio`) instead of ``trio.run``, so those tools have their loop.

Nothing outlives the call: the loop, the worker thread and every task are gone when it
returns, and an interrupt (Ctrl-C, a notebook's stop button) cancels the turn and waits for
it before the ``KeyboardInterrupt`` goes on.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

import trio

from .._door import runs_on_asyncio
from .._errors import BuildError
from .._groups import raise_lone

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._seams import OpenAgent

__all__ = ["run_sync"]

T = TypeVar("T")
A = TypeVar("A", bound="OpenAgent")

_WAKE_UP = 0.1
"""Seconds between checks for Ctrl-C while the worker thread runs the turn."""


def run_sync(agent: A, turn: Callable[[A], Awaitable[T]], *, what: str) -> T:
    """Open ``agent``, await ``turn(agent)`` in a loop of its own, close it; return the result.

    Raises:
        RuntimeError: called from a trio task (where it would block the run).
        BuildError: the agent is already open.
        Whatever the turn raised, as itself.
    """
    if trio.lowlevel.in_trio_task():
        raise RuntimeError(
            f"agent.{what}() blocks its thread until the turn is over; inside trio, await "
            f"the async form (agent.{what.removesuffix('_sync')}(...)) instead"
        )
    if agent.is_open:
        raise BuildError(
            f"agent.{what}() opens the agent for the call, but this agent is already open "
            "(an `async with agent` block, or kova.asyncio.open_agent): await the async "
            "method there instead"
        )
    on_asyncio = any(runs_on_asyncio(tool) for tool in agent.config.registry)
    call: _Call[A, T] = _Call(agent, turn, on_asyncio=on_asyncio)
    if _loop_running_here():
        return call.in_worker_thread()
    return call.here()


def _loop_running_here() -> bool:
    """Whether this thread already runs an event loop (asyncio's, or a trio run)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return trio.lowlevel.in_trio_run()
    return True


async def _open_and_run(agent: A, turn: Callable[[A], Awaitable[T]]) -> T:
    async with agent:
        return await turn(agent)


class _Call(Generic[A, T]):
    """One ``run_sync`` call: the turn, where it runs, and how to interrupt it."""

    __slots__ = ("_agent", "_interrupt", "_interrupted", "_on_asyncio", "_turn")

    def __init__(self, agent: A, turn: Callable[[A], Awaitable[T]], *, on_asyncio: bool) -> None:
        self._agent = agent
        self._turn = turn
        self._on_asyncio = on_asyncio
        self._interrupt: Callable[[], None] | None = None
        """Cancels the turn from another thread, once its loop is up."""
        self._interrupted = False
        """Set by the calling thread on Ctrl-C. Each thread writes its attribute, then reads
        the other's: whichever comes second sees the first, so the turn is cancelled even
        when Ctrl-C comes before its loop is up."""

    def here(self) -> T:
        try:
            if self._on_asyncio:
                return asyncio.run(self._on_guest_run())
            return trio.run(self._in_trio)
        except BaseExceptionGroup as group:
            raise_lone(group)

    async def _in_trio(self) -> T:
        token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:

            def interrupt() -> None:
                token.run_sync_soon(scope.cancel)

            self._interrupt = interrupt
            if self._interrupted:
                scope.cancel()
            return await _open_and_run(self._agent, self._turn)
        raise KeyboardInterrupt  # interrupted: the worker's caller re-raises its own

    async def _on_guest_run(self) -> T:
        from .._guest import open_runtime

        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def interrupt() -> None:
            loop.call_soon_threadsafe(task.cancel)

        self._interrupt = interrupt
        if self._interrupted:
            task.cancel()
        async with open_runtime() as runtime:
            return await runtime.run(_open_and_run, self._agent, self._turn)

    def in_worker_thread(self) -> T:
        results: list[T] = []
        errors: list[BaseException] = []
        finished = threading.Event()

        def work() -> None:
            try:
                results.append(self.here())
            except BaseException as exc:  # handed to the calling thread, raised there
                errors.append(exc)
            finally:
                finished.set()

        worker = threading.Thread(target=work, name="kova run_sync", daemon=True)
        # Waiting on our own event, with a timeout, and not in Thread.join: Linux may run the
        # signal handler on any thread, and only a wait with a timeout lets the main thread
        # see Ctrl-C then; and a join interrupted by KeyboardInterrupt marks the thread
        # stopped while it still runs (CPython's bpo-45274 handling), so no later join waits.
        try:
            worker.start()  # the turn may be under way before start() returns
            while not finished.wait(_WAKE_UP):
                pass
        except KeyboardInterrupt:
            self._interrupted = True
            interrupt = self._interrupt
            if interrupt is not None:
                interrupt()
            while not finished.wait(_WAKE_UP):
                pass
            worker.join()
            raise
        worker.join()
        if errors:
            raise errors[0]
        return results[0]
