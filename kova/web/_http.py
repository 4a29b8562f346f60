"""The few HTTP pieces the event server needs: read a request head, answer with a static
file or an error, and hand a WebSocket upgrade (with the bytes already read) to
trio-websocket.

One port serves both the page and its WebSocket, so the page needs no configuration and the
origin check can compare the page's origin with the host it connected to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import attrs
import trio

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ReplayStream", "RequestHead", "read_head", "response"]

MAX_HEAD_BYTES = 16 * 1024

_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class HeadError(ValueError):
    """The bytes on the connection are not an HTTP/1.1 request head we accept."""


@attrs.frozen(kw_only=True)
class RequestHead:
    """An HTTP request line and headers (header names lower-cased; the last one wins)."""

    method: str
    target: str
    headers: Mapping[str, str]

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> Mapping[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    @property
    def is_websocket(self) -> bool:
        return self.headers.get("upgrade", "").lower() == "websocket"


async def read_head(stream: trio.abc.ReceiveStream) -> tuple[RequestHead, bytes]:
    """Read one request head; returns it and every byte read (the head and anything after).

    Raises:
        HeadError: the connection closed early, the head is too large or malformed.
    """
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > MAX_HEAD_BYTES:
            raise HeadError("request head too large")
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise HeadError("connection closed before the request head ended")
        buffer += chunk
    head, _, _ = bytes(buffer).partition(b"\r\n\r\n")
    try:
        lines = head.decode("ascii").split("\r\n")
    except UnicodeDecodeError:
        raise HeadError("request head is not ASCII") from None
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HeadError("malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise HeadError("malformed header line")
        headers[name.lower()] = value.strip()
    return RequestHead(method=parts[0], target=parts[1], headers=headers), bytes(buffer)


def response(
    status: int,
    body: bytes,
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """A complete HTTP/1.1 response that closes the connection."""
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Referrer-Policy: no-referrer",
    ]
    lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class ReplayStream(trio.abc.Stream):
    """A stream that first returns bytes already read from ``stream``, then reads on."""

    def __init__(self, stream: trio.abc.Stream, already_read: bytes) -> None:
        self._stream = stream
        self._pending = already_read

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._pending:
            size = len(self._pending) if max_bytes is None else max_bytes
            chunk, self._pending = self._pending[:size], self._pending[size:]
            await trio.lowlevel.checkpoint()
            return chunk
        return bytes(await self._stream.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()
