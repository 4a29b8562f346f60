"""An explicit cancel token: cancel a turn from another task.

:class:`CancelToken` is the public part. :func:`guarded` runs a turn so that a token cancels
it (raising kova's :class:`~kova.TurnCancelled`), and :func:`stream_in_task` runs a streamed turn
in a task of its own for the same reason: the agent uses both.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import KovaError, TurnCancelled
from .._groups import lone_exceptions, raise_lone
from ._events import AgentEvent, GuardTripped

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine

__all__ = ["CancelToken", "guarded", "stream_in_task"]

T = TypeVar("T")


class CancelToken:
    """Cancels the turns it is passed to, from any task of the same trio run.

    ``agent.run(history, cancel=token)`` raises :class:`kova.TurnCancelled` once
    ``token.cancel()`` is called; the turn produces no messages and everything it started
    (provider request, tool calls) has stopped before ``run`` returns. A cancelled token stays
    cancelled: later turns given it are cancelled at once. (To stop a turn from the *same*
    task structure, a trio cancel scope is simpler: ``trio.Cancelled`` then propagates
    untouched.)
    """

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str | None = None) -> None:
        """Cancel every turn using this token (idempotent; the first reason is kept)."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    async def wait(self) -> None:
        """Return once the token is cancelled."""
        await self._event.wait()


async def guarded(turn: Coroutine[Any, Any, T], cancel: CancelToken | None) -> T:
    """Await ``turn``, cancelled by ``cancel`` (raising kova's TurnCancelled) if it fires."""
    if cancel is None:
        return await turn
    if cancel.cancelled:
        turn.close()
        raise TurnCancelled(cancel.reason)
    scope = trio.CancelScope()

    async def watch() -> None:
        await cancel.wait()
        scope.cancel(reason="kova CancelToken")

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            with scope:
                response = await turn
            nursery.cancel_scope.cancel(reason="turn finished")
    except BaseExceptionGroup as group:
        raise_lone(group)
    if scope.cancelled_caught:
        raise TurnCancelled(cancel.reason)
    return response


@asynccontextmanager
async def stream_in_task(
    steps: Callable[..., AsyncGenerator[AgentEvent, None]],
    cancel: CancelToken | None,
    buffer: int,
    *,
    with_nursery: bool = False,
    on_trip: Callable[[BaseException], None] | None = None,
) -> AsyncIterator[AsyncIterator[AgentEvent]]:
    """A streamed turn (``steps()``, the agent loop's events) in a producer task, so that
    ``cancel`` can cancel it from outside; up to ``buffer`` events wait for the consumer.
    ``with_nursery``: the producer task opens a nursery and passes it as
    ``steps(nursery=...)`` (for the guards that run beside the turn). A guard's trip (told
    through ``steps(on_trip=...)``, and passed on to ``on_trip``) drops the events still
    waiting for the consumer: it gets the ``GuardTripped`` event, then the error."""
    if isinstance(buffer, bool) or not isinstance(buffer, int):
        raise TypeError(f"buffer must be an int (events held for the consumer), got {buffer!r}")
    if buffer < 0:
        raise ValueError(f"buffer must be at least 0, got {buffer}")
    send, receive = trio.open_memory_channel[AgentEvent | KovaError](buffer)
    tripped: list[BaseException] = []

    def trip(exc: BaseException) -> None:
        tripped.append(exc)
        if on_trip is not None:
            on_trip(exc)

    async def pump() -> None:
        if not with_nursery:
            await feed(steps(on_trip=trip))
            return
        with lone_exceptions():  # a guard's trip reaches the consumer as itself
            async with trio.open_nursery() as nursery:
                await feed(steps(nursery=nursery, on_trip=trip))
                nursery.cancel_scope.cancel(reason="the turn is over")

    async def feed(turn: AsyncGenerator[AgentEvent, None]) -> None:
        try:
            async for event in turn:
                await send.send(event)
        finally:
            await turn.aclose()

    async def produce() -> None:
        with send:
            try:
                await guarded(pump(), cancel)
            except KovaError as exc:
                await send.send(exc)  # raised to the consumer by its iterator

    async def events() -> AsyncIterator[AgentEvent]:
        async for item in receive:
            if isinstance(item, KovaError):
                raise item
            if tripped and type(item) is not GuardTripped:
                continue  # what the turn made before a guard tripped stays here
            yield item

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            iterator = events()
            try:
                yield iterator
            finally:
                # No checkpoint here: an await inside the cancelled nursery would raise
                # Cancelled and replace the consumer's own exception.
                nursery.cancel_scope.cancel(reason="stream consumer left")
                receive.close()
                await iterator.aclose()  # type: ignore[attr-defined]
    except BaseExceptionGroup as group:
        # The producer never raises (it hands KovaErrors to the consumer), so a lone
        # exception here is the consumer's own: give it back as it was raised.
        raise_lone(group)
