"""The web view on an ASGI app (``kova serve`` mounts it on :func:`kova.serve.app`): the
page's files and its WebSocket as Starlette routes over an :class:`EventServer` that listens
nowhere itself (``open_hosted_event_server``). The page, its messages, approvals and Stop
button are the same as on the event server's own port; the host, origin and token checks
are the same checks.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ._http import RequestHead, host_allowed, origin_allowed

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import BaseRoute
    from starlette.websockets import WebSocket

    from ._server import EventServer

__all__ = ["PATHS", "routes"]

PATHS = frozenset({"/", "/page.css", "/page.js", "/ws"})
"""The web view's paths: they check their own credentials (the page's token is in its URL's
fragment, and the WebSocket presents it as ``?token=``)."""

_CLOSE_TOO_BIG = 1009
_PLAIN = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
"""Headers of every answer the web view's routes give (as on its own port)."""


def _head(scope: Any) -> RequestHead:
    target = scope["path"]
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    headers = {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }
    return RequestHead(method=scope.get("method", "GET"), target=target, headers=headers)


class _Socket:
    """The few trio-websocket connection methods a page session uses, over a Starlette
    WebSocket: messages in and out, a close with a code; a closed connection raises
    ``trio_websocket.ConnectionClosed`` as trio-websocket's does."""

    __slots__ = ("_closed", "_max_bytes", "_socket")

    def __init__(self, socket: WebSocket, max_bytes: int) -> None:
        self._socket = socket
        self._max_bytes = max_bytes
        self._closed: tuple[int, str] | None = None

    def _gone(self, code: int, reason: str = "") -> Exception:
        import trio_websocket

        if self._closed is None:
            self._closed = (code, reason)
        return trio_websocket.ConnectionClosed(trio_websocket.CloseReason(*self._closed))

    async def get_message(self) -> str | bytes:
        if self._closed is not None:
            raise self._gone(*self._closed)
        message = await self._socket.receive()
        if message["type"] == "websocket.disconnect":
            raise self._gone(int(message.get("code", 1005)), message.get("reason") or "")
        data: str | bytes | None = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        size = len(data.encode() if isinstance(data, str) else data)
        if size > self._max_bytes:
            await self.aclose(code=_CLOSE_TOO_BIG, reason="message too big")
            raise self._gone(_CLOSE_TOO_BIG, "message too big")
        return data

    async def send_message(self, text: str) -> None:
        if self._closed is not None:
            raise self._gone(*self._closed)
        try:
            await self._socket.send_text(text)
        except Exception as exc:  # the server's send on a connection the page left
            raise self._gone(1006, "the page went away") from exc

    async def aclose(self, *, code: int = 1000, reason: str = "") -> None:
        if self._closed is not None and self._closed[0] != _CLOSE_TOO_BIG:
            return
        self._closed = self._closed or (code, reason)
        with contextlib.suppress(Exception):  # already gone: nothing to tell it
            await self._socket.close(code=code, reason=reason)


def routes(server: EventServer) -> list[BaseRoute]:
    """The page's files and WebSocket, served by ``server`` (one made with
    ``open_hosted_event_server``)."""
    from starlette.responses import Response
    from starlette.routing import Route, WebSocketRoute

    async def page_file(request: Request) -> Response:
        head = _head(request.scope)
        if not host_allowed(head, host=server.host, port=server.port):
            return Response(
                b"forbidden host\n", status_code=403, media_type="text/plain", headers=_PLAIN
            )
        body, content_type = server._static[request.url.path]
        policy = (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self' ws://{head.headers.get('host', '')}; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'"
        )
        return Response(
            b"" if request.method == "HEAD" else body,
            headers={
                "content-type": content_type,
                "content-security-policy": policy,
                "x-frame-options": "DENY",
                **_PLAIN,
            },
        )

    async def page_socket(socket: WebSocket) -> None:
        head = _head(socket.scope)
        refusal: tuple[int, bytes] | None = None
        if not host_allowed(head, host=server.host, port=server.port) or not origin_allowed(
            head, server._allowed_origins
        ):
            refusal = (403, b"origin not allowed\n")
        elif not server._authorized(head):
            refusal = (403, b"missing or wrong token\n")
        elif server.page_count >= server._max_pages or server._closed:
            refusal = (503, b"too many pages\n")
        if refusal is not None:
            if "websocket.http.response" in socket.scope.get("extensions", {}):
                await socket.send_denial_response(
                    Response(refusal[1], status_code=refusal[0], media_type="text/plain")
                )
            else:
                await socket.close(code=1008)
            return
        await socket.accept()
        await server._run_page(_Socket(socket, server._max_message_bytes))  # type: ignore[arg-type]

    return [
        Route("/", page_file, methods=["GET", "HEAD"]),
        Route("/page.css", page_file, methods=["GET", "HEAD"]),
        Route("/page.js", page_file, methods=["GET", "HEAD"]),
        WebSocketRoute("/ws", page_socket),
    ]
