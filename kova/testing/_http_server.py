"""A small HTTP/1.1 server on loopback (h11 over trio) that kova's wire-level fake servers
share.

A fake server is a *handler*: an async function from a :class:`RecordedRequest` to a
:class:`FakeResponse` (a whole body) or a :class:`FakeStream` (a body sent in pieces, each
piece its own write, optionally cut off mid-body to simulate a dropped connection). Start it
inside a nursery, the trio way::

    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(serve_http, handler)
        ...                                  # talk to base_url ("http://127.0.0.1:<port>")
        nursery.cancel_scope.cancel()

Real sockets on ``127.0.0.1`` port 0: the client under test runs its real HTTP stack.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

import h11
import trio

from .._json import dumps_bytes
from .._record import EMPTY, Record

if TYPE_CHECKING:
    from .._models import InferenceConfig, JSONValue, Message, ToolDefinition
    from ._script import ScriptRequest

__all__ = [
    "FakeResponse",
    "FakeStream",
    "HttpHandler",
    "RecordedRequest",
    "fake_vector",
    "json_response",
    "serve_http",
]

_MAX_BODY = 64 * 1024 * 1024
_RECEIVE_SIZE = 65536


class RecordedRequest(Record):
    """One request as the fake server received it: what ``server.requests`` and each fake's
    ``chat_requests()`` (``responses_requests()``, ``messages_requests()``,
    ``converse_requests()``) hold.

    A chat request the server read (not one it refused) is also decoded into kova values,
    :attr:`decoded` (a :class:`~kova.testing.ScriptRequest`, what the script was asked), and
    :attr:`messages`, :attr:`tools`, :attr:`config` and :attr:`stream` read through to it, so
    an assertion reads the same for a fake server as for a
    :class:`~kova.testing.ScriptedProvider` (``provider.requests[1].messages[-1]``).
    """

    method: str
    path: str
    """The path without the query string, e.g. ``/v1/messages``."""
    query: Mapping[str, str] = EMPTY
    """Query parameters (the last value wins for a repeated name)."""
    headers: Mapping[str, str] = EMPTY
    """Header names lowercased; repeated headers joined with ``", "``."""
    body: bytes = b""
    connection: int = 0
    """Which TCP connection carried the request (1, 2, ... in accept order): requests that
    share a number reused a kept-alive connection."""
    decoded: ScriptRequest | None = None
    """The chat request in kova values, set when the server decoded it (``None`` for other
    routes and for requests it refused)."""

    def _chat(self) -> ScriptRequest:
        if self.decoded is None:
            raise ValueError(
                f"{self.method} {self.path} is not a chat request the fake server decoded (a "
                "request it refused, or another route): read .json() or .body instead"
            )
        return self.decoded

    @property
    def messages(self) -> tuple[Message, ...]:
        """The decoded request's messages (see :attr:`decoded`)."""
        return tuple(self._chat().messages)

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The decoded request's tools."""
        return tuple(self._chat().tools)

    @property
    def config(self) -> InferenceConfig:
        """The decoded request's inference settings (model, max tokens, ...)."""
        return self._chat().config

    @property
    def stream(self) -> bool:
        """Whether the decoded request asked for a stream."""
        return self._chat().stream

    def json(self) -> JSONValue:
        """The body parsed as JSON (``None`` for an empty body)."""
        if not self.body:
            return None
        parsed: JSONValue = json.loads(self.body)
        return parsed


class FakeResponse(Record):
    """A complete response."""

    status: int = 200
    headers: Mapping[str, str] = EMPTY
    body: bytes = b""


class FakeStream(Record):
    """A response whose body goes out in ``chunks``, one write (and usually one client read)
    each, with chunked transfer encoding.

    With ``cut=True`` the server closes the connection after the chunks without ending the
    body, as a dropped connection would: the client sees an incomplete response.
    """

    status: int = 200
    headers: Mapping[str, str] = EMPTY
    chunks: Iterable[bytes] | AsyncIterable[bytes] = ()
    cut: bool = False
    hold: bool = False
    """After the chunks, send nothing more and keep the connection open until the client
    closes it: a model that stalls mid-stream (for tests that cancel a stream in progress)."""


HttpHandler = Callable[[RecordedRequest], Awaitable[FakeResponse | FakeStream]]


def json_response(
    body: JSONValue,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    content_type: str = "application/json",
) -> FakeResponse:
    """A JSON response, compactly encoded (as the APIs send it)."""
    all_headers = {"content-type": content_type, **(headers or {})}
    payload = dumps_bytes(body)
    return FakeResponse(status=status, headers=all_headers, body=payload)


class _ConnectionClosed(Exception):
    """The client went away (or we cut the connection on purpose)."""


class _Connection:
    def __init__(self, stream: trio.SocketStream, number: int) -> None:
        self.stream = stream
        self.number = number
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_BODY)

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _ConnectionClosed from exc

    async def _wait_for_close(self) -> None:
        try:
            while await self.stream.receive_some(_RECEIVE_SIZE):
                pass  # a client that stopped reading the body sends nothing we need
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        raise _ConnectionClosed

    async def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.stream.receive_some(_RECEIVE_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise _ConnectionClosed from exc
                self.conn.receive_data(data)
                if not data and self.conn.their_state is h11.DONE:
                    raise _ConnectionClosed
                continue
            return event

    async def read_request(self) -> RecordedRequest | None:
        event = await self.next_event()
        if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None
        if not isinstance(event, h11.Request):
            return None
        body = bytearray()
        while True:
            part = await self.next_event()
            if isinstance(part, h11.Data):
                body += part.data
                if len(body) > _MAX_BODY:
                    raise _ConnectionClosed
            elif isinstance(part, h11.EndOfMessage):
                break
            else:
                return None
        target = urlsplit(event.target.decode("ascii", "replace"))
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        return RecordedRequest(
            method=event.method.decode("ascii"),
            path=target.path,
            query=dict(parse_qsl(target.query, keep_blank_values=True)),
            headers=headers,
            body=bytes(body),
            connection=self.number,
        )

    async def respond(self, response: FakeResponse | FakeStream) -> bool:
        """Send ``response``; False when the connection must close afterwards."""
        headers = [(name.encode(), value.encode()) for name, value in response.headers.items()]
        if isinstance(response, FakeResponse):
            headers.append((b"content-length", str(len(response.body)).encode()))
            await self.send(h11.Response(status_code=response.status, headers=headers))
            if response.body:
                await self.send(h11.Data(data=response.body))
            await self.send(h11.EndOfMessage())
            return self.conn.our_state is h11.DONE
        headers.append((b"transfer-encoding", b"chunked"))
        await self.send(h11.Response(status_code=response.status, headers=headers))
        if isinstance(response.chunks, AsyncIterable):
            async for chunk in response.chunks:
                await self.send(h11.Data(data=chunk))
        else:
            for chunk in response.chunks:
                await self.send(h11.Data(data=chunk))
                # One write per chunk, and let the client read it before the next one.
                await trio.lowlevel.checkpoint()
        if response.hold:
            await self._wait_for_close()
            return False
        if response.cut:
            return False
        await self.send(h11.EndOfMessage())
        return self.conn.our_state is h11.DONE

    async def serve(self, handler: HttpHandler) -> None:
        try:
            while True:
                try:
                    request = await self.read_request()
                except h11.RemoteProtocolError:
                    await self.send(
                        h11.Response(status_code=400, headers=[(b"content-length", b"0")])
                    )
                    return
                if request is None:
                    return
                response = await handler(request)
                if not await self.respond(response):
                    return
                if self.conn.our_state is not h11.DONE or self.conn.their_state is not h11.DONE:
                    return
                self.conn.start_next_cycle()
        except (_ConnectionClosed, h11.LocalProtocolError, h11.RemoteProtocolError):
            return
        finally:
            await self.stream.aclose()


async def serve_http(
    handler: HttpHandler,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handler`` over HTTP/1.1 until cancelled.

    ``await nursery.start(serve_http, handler)`` returns the base URL
    (``http://127.0.0.1:<port>``) once the socket listens.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound_port = listeners[0].socket.getsockname()[1]

    numbers = itertools.count(1)

    async def on_connection(stream: trio.SocketStream) -> None:
        await _Connection(stream, next(numbers)).serve(handler)

    task_status.started(f"http://{host}:{bound_port}")
    await trio.serve_listeners(on_connection, listeners)


def fake_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic unit vector for ``text``: what every fake embeddings endpoint returns
    (the same text always gets the same vector, different texts almost surely differ)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    generator = random.Random(seed)
    values = [generator.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]
