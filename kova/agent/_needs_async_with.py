"""One clear line for ``async for`` on a stream that must be entered with ``async with``.

``agent.stream(...)`` is an async context manager: the turn runs inside its block (cancelled
when the block is left early), so ``async for event in agent.stream(...)`` cannot be made
safe on trio, where nothing would close the turn. Python's own error for it, "'async for'
requires an object with __aiter__ method, got TurnStream", names neither the fix nor the
pattern (kova.asyncio's bridged agent does iterate directly, docs/asyncio.md); this one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, NoReturn, TypeVar

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

__all__ = ["NeedsAsyncWith", "refuse_async_for"]

T = TypeVar("T")


def refuse_async_for(stream: object, call: str, name: str) -> NoReturn:
    """Raise the :class:`TypeError` for ``async for`` over ``stream`` (made by ``call``,
    whose items are ``name``)."""
    raise TypeError(
        f"{call} is an async context manager, not an async iterator: write "
        f"`async with {call} as {name}: async for ... in {name}` "
        f"(got async for over a {type(stream).__name__})"
    )


class NeedsAsyncWith(Generic[T]):
    """An async context manager (``inner``) that answers ``async for`` with
    :func:`refuse_async_for` instead of Python's bare TypeError."""

    __slots__ = ("_call", "_inner", "_name")

    def __init__(self, inner: AbstractAsyncContextManager[T], call: str, name: str) -> None:
        self._inner = inner
        self._call = call
        self._name = name

    def __aiter__(self) -> NoReturn:
        refuse_async_for(self._inner, self._call, self._name)

    async def __aenter__(self) -> T:
        return await self._inner.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, traceback)
