"""A WebSocket that breaks the protocol gets a close frame from Hypercorn.

RFC 6455 (7.1.7, 7.4.1) asks an endpoint that fails a WebSocket connection to send a close
frame with the reason's code first: 1002 for a frame the protocol forbids (unmasked, a
reserved opcode or bit), 1007 for text that is not UTF-8, 1009 for a frame over the size
limit. Hypercorn's WebSocket stream (on wsproto) drops such a connection without one:
wsproto reports the broken frame as a ``CloseConnection`` event carrying the code, with its
connection still open, and Hypercorn, which answers a close only when the peer started one,
just ends the stream. Browsers and clients then see 1006 (abnormal closure) whatever the
reason.

:func:`close_failed_websockets` makes Hypercorn answer that event with the close frame (the
code and reason wsproto chose) before it ends the stream. kova calls it wherever it serves
with Hypercorn (``kova.serve.app``, kova's web view, ``kova serve``); it changes Hypercorn's
WebSocket stream class, so every Hypercorn WebSocket app of the process gets the close frame
(nothing else of Hypercorn's behaviour changes). It does nothing on a Hypercorn whose stream
does not have the methods it wraps.
"""

from __future__ import annotations

from typing import Any

__all__ = ["close_failed_websockets"]

_MARK = "_kova_closes_failed_websockets"


def close_failed_websockets() -> bool:
    """Make Hypercorn send the close frame of a WebSocket connection it fails (once per
    process; later calls do nothing). Returns whether Hypercorn's stream is wrapped."""
    try:
        from hypercorn.protocol.events import StreamClosed
        from hypercorn.protocol.ws_stream import WSStream
        from wsproto.connection import ConnectionState
        from wsproto.events import CloseConnection
    except ImportError:  # no Hypercorn: nothing to change
        return False
    handle_events = getattr(WSStream, "_handle_events", None)
    if handle_events is None or not hasattr(WSStream, "_send_wsproto_event"):
        return False
    if getattr(handle_events, _MARK, False):
        return True

    async def handle_events_failing_with_a_close_frame(self: Any) -> None:
        connection = self.connection
        failed: list[Any] = []
        events = connection.events

        def events_before_a_failure() -> Any:
            for event in events():
                # A close the peer sent moves the connection out of OPEN before wsproto
                # hands it over; one still OPEN is wsproto failing the connection.
                if isinstance(event, CloseConnection) and connection.state is ConnectionState.OPEN:
                    failed.append(event)
                    return
                yield event

        connection.events = events_before_a_failure
        try:
            await handle_events(self)
        finally:
            del connection.events
        if failed and not self.closed:
            await self._send_wsproto_event(
                CloseConnection(code=failed[0].code, reason=failed[0].reason)
            )
            await self.send(StreamClosed(stream_id=self.stream_id))

    setattr(handle_events_failing_with_a_close_frame, _MARK, True)
    WSStream._handle_events = handle_events_failing_with_a_close_frame  # type: ignore[method-assign]
    return True
