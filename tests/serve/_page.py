"""A minimal web-view page for the serve tests: a WebSocket client reading event frames."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio
import trio_websocket

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class Page:
    def __init__(self, connection: trio_websocket.WebSocketConnection) -> None:
        self.connection = connection
        self.events: list[dict[str, Any]] = []

    async def wait_for(self, kind: str) -> dict[str, Any]:
        while True:
            for event in self.events:
                if event["type"] == kind:
                    return event
            frame = json.loads(await self.connection.get_message())
            self.events.extend(frame["events"])

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.send_message(json.dumps(message))


@asynccontextmanager
async def open_page(
    url: str, headers: list[tuple[bytes, bytes]] | None = None, *, host: str | None = None
) -> AsyncIterator[Page]:
    parts = urlsplit(url)
    resource = parts.path + (f"?{parts.query}" if parts.query else "")
    stream = await trio.open_tcp_stream(parts.hostname or "127.0.0.1", parts.port or 80)
    rejected: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            connection = await trio_websocket.wrap_client_stream(
                nursery,
                stream,
                host or f"{parts.hostname}:{parts.port}",
                resource,
                extra_headers=headers,
            )
            page = Page(connection)
            await page.wait_for("hello")
            yield page
            nursery.cancel_scope.cancel()
    except* trio_websocket.HandshakeError as group:
        rejected = group.exceptions[0]
    finally:
        await stream.aclose()
    if rejected is not None:
        raise rejected
