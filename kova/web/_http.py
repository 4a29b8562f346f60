"""The few HTTP pieces the event server needs: read a request head, check its ``Host`` and
``Origin``, answer with a static file or an error, and hand a WebSocket upgrade (with the
bytes already read) to trio-websocket.

One port serves both the page and its WebSocket, so the page needs no configuration and the
origin check can compare the page's origin with the host it connected to.
"""

from __future__ import annotations

import contextlib
import struct
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import trio

from .._record import Record

if TYPE_CHECKING:
    from collections.abc import Mapping

    import trio_websocket

__all__ = [
    "HeadError",
    "ReplayStream",
    "RequestHead",
    "host_allowed",
    "load_static",
    "origin_allowed",
    "read_head",
    "response",
    "static_response",
]

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

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
}
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class HeadError(ValueError):
    """The bytes on the connection are not an HTTP/1.1 request head we accept."""


class RequestHead(Record):
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


def load_static() -> dict[str, tuple[bytes, str]]:
    """The page's files by path: their bytes and content type (read once, at startup)."""
    folder = resources.files("kova.web") / "static"
    return {
        path: ((folder / name).read_bytes(), content_type)
        for path, (name, content_type) in _STATIC.items()
    }


def static_response(head: RequestHead, files: Mapping[str, tuple[bytes, str]]) -> bytes:
    """The answer to a plain (not WebSocket) request: one of ``files`` or an error."""
    if head.method not in ("GET", "HEAD"):
        return response(405, b"method not allowed\n")
    found = files.get(head.path)
    if found is None:
        return response(404, b"not found\n")
    body, content_type = found
    ws = f"ws://{head.headers['host']}"
    policy = (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self' {ws}; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
    return response(
        200,
        b"" if head.method == "HEAD" else body,
        content_type=content_type,
        headers={"Content-Security-Policy": policy, "X-Frame-Options": "DENY"},
    )


def host_allowed(head: RequestHead, *, host: str, port: int) -> bool:
    """Whether the request's ``Host`` may reach a server listening on ``host:port``."""
    given = head.headers.get("host")
    if given is None:
        return False
    loopback = host in ("127.0.0.1", "::1", "localhost")
    if not loopback:
        return True  # listening beyond loopback: the token is the check
    return given in {f"{name}:{port}" for name in _LOOPBACK_NAMES}


def origin_allowed(head: RequestHead, allowed_origins: frozenset[str]) -> bool:
    """Whether the request's ``Origin`` (a browser's) is the server's own or an allowed one."""
    origin = head.headers.get("origin")
    if origin is None:
        return True  # not a browser; the token still has to match
    return origin == f"http://{head.headers.get('host')}" or origin in allowed_origins


class ReplayStream(trio.abc.Stream):
    """A stream that first returns bytes already read from ``stream``, then reads on.

    It also sends the close frame trio-websocket leaves out: when wsproto finds a frame
    it cannot accept (invalid UTF-8 in a text message, an unmasked client frame, a reserved
    opcode), trio-websocket marks the connection closed with the RFC 6455 code (1007,
    1002) and drops the socket without telling the peer. When the stream is closed and no
    close frame has gone out, the connection's close code is sent first (set
    :attr:`connection` once the WebSocket is accepted).
    """

    def __init__(self, stream: trio.abc.Stream, already_read: bytes) -> None:
        self._stream = stream
        self._pending = already_read
        self._sent_close = False
        self.connection: trio_websocket.WebSocketConnection | None = None
        """The accepted WebSocket over this stream, whose close code is sent on close."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._pending:
            size = len(self._pending) if max_bytes is None else max_bytes
            chunk, self._pending = self._pending[:size], self._pending[size:]
            await trio.lowlevel.checkpoint()
            return chunk
        return bytes(await self._stream.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # trio-websocket writes one frame per call; a server's close frame starts 0x88.
        if bytes(data[:1]) == _CLOSE_FRAME:
            self._sent_close = True
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        reason = self.connection.closed if self.connection is not None else None
        if not self._sent_close and reason is not None and reason.code not in _NOT_SENT:
            text = (reason.reason or "").encode()[:120]
            frame = _CLOSE_FRAME + bytes([2 + len(text)]) + struct.pack(">H", reason.code) + text
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self._stream.send_all(frame)
            self._sent_close = True
        await self._stream.aclose()


_CLOSE_FRAME = b"\x88"
"""FIN and the close opcode: the first byte of a server's close frame."""

_NOT_SENT = frozenset({1005, 1006})
"""Close codes that never go on the wire (no code given; the connection dropped)."""
