"""Plain HTTP helpers of the served app: reading a JSON body under a size limit, streaming
server-sent events that a disconnecting client cancels, JSON answers.

Every route reads its body with :func:`read_json`, so no route can be made to hold more than
``max_body_bytes`` of a request; the protocol modules turn a :class:`BadRequest` into their
own error shape.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._json import dumps_bytes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from starlette.requests import Request
    from starlette.types import Receive, Scope, Send

__all__ = ["BadRequest", "EventStream", "json_response", "read_json", "until_disconnect"]


class BadRequest(Exception):
    """A request a route refuses: ``status`` and a message for the client, and the protocol's
    own ``code`` where it has one."""

    def __init__(self, status: int, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


_DRAIN_BYTES = 8 * 1024 * 1024
"""How much of a refused body is read and dropped before answering 413: a client still
sending when the connection closes would get a reset instead of the answer."""


async def read_json(request: Request, *, limit: int) -> Any:
    """The request's body as JSON (``Any``: untrusted client data, checked by the caller).

    Raises:
        BadRequest: 413 for a body over ``limit`` bytes (told by its ``content-length`` or
            counted as it arrives), 400 for a body that is not JSON.
    """
    too_large = BadRequest(
        413, f"the request body is over the {limit}-byte limit", code="body_too_large"
    )
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise BadRequest(400, "the content-length header is not a number")
        if int(declared) > limit:
            if int(declared) <= limit + _DRAIN_BYTES:
                await _drain(request, limit + _DRAIN_BYTES)
            raise too_large
    body = bytearray()
    more = True
    while more:
        chunk, more = await _next_chunk(request)
        body += chunk
        if len(body) > limit:
            if more:
                await _drain(request, limit + _DRAIN_BYTES - len(body))
            raise too_large
    if not body:
        raise BadRequest(400, "the request has no body: send a JSON object")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(400, f"the request body is not valid JSON: {exc}") from None


async def _next_chunk(request: Request) -> tuple[bytes, bool]:
    """The next piece of the body and whether more follows (read straight from the ASGI
    ``receive``: no iterator is left half-read when a body is refused)."""
    message = await request.receive()
    if message["type"] == "http.disconnect":
        raise BadRequest(400, "the client went away while sending the body")
    return bytes(message.get("body", b"")), bool(message.get("more_body", False))


async def _drain(request: Request, budget: int) -> None:
    """Read and drop up to ``budget`` more bytes of the body (then stop reading)."""
    more = True
    while more and budget >= 0:
        chunk, more = await _next_chunk(request)
        budget -= len(chunk)


def json_response(value: Any, status: int = 200) -> Any:
    """``value`` as a JSON response (compact UTF-8; a lone surrogate, which UTF-8 cannot
    carry, as its JSON escape: error messages quote what clients sent)."""
    from starlette.responses import Response

    return Response(dumps_bytes(value), status_code=status, media_type="application/json")


class EventStream:
    """An ASGI response that streams what ``produce`` writes (server-sent events, say).

    ``produce(write)`` runs while a second task watches the connection: a client that goes
    away cancels ``produce`` (and the turn it runs) at once, and the response returns once
    everything it started has stopped.
    """

    __slots__ = ("_headers", "_produce", "_status")

    def __init__(
        self,
        produce: Callable[[Callable[[bytes], Awaitable[None]]], Awaitable[None]],
        *,
        media_type: str = "text/event-stream",
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._produce = produce
        self._status = status
        self._headers = [
            (b"content-type", f"{media_type}; charset=utf-8".encode()),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            *((k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self._status, "headers": self._headers}
        )

        async def write(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        async with until_disconnect(receive):
            await self._produce(write)
            await send({"type": "http.response.body", "body": b"", "more_body": False})


@asynccontextmanager
async def until_disconnect(receive: Receive) -> AsyncIterator[None]:
    """The block, cancelled if the client goes away before it ends (the ASGI server says so
    with ``http.disconnect``: then the turn it runs stops)."""
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    nursery.cancel_scope.cancel(reason="the client went away")
                    return

        nursery.start_soon(watch)
        yield
        nursery.cancel_scope.cancel()
