"""A test page: a WebSocket client that collects every event the server sends."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
import trio_websocket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kova.web import EventServer


class TestPage:
    """Reads frames in a task of its own; ``events`` grows as they arrive."""

    __test__ = False

    def __init__(self, connection: trio_websocket.WebSocketConnection) -> None:
        self.connection = connection
        self.events: list[dict[str, Any]] = []
        self.frames = 0
        self.closed: trio_websocket.ConnectionClosed | None = None
        self._changed = trio.Event()

    async def read(self) -> None:
        try:
            while True:
                frame = json.loads(await self.connection.get_message())
                assert frame["v"] == 1
                self.frames += 1
                self.events.extend(frame["events"])
                self._changed.set()
                self._changed = trio.Event()
        except trio_websocket.ConnectionClosed as closed:
            self.closed = closed
            self._changed.set()

    async def wait_for(self, kind: str, **fields: Any) -> dict[str, Any]:
        """The first event of this type (with these fields) seen, waiting for it."""
        while True:
            for event in self.events:
                if event["type"] == kind and all(event.get(k) == v for k, v in fields.items()):
                    return event
            if self.closed is not None:
                raise AssertionError(f"closed before {kind} {fields}: {self.closed}")
            await self._changed.wait()

    async def wait_closed(self) -> trio_websocket.ConnectionClosed:
        while self.closed is None:
            await self._changed.wait()
        return self.closed

    async def send(self, message: dict[str, Any] | str) -> None:
        await self.connection.send_message(
            message if isinstance(message, str) else json.dumps(message)
        )

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    def text(self, turn: int | None = None) -> str:
        pieces = []
        for event in self.events:
            if event["type"] == "hello":
                pieces.extend(
                    e["text"]
                    for e in event["replay"]
                    if e["type"] == "text" and (turn is None or e["turn"] == turn)
                )
            elif event["type"] == "text" and (turn is None or event["turn"] == turn):
                pieces.append(event["text"])
        return "".join(pieces)


@asynccontextmanager
async def open_page(
    server: EventServer, *, url: str | None = None, headers: list[tuple[bytes, bytes]] | None = None
) -> AsyncIterator[TestPage]:
    """A connected page; the socket is ours and always closed (whoever ends the connection)."""
    parts = urlsplit(url or server.websocket_url)
    resource = parts.path + (f"?{parts.query}" if parts.query else "")
    stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
    rejected: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            connection = await trio_websocket.wrap_client_stream(
                nursery,
                stream,
                f"{parts.hostname}:{parts.port}",
                resource,
                extra_headers=headers,
                max_message_size=2**26,
            )
            page = TestPage(connection)
            nursery.start_soon(page.read)
            await page.wait_for("hello")
            yield page
            nursery.cancel_scope.cancel()
    except* trio_websocket.HandshakeError as group:
        rejected = group.exceptions[0]
    finally:
        await stream.aclose()
    if rejected is not None:
        raise rejected
