"""What a page (or the host's own check) can send the event server: it ends that connection,
with the close code the protocol says, and nothing else (issue 23, item 5)."""

from __future__ import annotations

import base64
import os
import struct
from urllib.parse import urlsplit

import pytest
import structlog
import trio
import trio_websocket

from kova.web import EventServer, WebRequest, open_event_server

from ._client import open_page
from .test_server import _delta


async def test_a_deeply_nested_message_closes_that_page_only() -> None:
    async with open_event_server() as server, open_page(server) as bad, open_page(server) as good:
        await bad.send("[" * 20_000 + "]" * 20_000)  # 40 KB
        closed = await bad.wait_closed()
        assert closed.reason is not None
        assert closed.reason.code == 1008
        assert "nested too deeply" in (closed.reason.reason or "")
        server.publish(_delta("still here"))
        await good.wait_for("text", text="still here")
        assert server.page_count == 1


async def test_an_authorize_check_that_raises_refuses_that_connection_only() -> None:
    def authorize(request: WebRequest) -> bool:
        if request.query.get("ticket") == ["boom"]:
            raise RuntimeError("the host's check has a bug")
        return request.query.get("ticket") == ["letmein"]

    with structlog.testing.capture_logs() as logs:
        async with open_event_server(authorize=authorize) as server:
            base = f"ws://127.0.0.1:{server.port}/ws"
            async with open_page(server, url=f"{base}?ticket=letmein") as good:
                with pytest.raises(trio_websocket.ConnectionRejected) as refused:
                    async with open_page(server, url=f"{base}?ticket=boom"):
                        pass
                assert refused.value.status_code == 403
                server.publish(_delta("fine"))
                await good.wait_for("text", text="fine")
    failed = [entry for entry in logs if entry["event"] == "web.authorize.failed"]
    assert len(failed) == 1
    assert "RuntimeError" in failed[0]["error"]


async def _raw_page(server: EventServer) -> tuple[trio.SocketStream, bytearray]:
    """A WebSocket connection made by hand (handshake done), and the bytes read past it."""
    parts = urlsplit(server.websocket_url)
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    key = base64.b64encode(os.urandom(16)).decode()
    await stream.send_all(
        (
            f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    data = bytearray()
    while b"\r\n\r\n" not in data:
        data += await stream.receive_some(65536)
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101")
    return stream, bytearray(rest)


async def _close_code(stream: trio.SocketStream, data: bytearray) -> int | None:
    """The code of the close frame the server sends (None if the socket just ends)."""
    while True:
        while len(data) >= 2:
            length = data[1] & 0x7F
            start = 2
            if length == 126:
                (length,) = struct.unpack(">H", data[2:4])
                start = 4
            elif length == 127:
                (length,) = struct.unpack(">Q", data[2:10])
                start = 10
            if len(data) < start + length:
                break
            opcode = data[0] & 0x0F
            payload = bytes(data[start : start + length])
            del data[: start + length]
            if opcode == 0x8:
                return struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk


def _frame(opcode: int, payload: bytes, *, masked: bool = True, fin: bool = True) -> bytes:
    first = (0x80 if fin else 0) | opcode
    mask = os.urandom(4)
    head = bytes([first, (0x80 if masked else 0) | len(payload)])
    if not masked:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (_frame(0x1, b'{"v": 1, "type": "chat", "text": "\xff\xfe"}'), 1007),
        (_frame(0x1, b'{"v": 1, "type": "stop"}', masked=False), 1002),
        (_frame(0x3, b"reserved"), 1002),
    ],
    ids=["invalid-utf8", "unmasked", "reserved-opcode"],
)
async def test_a_protocol_error_closes_that_page_with_its_code(frame: bytes, code: int) -> None:
    """A frame the WebSocket protocol forbids fails that connection only, with a close frame
    carrying the reason's code first (RFC 6455 7.1.7; Hypercorn alone drops the connection
    without one, kova/_hypercorn.py); the other pages are served on."""
    with trio.fail_after(10):
        async with open_event_server() as server, open_page(server) as good:
            stream, data = await _raw_page(server)
            async with stream:
                await stream.send_all(frame)
                assert await _close_code(stream, data) == code
            while server.page_count != 1:  # noqa: ASYNC110 (the bad page is let go)
                await trio.sleep(0.01)
            server.publish(_delta("fine"))
            await good.wait_for("text", text="fine")


def test_hypercorns_websocket_stream_is_wrapped_once() -> None:
    from hypercorn.protocol.ws_stream import WSStream

    from kova._hypercorn import close_failed_websockets

    assert close_failed_websockets()
    wrapped = WSStream._handle_events
    assert close_failed_websockets()
    assert WSStream._handle_events is wrapped
