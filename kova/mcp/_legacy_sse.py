"""The legacy HTTP+SSE transport's streams (MCP 2024-11-05), read by kova.

The ``mcp`` package's ``sse_client`` reads the event stream with httpx2's reader, whose 1 MiB
event limit ends the whole stream: one large tool result (server-everything's 1.6 MB
``gzip-file-as-resource``) ended the session, kova reported "the server closed the SSE
stream" and replayed the call into the same failure. Here the events are framed by
:class:`~kova.mcp._wire.SseFramer` under the transport's ``max_message_bytes`` and every
message is read by :func:`~kova.mcp._wire.read_message`, as over stdio: a larger answer fails
only its own call (with the limit in the error), and the session goes on.

The protocol is the package's: GET the event stream, wait for the ``endpoint`` event, POST
each client message to that endpoint (in the sending task's context, one at a time), with the
package's rule for redirects (only within the endpoint's origin).
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlparse

import anyio
import httpx2
from mcp.shared._context_streams import create_context_streams  # private: as the package's own
from mcp.shared._httpx_utils import request_within_origin, stream_within_origin
from mcp_types import JSONRPCRequest

from ._wire import (
    HTTP_REFUSED,
    Oversize,
    SseFramer,
    TooLarge,
    Waiting,
    answer_in_place,
    http_refusal,
    read_message,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from anyio.abc import TaskStatus
    from httpx2 import ServerSentEvent
    from mcp.shared.message import SessionMessage

__all__ = ["sse_streams"]

log = logging.getLogger("mcp.client.sse")  # the package's logger: hosts configure it already


@asynccontextmanager
async def sse_streams(
    client: httpx2.AsyncClient,
    url: str,
    *,
    limit: int,
    send: Any,
    on_end: Callable[[], Awaitable[None]],
    encode: Callable[[Any], bytes],
) -> AsyncIterator[Any]:
    """Open the event stream at ``url`` and yield the session's write stream; what the server
    sends goes to ``send`` (a memory stream the caller reads, which it also uses for answers
    of its own). ``on_end`` runs when the server ends the stream, before ``send`` closes.
    ``encode`` turns a client message into the JSON body of its POST."""
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
    async with stream_within_origin(client, "GET", url, headers=headers) as response:
        response.raise_for_status()
        content_type = response.headers.get("content-type", "").partition(";")[0]
        if content_type.strip().lower() != "text/event-stream":
            raise httpx2.SSEError(
                f"Expected response with content type 'text/event-stream', got {content_type!r}."
            )
        session = _SseSession(client, url, limit=limit, send=send, on_end=on_end, encode=encode)
        async with (
            session.write_stream,
            session.write_reader,
            anyio.create_task_group() as task_group,
        ):
            endpoint = await task_group.start(session.read_events, response)
            task_group.start_soon(session.write_messages, endpoint)
            try:
                yield session.write_stream
            finally:
                task_group.cancel_scope.cancel()


class _SseSession:
    """One legacy SSE connection: the event stream read into ``send``, and the session's
    messages POSTed to the endpoint the server named."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        *,
        limit: int,
        send: Any,
        on_end: Callable[[], Awaitable[None]],
        encode: Callable[[Any], bytes],
    ) -> None:
        self.client = client
        self.url = url
        self.limit = limit
        self.send = send
        self.on_end = on_end
        self.encode = encode
        self.write_stream, self.write_reader = create_context_streams[Any](0)
        self.waiting = Waiting()
        self.started = False

    async def read_events(
        self,
        response: httpx2.Response,
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read the event stream until it ends; ``task_status`` gets the message endpoint."""
        framer = SseFramer(Oversize(self.limit, "SseTransport", waiting=self.waiting))
        async with self.send:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                try:
                    async for chunk in response.aiter_bytes():
                        for event in framer.feed(chunk):
                            await self._deliver(event, task_status)
                except httpx2.TransportError as exc:
                    if not self.started:
                        raise
                    # As the package's reader did: an application that configured
                    # logging sees it (kova's NullHandler keeps the default quiet).
                    log.warning("the SSE stream broke: %r", exc)
                if not self.started:
                    raise httpx2.RemoteProtocolError(
                        "the SSE stream ended before the server named its message endpoint"
                    )
                await self.on_end()

    async def _deliver(
        self, event: ServerSentEvent | TooLarge, task_status: TaskStatus[str]
    ) -> None:
        if isinstance(event, TooLarge):
            self.waiting.read(event.answer)
            await self.send.send(event.answer)
        elif event.event == "endpoint" and not self.started:
            endpoint = urljoin(self.url, event.data)
            if _origin(endpoint) != _origin(self.url):
                raise ValueError(
                    f"the SSE endpoint's origin does not match the connection's: {endpoint}"
                )
            self.started = True
            task_status.started(endpoint)
        elif event.event == "message" and event.data:
            item = read_message(event.data)
            self.waiting.read(item)
            await self.send.send(item)

    async def post(self, endpoint: str, session_message: SessionMessage) -> None:
        """POST one message; a refusal fails the request it carried, naming the status."""
        message = session_message.message
        response = await request_within_origin(
            self.client,
            "POST",
            endpoint,
            content=self.encode(message),
            headers={"content-type": "application/json"},
        )
        if response.status_code < 400:
            return
        # Refused (a 401 the token refresh did not cure, a 5xx): that request fails naming
        # the status, and the writer goes on (the package's stopped, and every later request
        # waited for its timeout).
        refusal = http_refusal(response.status_code, response.reason_phrase, response.content)
        log.warning("the MCP server refused a message: %s", refusal)
        request_id = getattr(message, "id", None)
        if isinstance(message, JSONRPCRequest) and request_id is not None:
            answer = answer_in_place(b"", HTTP_REFUSED, refusal, request_id)
            self.waiting.read(answer)
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self.send.send(answer)

    async def write_messages(self, endpoint: str) -> None:
        """POST the session's messages, each in the context of the task that sent it."""
        reader = self.write_reader
        try:
            async with reader, self.write_stream:
                async for session_message in reader:
                    self.waiting.sending(session_message.message)
                    context = reader.last_context
                    if context is None:
                        await self.post(endpoint, session_message)
                        continue
                    async with anyio.create_task_group() as task_group:
                        context.run(task_group.start_soon, self.post, endpoint, session_message)
        except Exception:  # as the package's writer: the session sees no more answers
            log.exception("Error in post_writer")


def _origin(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    return parsed.scheme, parsed.netloc
