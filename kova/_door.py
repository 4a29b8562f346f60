"""Where kova meets asyncio: the seam between kova's trio core and the asyncio bridge.

kova runs on trio. An asyncio application reaches it through :mod:`kova.asyncio`, which runs
one trio *guest run* on the application's loop; plain code reaches it through
``agent.run_sync``. This module is what the rest of kova needs to know about that, without
importing the bridge (and so without importing :mod:`asyncio` at all):

- :data:`ASYNCIO_HOST`, a trio run-local set by the bridge: the asyncio loop this trio run
  is a guest of, able to run a coroutine there. ``@tool(runs_on="asyncio")`` tools use it.
- :func:`require_trio`, the check at kova's public doors: awaiting kova from asyncio without
  the bridge is one clear :class:`RuntimeError`, not trio's internal
  ``AttributeError: 'RunContext' object has no attribute 'runner'``.
- :func:`asyncio_hint`, the same hint for a tool that failed with asyncio's "no running
  event loop" (it used an asyncio library under trio).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

import trio

from ._errors import BuildError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

__all__ = [
    "ASYNCIO_HOST",
    "AsyncioHost",
    "asyncio_hint",
    "asyncio_tool_error",
    "check_asyncio_tools",
    "require_trio",
    "runs_on_asyncio",
]

T = TypeVar("T")

DOCS = "docs/asyncio.md"

HINT = (
    "kova runs on trio. From asyncio code, use kova.asyncio "
    "(`async with kova.asyncio.open_agent(agent) as bridged: await bridged.run(...)`); "
    f"from plain synchronous code, `agent.run_sync(...)`. See {DOCS}."
)
"""What to do, said the same way at every door."""


class AsyncioHost(Protocol):
    """The asyncio loop a trio guest run lives on (implemented by :mod:`kova.asyncio`)."""

    async def run_on_host(self, function: Callable[[], Awaitable[T]]) -> T:
        """Await ``function()`` as an asyncio task on the host loop, from a trio task.

        Cancelling the trio caller cancels the asyncio task and returns only once it ended.
        """
        ...


ASYNCIO_HOST: trio.lowlevel.RunVar[AsyncioHost | None] = trio.lowlevel.RunVar(
    "kova.asyncio host", default=None
)
"""Set by :mod:`kova.asyncio` in its guest run; unset in a plain ``trio.run``."""


def require_trio(what: str) -> None:
    """Raise the door's :class:`RuntimeError` unless called from a trio task.

    ``trio.lowlevel.in_trio_task()`` and not ``in_trio_run()``: while a guest run is active,
    trio's run context is set for the whole thread, so asyncio code on the host loop is "in
    the run" but never "in a task", and awaiting kova there would hand trio's traps to
    asyncio's scheduler.
    """
    if not trio.lowlevel.in_trio_task():
        raise RuntimeError(f"{what} was awaited outside trio. {HINT}")


_NO_LOOP = "no running event loop"
"""asyncio's message when an asyncio-only library is used where no asyncio loop runs."""


def asyncio_hint(error: BaseException) -> str | None:
    """The door's hint when ``error`` is asyncio's "no running event loop", else ``None``."""
    if isinstance(error, RuntimeError) and _NO_LOOP in str(error):
        return (
            "the tool uses an asyncio library, and kova's tools run on trio: mark it "
            '@tool(runs_on="asyncio") and run the agent through kova.asyncio '
            f"(see {DOCS})"
        )
    return None


def runs_on_asyncio(tool: object) -> bool:
    """Whether ``tool`` must be awaited on an asyncio loop (``@tool(runs_on="asyncio")``)."""
    return getattr(tool, "runs_on", "trio") == "asyncio"


def asyncio_tool_error(names: Iterable[str]) -> BuildError:
    """The error for asyncio tools used where no asyncio loop hosts the trio run."""
    listed = ", ".join(repr(name) for name in names)
    return BuildError(
        f'tool {listed} runs on asyncio (@tool(runs_on="asyncio")), but this agent runs '
        "under plain trio, with no asyncio loop to await it on: open the agent from asyncio "
        "with `async with kova.asyncio.open_agent(agent)` (or call agent.run_sync, which "
        f"starts one), or make the tool a trio tool. See {DOCS}."
    )


def check_asyncio_tools(tools: Iterable[object]) -> None:
    """Raise :func:`asyncio_tool_error` if an asyncio tool is among ``tools`` and this trio
    run is not a guest of an asyncio loop."""
    names = [getattr(tool, "name", "?") for tool in tools if runs_on_asyncio(tool)]
    if names and ASYNCIO_HOST.get() is None:
        raise asyncio_tool_error(names)
