"""One connected page: the WebSocket session that reads what the page sends and writes, in
frames, the events the event server queued for it.

The event server (:mod:`kova.web._server`) owns the page's place in its state and queues
events on the page's bounded channel without ever waiting; this module is the page's side
of that channel. One writer task drains it at most once per flush interval, so a burst of
deltas shares one frame and a lone event after a quiet spell goes out at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._log import get_logger
from . import _schema

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import trio_websocket

__all__ = ["CLOSE_NORMAL", "CLOSE_TOO_SLOW", "Page", "close_page", "serve_page"]

log = get_logger(__name__)

CLOSE_NORMAL = (1000, "bye")
CLOSE_TOO_SLOW = (1013, "too slow: reconnect for the current state")
_CLOSE_POLICY = 1008


class Page:
    """A connected page, as the event server tracks it."""

    __slots__ = ("dropped", "number", "scope", "send")

    def __init__(
        self, *, number: int, send: trio.MemorySendChannel[str], scope: trio.CancelScope
    ) -> None:
        self.number = number
        self.send = send
        """Where the server queues the page's encoded events (never waiting)."""
        self.scope = scope
        """Cancelled to drop the page."""
        self.dropped = False
        """Dropped for falling a whole buffer behind."""


async def serve_page(
    connection: trio_websocket.WebSocketConnection,
    page: Page,
    receive: trio.MemoryReceiveChannel[str],
    *,
    flush_interval: float,
    max_chat_chars: int,
    on_message: Callable[[Page, _schema.PageMessage], Awaitable[None] | None],
    on_batch: Callable[[int], None],
) -> tuple[int, str]:
    """Read the page's messages (handing each to ``on_message``) while a writer task sends
    what arrives on ``receive``, until the page closes the connection or sends a malformed
    message. Returns the close code and reason to send.

    ``on_batch`` is told the size of every frame's batch (the buffer peaks just before a
    drain).
    """
    import trio_websocket

    reason = CLOSE_NORMAL
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write, connection, receive, flush_interval, on_batch)
        while True:
            try:
                text = await connection.get_message()
            except trio_websocket.ConnectionClosed:
                break
            try:
                message = _schema.parse_page_message(text, max_chat_chars=max_chat_chars)
            except _schema.PageMessageError as exc:
                log.info("web.page.malformed", page=page.number, error=str(exc))
                reason = (_CLOSE_POLICY, f"malformed message: {exc}"[:120])
                break
            answer = on_message(page, message)
            if answer is not None:  # a store to read (a session listed or opened): ms
                await answer
        nursery.cancel_scope.cancel()
    return reason


async def close_page(
    connection: trio_websocket.WebSocketConnection, reason: tuple[int, str]
) -> None:
    """Close the connection with ``reason``, waiting a second at most (shielded)."""
    with trio.move_on_after(1) as cleanup:
        cleanup.shield = True
        await connection.aclose(code=reason[0], reason=reason[1])


async def _write(
    connection: trio_websocket.WebSocketConnection,
    receive: trio.MemoryReceiveChannel[str],
    flush_interval: float,
    on_batch: Callable[[int], None],
) -> None:
    import trio_websocket

    next_frame = trio.current_time()
    try:
        async for first in receive:
            # At most one frame per flush interval: a burst shares one frame, and a lone
            # event after a quiet spell goes out at once.
            await trio.sleep_until(next_frame)
            batch = [first]
            while True:
                try:
                    batch.append(receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            on_batch(len(batch))
            await connection.send_message(_schema.frame(batch))
            next_frame = trio.current_time() + flush_interval
    except trio_websocket.ConnectionClosed:
        pass
