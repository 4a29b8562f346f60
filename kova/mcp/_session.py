"""One live MCP session: the ``mcp`` client on its transport, how the session ends, and one
request on it.

The connection actor (:mod:`kova.mcp._connection`) decides when to open a session and what
to do when one ends; this module holds what a single session is: the transport setup, the
events that say it ended (retired on purpose, lost, or gone from the server), and the
mapping of a request's failures to "the session was lost" or a kova error.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
import mcp_types as mt
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .._errors import KovaConnectionError, KovaError, McpError
from ._transports import (
    SseTransport,
    StdioTransport,
    StreamableHttpTransport,
    is_not_delivered,
)
from ._wire import SessionWatch

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp.client.session import MessageHandlerFnT

    from ._callbacks import ServerCallbacks
    from ._state import ConnectionSettings

__all__ = [
    "Session",
    "SessionLost",
    "Traffic",
    "connect_error",
    "describe",
    "first_of",
    "is_transient",
    "leaves",
    "open_client",
    "request_once",
]

_T = TypeVar("_T")


def _quiet_vendor_logs() -> None:
    """The ``mcp`` package logs what kova handles as errors with tracebacks ("Error in
    sse_reader" and ~60 lines on every SSE server restart). Unconfigured, the standard
    library prints those through its last-resort handler; kova is quiet by default. A
    ``NullHandler`` on the package's logger ends only that: where the application has
    configured logging, the records still reach its handlers at their own level (the
    standard library's advice for libraries, applied to the library kova runs)."""
    vendor = logging.getLogger("mcp")
    if not any(isinstance(handler, logging.NullHandler) for handler in vendor.handlers):
        vendor.addHandler(logging.NullHandler())


_quiet_vendor_logs()


class Session:
    """One live connection: the ``mcp`` client and how it ends."""

    __slots__ = (
        "client",
        "closed",
        "ended",
        "gone",
        "idle",
        "in_flight",
        "number",
        "reason",
        "retired",
        "watch",
    )

    def __init__(self, *, client: Client, number: int) -> None:
        self.client = client
        self.number = number
        self.ended = trio.Event()
        """Set once the connection is over: retired on purpose, or lost."""
        self.retired = False
        """Ended on purpose (``reconnect()``, or the actor stopping)."""
        self.reason: str | None = None
        """Why it was lost."""
        self.closed = trio.Event()
        """Set once the session task has left every context manager."""
        self.gone = trio.Event()
        """Set when kova's HTTP layer saw that the server no longer has this session."""
        self.in_flight = 0
        self.idle = trio.Event()
        """Set while no request is in flight on this session."""
        self.idle.set()
        self.watch: SessionWatch | None = None
        """The transport's watch (stdio: when the child was seen gone)."""

    @property
    def usable(self) -> bool:
        return not (self.ended.is_set() or self.gone.is_set())

    def mark_gone(self, reason: str) -> None:
        if not self.gone.is_set():
            self.reason = reason
            self.gone.set()

    def request_started(self) -> None:
        if self.in_flight == 0:
            self.idle = trio.Event()
        self.in_flight += 1

    def request_finished(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self.idle.set()

    def retire(self) -> None:
        if not self.ended.is_set():
            self.retired = True
            self.ended.set()

    def lose(self, reason: str) -> None:
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()


class Traffic:
    """What a connection attempt received, for the error when ``initialize`` does not
    complete in time."""

    __slots__ = ("first_invalid", "invalid", "messages")

    def __init__(self) -> None:
        self.messages = 0
        """JSON-RPC messages received."""
        self.invalid = 0
        """Items the transport could not read as JSON-RPC messages."""
        self.first_invalid: str | None = None

    def describe(self) -> str:
        if self.invalid:
            plural = "s" if self.invalid != 1 else ""
            return (
                f"it sent {self.invalid} message{plural} that {'are' if plural else 'is'} not "
                f"JSON-RPC (the first: {self.first_invalid})"
            )
        if self.messages:
            return f"it sent {self.messages} message(s) but no answer to initialize"
        return "it sent nothing"


class SessionLost(Exception):
    """A request's session ended under it. ``delivered`` is False when it never ran."""

    def __init__(self, reason: str, *, delivered: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delivered = delivered


def is_transient(exc: BaseException) -> bool:
    """A connection failure that may go away if we try again (refused, reset, timed out)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_transient(inner) for inner in exc.exceptions)
    return isinstance(
        exc,
        OSError | httpx2.TransportError | anyio.BrokenResourceError | KovaConnectionError,
    )


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def describe(exc: BaseException) -> str:
    """A one-line reason for logs and errors (the innermost errors of a group)."""
    return "; ".join(repr(leaf) for leaf in leaves(exc))[:500]


def connect_error(exc: Exception, transport: str) -> Exception:
    """The error ``connect()`` reports for a failed connection attempt."""
    for leaf in leaves(exc):
        if isinstance(leaf, KovaError):
            return leaf
        if isinstance(leaf, MCPError):
            return McpError(f"MCP initialize failed: {leaf.message}", code=leaf.code)
    if is_transient(exc):
        return KovaConnectionError(f"cannot connect to the MCP server ({transport}): {exc!r}")
    return McpError(f"cannot connect to the MCP server ({transport}): {exc!r}")


def _is_local_close(error: MCPError) -> bool:
    """Whether the ``mcp`` package made this error up because the transport broke.

    It reports a transport that closed under a request as code -32000 with fixed messages
    ("Connection closed" from the dispatcher; "SSE stream ..." when a Streamable HTTP
    response stream was cut). -32000 is also the JSON-RPC "server error" range a server may
    use for its own errors, hence the message check.
    """
    return error.code == mt.CONNECTION_CLOSED and (
        error.message == "Connection closed" or error.message.startswith("SSE stream ")
    )


@asynccontextmanager
async def open_client(
    settings: ConnectionSettings,
    callbacks: ServerCallbacks,
    message_handler: MessageHandlerFnT,
    traffic: Traffic | None = None,
) -> AsyncIterator[tuple[Client, trio.Event, SessionWatch]]:
    """Open the transport and the ``mcp`` client on it (``initialize`` included). Yields
    the client, an event set when the server closes the connection, and the transport's
    :class:`~kova.mcp._wire.SessionWatch`. ``traffic`` counts what arrives.

    The transport's read stream is pumped through a stream of our own so we learn when
    the server closes it, even while no request is waiting.
    """
    lost = trio.Event()
    watch = SessionWatch(on_gone=lambda reason: None)

    @asynccontextmanager
    async def watched_transport() -> AsyncIterator[Any]:
        transport = settings.transport
        opened = (
            transport.open(watch=watch)
            if isinstance(transport, StreamableHttpTransport | StdioTransport | SseTransport)
            else transport.open()
        )
        async with opened as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[Any](0)

            async def pump() -> None:
                async with send:
                    try:
                        async for item in read_stream:
                            if traffic is not None:
                                if isinstance(item, Exception):
                                    traffic.invalid += 1
                                    if traffic.first_invalid is None:
                                        traffic.first_invalid = repr(item)[:200]
                                else:
                                    traffic.messages += 1
                            await send.send(item)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the session side closed first: we are shutting down
                lost.set()

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(pump)
                try:
                    yield receive, write_stream
                finally:
                    task_group.cancel_scope.cancel()
                    receive.close()

    client = Client(
        watched_transport(),
        mode="legacy",
        cache=None,
        client_info=mt.Implementation(name=settings.client_name, version=settings.client_version),
        sampling_callback=callbacks.sample if settings.sampling is not None else None,
        elicitation_callback=callbacks.elicit if settings.elicitation is not None else None,
        list_roots_callback=callbacks.list_roots if settings.roots_enabled else None,
        logging_callback=callbacks.on_log,
        message_handler=message_handler,
    )
    entered = False
    try:
        async with client:
            entered = True
            yield client, lost, watch
    except Exception as exc:
        if entered or watch.exit_reason is None:
            raise
        # A stdio child that ended during the handshake: its exit status, not the mcp
        # package's "Connection closed" (which also lost it when a respawn exited at once).
        raise McpError(f"MCP initialize failed: {watch.exit_reason}") from exc


async def request_once(session: Session, operation: Callable[[Client], Awaitable[_T]]) -> _T:
    """One try of ``operation`` on ``session``.

    Raises:
        SessionLost: the session ended under the request.
        McpError: the server answered with a JSON-RPC error, or with a result the ``mcp``
            package cannot use.
    """
    session.request_started()
    started = trio.current_time()

    def delivered() -> bool:
        # A stdio child seen gone before this request started never read it.
        dead_since = session.watch.dead_since if session.watch is not None else None
        return dead_since is None or started < dead_since

    try:
        return await operation(session.client)
    except MCPError as exc:
        if is_not_delivered(exc.code, exc.data):
            session.mark_gone(exc.message)
            raise SessionLost(exc.message, delivered=False) from exc
        if _is_local_close(exc) or (exc.code == mt.CONNECTION_CLOSED and not session.usable):
            session.lose(session.reason or exc.message)
            raise SessionLost(session.reason or exc.message, delivered=delivered()) from exc
        raise McpError(exc.message, code=exc.code) from exc
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        reason = session.reason or "the MCP connection closed during a request"
        session.lose(reason)
        raise SessionLost(reason, delivered=delivered()) from exc
    except ValidationError as exc:
        raise McpError(f"the MCP server sent an invalid response: {exc}") from exc
    except RuntimeError as exc:
        # The mcp package raises RuntimeError for results that break the tool's
        # declared output schema, and for results it cannot use.
        raise McpError(str(exc)) from exc
    finally:
        session.request_finished()


async def first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as one of ``waits`` returns."""
    async with trio.open_nursery() as nursery:

        async def run(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        for wait in waits:
            nursery.start_soon(run, wait)
