"""Transports: how the connection actor reaches an MCP server.

A transport is a plain value the host constructs and passes to :meth:`McpClient.connect`.
The connection actor calls :meth:`Transport.open` every time it (re)connects, inside its own
task, and speaks MCP over the streams it yields; so the protocol's next transport is one
more class with an ``open`` method, not a change to the client.

The JSON-RPC framing, the stdio child process handling and the Streamable HTTP session
rules (``Mcp-Session-Id``, JSON or SSE responses, the resumable GET stream) are the ``mcp``
package's; these classes only configure it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

import anyio
import attrs
import httpx2
from httpx2 import ServerSentEvent
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.shared._compat import resync_tracer  # private: used as the package's own client does
from mcp.shared._context_streams import create_context_streams  # private, likewise
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCResponse, RequestId

from .._errors import check_seconds
from .._record import Record, set_field
from ._auth import MCP_SESSION_ID_HEADER, McpHttpAuth, TokenProvider
from ._legacy_sse import sse_streams
from ._stdio import message_line, not_delivered_answer, open_stdio
from ._wire import (
    DEFAULT_MAX_MESSAGE_BYTES,
    HEAD,
    HTTP_REFUSED,
    MESSAGE_TOO_LARGE,
    NOT_DELIVERED,
    Oversize,
    SessionWatch,
    SseFramer,
    TooLarge,
    answer_in_place,
    http_refusal,
    read_message,
    too_large_text,
)

logger = logging.getLogger("mcp.client.streamable_http")  # the package's: hosts configure it

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "InProcessTransport",
    "SseTransport",
    "StdioTransport",
    "StreamableHttpTransport",
    "Transport",
]


@runtime_checkable
class Transport(Protocol):
    """How to reach one MCP server.

    :meth:`open` returns an async context manager yielding the ``mcp`` package's pair of
    message streams (an ``mcp.client.Transport``). It is entered and left in one task, the
    connection actor's, once per connection; leaving it must release everything (reap the
    child process, close HTTP connections), also when the task is cancelled.
    """

    def open(self) -> AbstractAsyncContextManager[Any]:
        """Open one connection to the server."""
        ...


def _str_tuple(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("args must be a sequence of strings, not one string")
    return tuple(str(item) for item in value)  # type: ignore[attr-defined]


def _str_dict(what: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping of str to str, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            # Neither is shown: a header or variable value may be a secret.
            raise TypeError(
                f"{what} must map str to str, got {type(key).__name__}: {type(item).__name__}"
            )
    return dict(value)


def _str_mapping(value: Mapping[str, str] | None) -> Mapping[str, str] | None:
    return None if value is None else _str_dict("env", value)


def _check_command(_instance: object, _attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"command must be a non-empty str (the executable), got {value!r}")


def _check_cwd(_instance: object, _attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise TypeError(f"cwd must be a path (str or os.PathLike) or None, got {value!r}")


def _check_url(_instance: object, _attribute: Any, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"url must be a str, got {type(value).__name__}")
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ValueError(f"url must be an http(s) URL, got {value!r}")


def _check_auth(_instance: object, _attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, TokenProvider):
        raise TypeError(
            "auth must be a TokenProvider (async token() and refresh() methods), got "
            f"{type(value).__name__}; pass an httpx2.Auth as http_auth="
        )


def _check_http_auth(_instance: object, _attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, httpx2.Auth):
        raise TypeError(f"http_auth must be an httpx2.Auth, got {type(value).__name__}")


def _check_seconds(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    # kova's one rule for durations (a ConfigError for NaN, infinity, negative or zero):
    # infinity was accepted and NaN failed every request with a raw error from trio.
    check_seconds(attribute.name, value)


def _positive_int(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive int, got {value!r}")


def _headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    if value is None:
        return {}
    headers = _str_dict("headers", value)
    for name, header in headers.items():
        if any(character in header for character in "\r\n\x00"):
            raise ValueError(f"headers[{name!r}] holds a line break, which a header cannot carry")
    return headers


@attrs.frozen
class StdioTransport:
    """Start the server as a child process and talk to it over its stdin and stdout.

    The child runs in its own process group. When the connection closes (or the actor is
    cancelled) its stdin is closed, it gets a short grace period to exit, and then the
    whole process tree is terminated and reaped.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (``args`` into a tuple of ``str``, ``env`` into a ``dict``; see :mod:`kova._record`).

    Args:
        command: the executable, e.g. ``"npx"`` or ``sys.executable``.
        args: its arguments.
        env: extra environment variables. The child does *not* inherit the whole
            environment, only a safe subset (``HOME``, ``PATH``, ``USER``, ...) plus these.
        cwd: the working directory of the child.
        stderr: where the child's stderr goes: a file with a descriptor (``kova chat``
            keeps it in a temporary file, to quote its last lines if the child dies);
            ``None``, this process's stderr.
        max_message_bytes: the largest message (one line of JSON) kova reads from the
            server, 16 MiB by default. A longer one is discarded as it arrives, and the
            request it answers fails with :class:`~kova.McpError` naming this limit
            (code :data:`~kova.mcp._stdio.MESSAGE_TOO_LARGE`, -32051).

    Messages are framed by kova in linear time (see :mod:`kova.mcp._stdio`); a request
    written after the child died is known not to have reached it, so it is sent again on
    the respawned server instead of being reported as "may or may not have run".
    """

    command: str = attrs.field(validator=_check_command)
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, kw_only=True)
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_str_mapping, kw_only=True)
    cwd: str | Path | None = attrs.field(default=None, kw_only=True, validator=_check_cwd)
    stderr: TextIO | None = attrs.field(default=None, kw_only=True, eq=False)
    max_message_bytes: int = attrs.field(
        default=DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=_positive_int
    )

    def open(self, *, watch: SessionWatch | None = None) -> AbstractAsyncContextManager[Any]:
        """Start the child. ``watch`` (the connection actor's) learns when it is gone."""
        # The child's stderr goes where ours goes (looked up now, so a host that redirects
        # sys.stderr later still gets it).
        return open_stdio(self, sys.stderr if self.stderr is None else self.stderr, watch)


@attrs.frozen
class _HttpFields:
    """The fields both HTTP transports take (each documents them)."""

    url: str = attrs.field(validator=_check_url)
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, kw_only=True)
    auth: TokenProvider | None = attrs.field(default=None, kw_only=True, validator=_check_auth)
    http_auth: httpx2.Auth | None = attrs.field(
        default=None, kw_only=True, validator=_check_http_auth
    )
    timeout: float = attrs.field(default=30.0, kw_only=True, validator=_check_seconds)
    sse_read_timeout: float = attrs.field(default=300.0, kw_only=True, validator=_check_seconds)
    max_message_bytes: int = attrs.field(
        default=DEFAULT_MAX_MESSAGE_BYTES, kw_only=True, validator=_positive_int
    )

    def _client(self, transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncClient:
        """An HTTP client over ``transport`` with these headers, timeouts and auth."""
        return httpx2.AsyncClient(
            headers=dict(self.headers),
            timeout=httpx2.Timeout(self.timeout, read=self.sse_read_timeout),
            auth=McpHttpAuth(self.auth, inner=self.http_auth),
            transport=transport,
        )


@attrs.frozen
class StreamableHttpTransport(_HttpFields):
    """The Streamable HTTP transport (MCP 2025-03-26 and later).

    The ``mcp`` package runs the ``initialize`` handshake, tracks ``Mcp-Session-Id`` and
    reads JSON or SSE responses. kova adds bearer authentication (see
    :class:`TokenProvider`) and treats a ``404`` for a known session as the server ending
    the session: the connection actor restarts and initializes a new one.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (``headers`` into a ``dict`` of ``str``; see :mod:`kova._record`).

    Args:
        url: the MCP endpoint, e.g. ``"https://mcp.example.com/mcp"``.
        headers: static headers sent with every request.
        auth: supplies a bearer token for every request; refreshed once on ``401``.
        http_auth: instead of ``auth``, any ``httpx2.Auth`` the host wants to run, e.g. the
            ``mcp`` package's ``OAuthClientProvider`` for a full OAuth flow.
        timeout: connect, write and pool timeout in seconds.
        sse_read_timeout: how long an open SSE stream may stay silent, in seconds.
        max_message_bytes: the largest message kova reads from the server (one event, or
            one JSON body), 16 MiB by default, as over stdio. A larger answer is discarded as
            it arrives and the request it answers fails with :class:`~kova.McpError` naming
            this limit (code -32051); the session goes on.
    """

    def open(self, *, watch: SessionWatch | None = None) -> AbstractAsyncContextManager[Any]:
        """Open one connection. ``watch`` (the connection actor's) hears of a session the
        server no longer knows and of a server that cannot be reached."""
        return _open_streamable_http(self, watch)


def is_not_delivered(code: int, data: object) -> bool:
    """Whether a JSON-RPC error is kova's :data:`NOT_DELIVERED` answer."""
    return code == NOT_DELIVERED and isinstance(data, dict) and data.get("kova") == "not-delivered"


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of a POSTed request (``None`` for notifications and responses)."""
    if request.method != "POST":
        return None
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" in message:
        request_id = message.get("id")
        if isinstance(request_id, int | str) and not isinstance(request_id, bool):
            return request_id
    return None


def _not_delivered(request: httpx2.Request, request_id: int | str, reason: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": NOT_DELIVERED, "message": reason, "data": {"kova": "not-delivered"}},
    }
    return httpx2.Response(
        503,
        headers={"content-type": "application/json"},
        content=json.dumps(body).encode(),
        request=request,
    )


def _session_gone(watch: SessionWatch, reason: str) -> None:
    if not watch.gone:
        watch.gone = True
        watch.on_gone(reason)


class _SessionWatchTransport(httpx2.AsyncBaseTransport):
    """Sees every HTTP exchange of one Streamable HTTP connection, below the ``mcp`` package.

    A session the server no longer knows shows up as ``404`` (the specification's answer)
    or as ``400`` with a body naming the session (``@modelcontextprotocol/server-everything``
    after a restart: "No valid session ID provided"); a server that is down shows up as a
    connect error. Either way the session is gone: the watch is told, and a request that
    carried the old session id is answered with :data:`NOT_DELIVERED`, since it never ran.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, watch: SessionWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None or request.method == "DELETE":
            return await self._inner.handle_async_request(request)
        return await self._watched(request, f"session {session_id}")

    async def _watched(self, request: httpx2.Request, session: str) -> httpx2.Response:
        """``request`` sent on; a connect error, or a refusal that says the server no longer
        knows ``session``, goes to :meth:`_gone`."""
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            # Nothing was sent: the connection was never made.
            answer = await self._gone(request, f"cannot reach the server: {exc!r}")
            if answer is None:
                raise
            return answer
        if response.status_code not in (400, 404):
            return response
        body = await response.aread()
        await response.aclose()
        if response.status_code == 404 or b"session" in body.lower():
            reason = f"the server no longer knows {session} (HTTP {response.status_code})"
            answer = await self._gone(request, reason)
            if answer is not None:
                return answer
        return _rebuilt(response, body, request)

    async def _gone(self, request: httpx2.Request, reason: str) -> httpx2.Response | None:
        """The session is gone: the watch is told, and a request (not a notification) is
        answered :data:`NOT_DELIVERED` (``None``: nothing to answer in its place)."""
        _session_gone(self._watch, reason)
        request_id = _request_id(request)
        return None if request_id is None else _not_delivered(request, request_id, reason)

    async def aclose(self) -> None:
        await self._inner.aclose()


_REWRITTEN_HEADERS = ("content-length", "content-encoding", "transfer-encoding", "content-type")


def _is_jsonrpc_error(body: bytes) -> bool:
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, dict) and "jsonrpc" in value and "error" in value


def _rebuilt(
    response: httpx2.Response,
    body: bytes,
    request: httpx2.Request,
    *,
    content_type: str | None = None,
) -> httpx2.Response:
    """``response`` with ``body`` (already read), as a response that can be read again
    (with ``content_type`` in place of its own)."""
    dropped = _REWRITTEN_HEADERS if content_type else _REWRITTEN_HEADERS[:-1]
    headers = [
        (key, value) for key, value in response.headers.multi_items() if key.lower() not in dropped
    ]
    if content_type:
        headers.append(("content-type", content_type))
    return httpx2.Response(response.status_code, headers=headers, content=body, request=request)


class _RefusalTransport(httpx2.AsyncBaseTransport):
    """An HTTP error status (401, 403, 5xx) answering a POSTed request is given a JSON-RPC
    error body naming the status (:data:`HTTP_REFUSED`), which the ``mcp`` package passes on
    as the request's error; without it the package reported a bare -32603 "Server returned
    an error response". A ``401`` keeps its status, so the token refresh still runs first.
    A JSON-RPC error body of the server's own is left as it is."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.status_code < 400 or response.status_code in (400, 404):
            return response  # 400/404 may name the session: _SessionWatchTransport's
        request_id = _request_id(request)
        if request_id is None:
            return response
        body = await response.aread()
        await response.aclose()
        if _is_jsonrpc_error(body):
            return _rebuilt(response, body, request)
        message = http_refusal(response.status_code, response.reason_phrase, body)
        error = {"code": HTTP_REFUSED, "message": message}
        answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        return _rebuilt(response, answer, request, content_type="application/json")

    async def aclose(self) -> None:
        await self._inner.aclose()


class _AbortingHttpTransport(StreamableHTTPTransport):
    """The ``mcp`` package's Streamable HTTP transport, aborting the POST of a cancelled request.

    Before protocol 2026-07-28 the package sends ``notifications/cancelled`` for a cancelled
    or timed-out request but keeps that request's POST (its SSE response stream, one socket
    and one task) open until the server ends it or ``sse_read_timeout`` (300 s) passes; a
    server that honours the cancellation sends nothing more, so 100 cancelled calls held
    110 fds. Nobody waits for that response any more, so kova closes the POST as soon as the
    notification is sent. Upstream: modelcontextprotocol/python-sdk, the 2.x
    ``_consume_modern_cancellation`` aborts the POST only for 2026-07-28 sessions
    (TODO(#15): drop this subclass once the package aborts it on every protocol version).
    """

    def __init__(self, url: str, limit: int) -> None:
        # The package's reader still frames the GET stream (server requests and
        # notifications); answers to POSTs are read by kova below.
        super().__init__(url, max_sse_event_size=limit + HEAD)
        self.limit = limit

    async def _handle_sse_event(
        self,
        sse: ServerSentEvent,
        read_stream_writer: Any,
        original_request_id: RequestId | None = None,
        resumption_callback: Callable[[str], Awaitable[None]] | None = None,
    ) -> bool:
        """One event, read by kova's rule (:func:`~kova.mcp._wire.read_message`): an answer
        kova cannot read fails the request it answers at once, as over stdio, instead of the
        package's -32700 on a POST and a dropped message on the GET stream."""
        if sse.event != "message":
            return False
        if not sse.data:
            if sse.id and resumption_callback is not None:
                await resumption_callback(sse.id)  # a priming event, for resumption
            return False
        item = read_message(sse.data, original_request_id)
        await read_stream_writer.send(item)
        if not isinstance(item, SessionMessage):
            return False
        message = item.message
        if original_request_id is not None and isinstance(message, JSONRPCResponse | JSONRPCError):
            message.id = original_request_id
        if sse.id and resumption_callback is not None:
            await resumption_callback(sse.id)
        return isinstance(message, JSONRPCResponse | JSONRPCError)

    async def _handle_sse_response(self, response: httpx2.Response, ctx: Any) -> None:
        """A POST answered with an event stream, framed by kova up to :attr:`limit`: a larger
        answer fails its request with :data:`MESSAGE_TOO_LARGE` (the package's reader stopped
        at 1 MiB with an error that looked like a lost connection, so kova replayed it)."""
        request_id = ctx.session_message.message.id
        callback = ctx.metadata.on_resumption_token_update if ctx.metadata else None
        oversize = Oversize(self.limit, "StreamableHttpTransport", request_id=request_id)
        framer = SseFramer(oversize)
        last_event_id: str | None = None
        retry_ms: int | None = None
        try:
            async for chunk in response.aiter_bytes():
                for event in framer.feed(chunk):
                    if isinstance(event, TooLarge):
                        # As soon as it goes over the limit: the request is this POST's.
                        answer = event.answer
                        await ctx.read_stream_writer.send(answer)
                        if isinstance(answer, SessionMessage):
                            await response.aclose()
                            return
                        continue
                    if event.id:
                        last_event_id = event.id
                    if event.retry is not None:
                        retry_ms = event.retry
                    if await self._handle_sse_event(
                        event, ctx.read_stream_writer, request_id, callback
                    ):
                        await response.aclose()
                        return
        except Exception:  # the stream broke: resumed below if it can be, as the package does
            logger.debug("SSE stream ended", exc_info=True)
        if last_event_id is not None:
            await self._handle_reconnection(ctx, last_event_id, retry_ms)
        else:
            await self._resolve_abandoned_request(
                ctx.read_stream_writer, request_id, "SSE stream ended without a response"
            )

    async def _handle_json_response(
        self, response: httpx2.Response, read_stream_writer: Any, *, request_id: RequestId
    ) -> None:
        """A JSON answer, read up to :attr:`limit` bytes by kova's rule, like every other."""
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.limit:
                await response.aclose()
                text = too_large_text(self.limit, "StreamableHttpTransport")
                answer = answer_in_place(bytes(body[:HEAD]), MESSAGE_TOO_LARGE, text, request_id)
                await read_stream_writer.send(answer)
                return
        await read_stream_writer.send(read_message(bytes(body), request_id))

    def _consume_modern_cancellation(self, session_message: Any) -> bool:
        message = session_message.message
        consumed = super()._consume_modern_cancellation(session_message)
        if consumed:
            return True
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(message.params)
            post = self._in_flight_posts.get(request_id) if request_id is not None else None
            if post is not None:
                post.scope.cancel()
        return False


@asynccontextmanager
async def _open_streamable_http(
    transport: StreamableHttpTransport, watch: SessionWatch | None
) -> AsyncIterator[Any]:
    inner: httpx2.AsyncBaseTransport = _RefusalTransport(httpx2.AsyncHTTPTransport())
    if watch is not None:
        inner = _SessionWatchTransport(inner, watch)
    client = transport._client(inner)
    async with (
        client,
        _streamable_http_streams(
            transport.url, client, watch, transport.max_message_bytes
        ) as streams,
    ):
        yield streams


@asynccontextmanager
async def _streamable_http_streams(
    url: str, client: httpx2.AsyncClient, watch: SessionWatch | None, limit: int
) -> AsyncIterator[Any]:
    """``mcp.client.streamable_http.streamable_http_client`` with kova's transport class
    (see :class:`_AbortingHttpTransport`), and no ``DELETE`` for a session already gone."""
    transport = _AbortingHttpTransport(url, limit)
    read_writer, read_stream = create_context_streams[Any](0)
    write_stream, write_reader = create_context_streams[Any](0)
    async with (
        read_writer,
        read_stream,
        write_stream,
        write_reader,
        anyio.create_task_group() as task_group,
    ):

        def start_get_stream() -> None:
            task_group.start_soon(transport.handle_get_stream, client, read_writer)

        task_group.start_soon(
            transport.post_writer,
            client,
            write_reader,
            read_writer,
            write_stream,
            start_get_stream,
            task_group,
        )
        try:
            yield read_stream, write_stream
        finally:
            if transport.session_id and not (watch is not None and watch.gone):
                with contextlib.suppress(Exception):
                    await transport.terminate_session(client)
            task_group.cancel_scope.cancel()
    await resync_tracer()


@attrs.frozen
class SseTransport(_HttpFields):
    """The legacy HTTP+SSE transport (MCP 2024-11-05): a GET event stream for server
    messages and POSTs to the endpoint the server announces on it.

    An attrs class by kova's rule for configurations whose fields convert what the caller
    passes (``headers`` into a ``dict`` of ``str``; see :mod:`kova._record`).

    Args:
        url: the SSE endpoint, e.g. ``"http://localhost:8080/sse"``.
        headers: static headers sent with every request.
        auth: supplies a bearer token for every request; refreshed once on ``401``.
        http_auth: instead of ``auth``, any ``httpx2.Auth`` the host wants to run.
        timeout: timeout of the POSTs in seconds.
        sse_read_timeout: how long the event stream may stay silent, in seconds.
        max_message_bytes: the largest message (one event) kova reads from the server,
            16 MiB by default, as over stdio. A larger answer is discarded as it arrives and
            the request it answers fails with :class:`~kova.McpError` naming this limit
            (code -32051); the session goes on.
    """

    def open(self, *, watch: SessionWatch | None = None) -> AbstractAsyncContextManager[Any]:
        """Open one connection. ``watch`` (the connection actor's) hears of a server that
        cannot be reached or no longer knows the session, and of the event stream's end."""
        return _open_sse(self, watch)


SSE_END_GRACE = 1.0
"""At most this many seconds the session's read stream stays open after the server ended the
SSE stream, while the requests still being POSTed learn they were not delivered."""

SSE_QUIET = 0.02
"""Seconds without a new POST after which the message writer is taken to be drained."""


class _SseWatchTransport(_SessionWatchTransport):
    """Sees the message POSTs of one SSE connection, below the ``mcp`` package.

    Over SSE a POST only hands a message over (``202 Accepted``); the answer comes on the
    event stream. A POST that could not connect (the server is down) or that the server
    refused for an unknown session (it restarted) never reached a live session: the watch is
    told, the request is answered in its place with :data:`NOT_DELIVERED` on the session's
    read stream, and the package gets a ``202`` so that its writer goes on (it stops at the
    first failed POST, and every later request would hang until the stream ended).
    """

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        watch: SessionWatch,
        answer: Callable[[int | str, str], Awaitable[None]],
    ) -> None:
        super().__init__(inner, watch)
        self._answer = answer
        self._posting = 0
        self._posts = 0

    async def drained(self) -> None:
        """Return once no POST is under way and none started for :data:`SSE_QUIET` seconds:
        the requests the session had handed over have all been sent, or answered "not
        delivered"."""
        while True:
            posts = self._posts
            await anyio.sleep(SSE_QUIET)
            if not self._posting and posts == self._posts:
                return

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return await self._inner.handle_async_request(request)
        self._posting += 1
        self._posts += 1
        try:
            return await self._watched(request, "this SSE session")
        finally:
            self._posting -= 1

    async def _gone(self, request: httpx2.Request, reason: str) -> httpx2.Response:
        _session_gone(self._watch, reason)
        request_id = _request_id(request)
        if request_id is not None:
            await self._answer(request_id, reason)
        return httpx2.Response(202, request=request)


@asynccontextmanager
async def _open_sse(transport: SseTransport, watch: SessionWatch | None) -> AsyncIterator[Any]:
    """The event stream and the message POSTs (kova's reader, :mod:`kova.mcp._legacy_sse`),
    with a :class:`_SseWatchTransport` under them and one read stream carrying the server's
    messages and kova's :data:`NOT_DELIVERED` answers.

    When the server ends the event stream (it died), the session is marked gone rather than
    ended at once: a request whose POST has not gone out yet still learns that it was not
    delivered (its POST cannot connect), instead of being failed with the stream as if it
    might have run."""
    send, receive = anyio.create_memory_object_stream[Any](0)

    async def answer(request_id: int | str, reason: str) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send.send(not_delivered_answer(request_id, reason))

    inner: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport()
    posts = None if watch is None else _SseWatchTransport(inner, watch, answer)

    async def on_end() -> None:
        if watch is None or posts is None:
            return
        # No new request starts on this session; the ones handed over and not yet POSTed
        # are (their POST cannot connect: "not delivered"). Then the stream ends as usual,
        # failing what is still waiting for an answer.
        _session_gone(watch, "the server closed the SSE stream")
        with anyio.move_on_after(SSE_END_GRACE):
            await posts.drained()

    client = transport._client(posts if posts is not None else inner)
    with send, receive:  # closed also when connecting fails
        async with (
            client,
            sse_streams(
                client,
                transport.url,
                limit=transport.max_message_bytes,
                send=send,
                on_end=on_end,
                encode=_post_body,
            ) as write_stream,
        ):
            try:
                yield receive, write_stream
            finally:
                receive.close()
    await resync_tracer()


def _post_body(message: Any) -> bytes:
    return message_line(message)[:-1]


class InProcessTransport(Record):
    """Run an ``mcp`` server in this process, connected through memory streams.

    Meant for tests (of kova and of hosts): no process, no socket, so it also runs on
    ``trio.testing.MockClock``. The server runs in the connection actor's task group.

    Args:
        server: an ``mcp.server.mcpserver.MCPServer`` or low-level ``mcp.server.Server``.
    """

    server: MCPServer[Any] | Server[Any]

    def __init__(self, server: MCPServer[Any] | Server[Any]) -> None:
        set_field(self, "server", server)

    def open(self) -> AbstractAsyncContextManager[Any]:
        # The mcp package's own in-memory transport (it is not re-exported publicly).
        from mcp.client._memory import InMemoryTransport

        return InMemoryTransport(self.server)
