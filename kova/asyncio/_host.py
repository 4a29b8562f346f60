"""``on_asyncio``: an asyncio coroutine function that kova's trio side can await."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from .._door import ASYNCIO_HOST, HINT

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["on_asyncio"]

P = ParamSpec("P")
T = TypeVar("T")


def on_asyncio(function: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Wrap an asyncio coroutine function so that kova can await it from its trio side.

    Each call is awaited as an asyncio task on the application's loop (the loop
    :mod:`kova.asyncio` runs kova on), and cancelling kova's side cancels that task and
    waits for it. Use it for the callables kova awaits: an approval handler that waits for a
    person through asyncio code (a future resolved by another endpoint), a lifecycle hook
    that writes with an asyncio database driver::

        agent = AgentBuilder().provider(p).approval_handler(on_asyncio(ask_the_user)).build()

    (For tools, ``@tool(runs_on="asyncio")`` does the same.) The wrapper keeps the
    function's signature, so an approval handler's second parameter is still seen.

    Raises:
        RuntimeError: when called, if kova is not running under :mod:`kova.asyncio`.
    """

    @functools.wraps(function)
    async def awaited_on_asyncio(*args: P.args, **kwargs: P.kwargs) -> T:
        host = ASYNCIO_HOST.get()
        if host is None:
            raise RuntimeError(
                f"{getattr(function, '__qualname__', function)!r} is an asyncio function "
                f"(kova.asyncio.on_asyncio), but kova is not running under kova.asyncio. {HINT}"
            )
        return await host.run_on_host(functools.partial(function, *args, **kwargs))

    return awaited_on_asyncio
