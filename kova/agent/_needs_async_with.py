"""One clear line for ``async for`` on a stream that must be entered with ``async with``.

``agent.stream(...)`` is an async context manager: the turn runs inside its block (cancelled
when the block is left early), so ``async for event in agent.stream(...)`` cannot be made
safe on trio, where nothing would close the turn. Python's own error for it, "'async for'
requires an object with __aiter__ method, got TurnStream", names neither the fix nor the
pattern (kova.asyncio's bridged agent does iterate directly, docs/asyncio.md); this one does.
"""

from __future__ import annotations

from typing import NoReturn

__all__ = ["refuse_async_for"]


def refuse_async_for(stream: object, call: str, name: str) -> NoReturn:
    """Raise the :class:`TypeError` for ``async for`` over ``stream`` (made by ``call``,
    whose items are ``name``)."""
    raise TypeError(
        f"{call} is an async context manager, not an async iterator: write "
        f"`async with {call} as {name}: async for ... in {name}` "
        f"(got async for over a {type(stream).__name__})"
    )
