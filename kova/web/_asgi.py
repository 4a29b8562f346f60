"""The web view on an ASGI app: the page's files and its WebSocket as Starlette routes over
an :class:`EventServer`, served on its own port by Hypercorn (:func:`open_event_server`), or
mounted on :func:`kova.serve.app` by ``kova serve`` over one that listens nowhere itself
(``open_hosted_event_server``). The page, its messages, approvals and Stop button are the
same either way; the host, origin and token checks are the same checks.
"""

from __future__ import annotations

import contextlib
import socket
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from .._groups import lone_exceptions
from .._log import get_logger
from ._http import MAX_HEAD_BYTES, RequestHead, host_allowed, origin_allowed
from ._server import EventServer, WebRequest, close_pages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable

    from starlette.requests import Request
    from starlette.routing import BaseRoute
    from starlette.websockets import WebSocket

    from ..sessions import SessionStore

__all__ = ["PATHS", "open_event_server", "routes"]

log = get_logger(__name__)

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


@asynccontextmanager
async def open_event_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    authorize: Callable[[WebRequest], bool] | None = None,
    allowed_origins: Iterable[str] = (),
    chat: bool = False,
    page_buffer: int = 4096,
    flush_interval: float = 0.05,
    max_message_bytes: int = 64 * 1024,
    max_chat_chars: int = 32_000,
    max_pages: int = 64,
    keep_turns: int = 20,
    disconnect_grace: float = 10.0,
    sessions: SessionStore | None = None,
) -> AsyncIterator[EventServer]:
    """Serve the web view on ``host:port`` for the duration of the block.

    ``async with kova.web.open_event_server() as server: print(server.url)``

    Args:
        host: the address to listen on; loopback unless told otherwise.
        port: the port; 0 picks a free one (see :attr:`EventServer.port`).
        token: the secret pages must present; a random one when ``None``.
        authorize: a host-supplied check of each WebSocket request, replacing the token.
        allowed_origins: origins besides the server's own allowed to connect
            (``"http://example.test:8080"``).
        chat: take prompts from the page (read them from :attr:`EventServer.prompts`).
        page_buffer: events a page may have waiting before it is dropped as too slow.
        flush_interval: seconds between a page's frames (events in between share one).
        max_message_bytes: the largest message a page may send; a larger one closes it.
        max_chat_chars: the longest prompt a page may send.
        max_pages: pages connected at once; more are refused with HTTP 503.
        keep_turns: turns kept to replay to a (re)connecting page.
        disconnect_grace: seconds a pending approval waits with no page connected before
            it is denied.
        sessions: a :class:`~kova.sessions.SessionStore` whose sessions the pages list and
            open (with ``chat=True``): the host runs each prompt on :attr:`EventServer.session`.

    Raises:
        ValueError: an option out of range (ConfigError, a ValueError, for a duration).
        OSError: the address cannot be bound.
    """
    server = EventServer(
        token=token,
        authorize=authorize,
        allowed_origins=allowed_origins,
        chat=chat,
        page_buffer=page_buffer,
        flush_interval=flush_interval,
        max_message_bytes=max_message_bytes,
        max_chat_chars=max_chat_chars,
        max_pages=max_pages,
        keep_turns=keep_turns,
        disconnect_grace=disconnect_grace,
        sessions=sessions,
    )
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from starlette.applications import Starlette

    from .._hypercorn import close_failed_websockets

    close_failed_websockets()  # a page that breaks the WebSocket protocol gets its close code

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=1024)
    server._host, server._port = listener.getsockname()[:2]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # Hypercorn's now: it serves and closes it
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 1.0
    config.h11_max_incomplete_size = MAX_HEAD_BYTES
    config.websocket_max_message_size = max_message_bytes
    app: Any = Starlette(routes=routes(server))  # Hypercorn types its own ASGI
    stopped = trio.Event()
    with lone_exceptions():  # a lone exception leaves the block as itself
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(serve, app, config, shutdown_trigger=stopped.wait))
            log.info("web.server.started", host=server._host, port=server._port)
            try:
                yield server
            finally:
                close_pages(server)
                stopped.set()
                nursery.cancel_scope.cancel(reason="event server closed")
