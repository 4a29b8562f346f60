"""The connection pool of the httpx2 clients kova creates: httpcore2's pool, with bookkeeping
that costs the same for the 10,000th request in flight as for the first.

httpcore2's ``AsyncConnectionPool`` plans the whole pool again each time a request arrives or
finishes: a pass over every request in flight and every connection, asking each connection its
state. That is nothing for ten requests and quadratic for thousands: 10,000 concurrent streams
through one stock pool spend minutes of CPU in those passes (``bench/``, scenario g; the floor
client there still uses the stock pool).

:class:`ConnectionPool` is that pool with its own planning. It opens the same connections
(httpcore2's ``AsyncHTTPConnection``, made by the base class's ``create_connection``), honours
the same ``httpx2.Limits`` and raises the same errors, and each arrival or release touches only
the request and the connection concerned:

* every connection is either **held** by exactly one request (connecting, sending or being
  read) or **idle** in the keep-alive set, so a connection handed to a request is reserved for
  it until that request lets go of it;
* a request takes the idle connection to its origin released most recently (the one a server
  is least likely to have dropped; it is checked for expiry and for a server-side close first),
  else opens a new connection while fewer than ``max_connections`` exist, else closes an idle
  connection to another origin to make room, else waits in arrival order;
* a request that lets go of a reusable connection hands it to the first waiting request (or,
  for another origin, closes it and opens one for that request), else puts it in the
  keep-alive set, where past ``max_keepalive_connections`` the oldest idle connection closes;
  one that was closed, failed or never connected is dropped, and its room goes to a waiting
  request;
* each arrival also closes the oldest idle connection if its keep-alive has expired, so idle
  connections age out while the pool is in use (as the stock pool's passes do).

HTTP/1.1 only, as kova's clients are: an HTTP/2 connection carries several requests at once,
which the one-holder rule does not describe.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from types import AsyncGeneratorType
from typing import TYPE_CHECKING

import httpcore2
import httpx2
import trio

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator

    from httpcore2 import AsyncConnectionInterface, Origin, Request, Response

__all__ = ["ConnectionPool", "pooled_transport"]


class _Lease:
    """One request's claim on the pool: the connection it holds, or its place in the queue."""

    __slots__ = ("connection", "gone", "origin", "ready")

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.connection: AsyncConnectionInterface | None = None
        self.ready: trio.Event | None = None  # set when a waiting request is handed a connection
        self.gone = False  # released while waiting: skipped when its turn comes


class ConnectionPool(httpcore2.AsyncConnectionPool):
    """httpcore2's connection pool with per-request bookkeeping (see the module docstring)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int | None = None,
        max_keepalive_connections: int | None = None,
        keepalive_expiry: float | None = None,
    ) -> None:
        super().__init__(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
        )
        self._held: set[AsyncConnectionInterface] = set()
        self._idle: OrderedDict[AsyncConnectionInterface, None] = OrderedDict()  # oldest first
        self._waiting: deque[_Lease] = deque()

    @property
    def connections(self) -> list[AsyncConnectionInterface]:
        return [*self._held, *self._idle]

    async def handle_async_request(self, request: Request) -> Response:
        scheme = request.url.scheme
        if scheme not in (b"http", b"https", b"ws", b"wss"):
            if not scheme:
                raise httpcore2.UnsupportedProtocol(
                    "Request URL is missing an 'http://' or 'https://' protocol."
                )
            raise httpcore2.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme.decode()}://'."
            )
        timeouts = request.extensions.get("timeout", {})
        timeout = timeouts.get("pool") if isinstance(timeouts, dict) else None
        lease = _Lease(request.url.origin)
        try:
            while True:
                if lease.connection is None:
                    closing = self._place(lease)
                    if closing:
                        await self._close_connections(closing)
                    if lease.connection is None:
                        await self._wait(lease, timeout)
                connection = lease.connection
                assert connection is not None
                try:
                    response = await connection.handle_async_request(request)
                except httpcore2.ConnectionNotAvailable:
                    # It closed between being handed out and being used: let it go, try again.
                    lease.connection = None
                    closing = self._settle(connection)
                    if closing:
                        await self._close_connections(closing)
                else:
                    break
        except BaseException:
            closing = self._release(lease)
            if closing:
                await self._close_connections(closing)
            raise
        return httpcore2.Response(
            status=response.status,
            headers=response.headers,
            content=_PoolStream(response.stream, lease, self),
            extensions=response.extensions,
        )

    async def _wait(self, lease: _Lease, seconds: float | None) -> None:
        """Wait for a connection to be handed to ``lease``, at most the pool timeout."""
        ready = lease.ready
        assert ready is not None
        try:
            with trio.fail_after(math.inf if seconds is None else seconds):
                await ready.wait()
        except trio.TooSlowError as exc:
            raise httpcore2.PoolTimeout(
                f"no connection became free within the pool timeout ({seconds} s)"
            ) from exc

    def _place(self, lease: _Lease) -> list[AsyncConnectionInterface]:
        """Give ``lease`` a connection, or queue it; return the connections to close."""
        closing: list[AsyncConnectionInterface] = []
        connection = self._take_idle(lease.origin, closing)
        if connection is None:
            if len(self._held) + len(self._idle) >= self._max_connections:
                if not self._idle:
                    lease.ready = trio.Event()
                    self._waiting.append(lease)
                    return closing
                # Full, and every idle connection is to another origin: close one for room.
                closing.append(self._idle.popitem(last=False)[0])
            connection = self.create_connection(lease.origin)
        self._held.add(connection)
        lease.connection = connection
        if self._idle and self._keepalive_expiry is not None:
            oldest = next(iter(self._idle))
            if oldest.has_expired():
                del self._idle[oldest]
                closing.append(oldest)
        return closing

    def _take_idle(
        self, origin: Origin, closing: list[AsyncConnectionInterface]
    ) -> AsyncConnectionInterface | None:
        """The idle connection to ``origin`` released last that is still usable, out of the
        keep-alive set; the stale ones met on the way go to ``closing``."""
        while self._idle:
            found = None
            for connection in reversed(self._idle):
                if connection.can_handle_request(origin):
                    found = connection
                    break
            if found is None:
                return None
            del self._idle[found]
            if found.is_closed():
                continue
            if found.has_expired():  # past its keep-alive, or the server closed it
                closing.append(found)
                continue
            return found
        return None

    def _release(self, lease: _Lease) -> list[AsyncConnectionInterface]:
        """``lease``'s request is done (its body closed, or it failed or was cancelled)."""
        connection = lease.connection
        if connection is None:
            lease.gone = True  # if it is still queued, its turn is skipped
            return []
        lease.connection = None
        return self._settle(connection)

    def _settle(self, connection: AsyncConnectionInterface) -> list[AsyncConnectionInterface]:
        """Decide what becomes of a connection its request let go of."""
        self._held.discard(connection)
        if connection.is_closed() or not connection.is_idle():
            # Closed, failed, or never connected (its request left before it could): drop it.
            # A connection still mid-exchange cannot be reused, so it is closed.
            closing = [connection] if connection.is_connected() else []
            waiter = self._next_waiter()
            if waiter is not None:
                self._hand(waiter, self.create_connection(waiter.origin))
            return closing
        waiter = self._next_waiter()
        if waiter is not None:
            if connection.can_handle_request(waiter.origin):
                self._hand(waiter, connection)
                return []
            self._hand(waiter, self.create_connection(waiter.origin))
            return [connection]
        self._idle[connection] = None
        closing = []
        while len(self._idle) > self._max_keepalive_connections:
            closing.append(self._idle.popitem(last=False)[0])
        return closing

    def _next_waiter(self) -> _Lease | None:
        waiting = self._waiting
        while waiting:
            lease = waiting.popleft()
            if not lease.gone:
                return lease
        return None

    def _hand(self, lease: _Lease, connection: AsyncConnectionInterface) -> None:
        self._held.add(connection)
        lease.connection = connection
        assert lease.ready is not None
        lease.ready.set()

    async def aclose(self) -> None:
        closing = [*self._held, *self._idle]
        self._held.clear()
        self._idle.clear()
        await self._close_connections(closing)

    def __repr__(self) -> str:
        waiting = sum(not lease.gone for lease in self._waiting)
        return (
            f"<{type(self).__name__} [Requests: {len(self._held)} active, {waiting} queued | "
            f"Connections: {len(self._held)} active, {len(self._idle)} idle]>"
        )


class _PoolStream:
    """A response body that gives its connection back to the pool when closed."""

    __slots__ = ("_closed", "_iterator", "_lease", "_pool", "_stream")

    def __init__(self, stream: object, lease: _Lease, pool: ConnectionPool) -> None:
        self._stream = stream
        self._lease = lease
        self._pool = pool
        self._closed = False
        self._iterator: object = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The connection's own iterator, not one of ours around it (an async generator
        # layer per body read); closing the body closes it.
        iterator: AsyncIterator[bytes] = self._stream.__aiter__()  # type: ignore[attr-defined]
        self._iterator = iterator
        return iterator

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            if isinstance(self._iterator, AsyncGeneratorType):
                await self._iterator.aclose()
            close = getattr(self._stream, "aclose", None)
            if close is not None:
                await close()
        closing = self._pool._release(self._lease)
        if closing:
            await self._pool._close_connections(closing)


# What ConnectionPool takes from httpcore2's pool besides its public surface: the settings the
# base class keeps (read by ``create_connection`` and by the planning) and its closing helper.
# They are private, so a release may rename them; pooled_transport checks they are there.
_BUILT_ON = (
    "_ssl_context",
    "_max_connections",
    "_max_keepalive_connections",
    "_keepalive_expiry",
    "_close_connections",
    "create_connection",
)


def pooled_transport(limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """httpx2's transport as ``httpx2.AsyncClient`` would make it for ``limits``, on a
    :class:`ConnectionPool`.

    If this httpcore2 does not have what the pool is built on (:data:`_BUILT_ON`, private
    names a release may change) the transport keeps httpcore2's own pool: correct, and slower
    only with thousands of requests in flight. ``tests/providers/test_pool.py`` fails on such a
    release, so it is noticed before users are."""
    transport = httpx2.AsyncHTTPTransport(limits=limits)
    stock = getattr(transport, "_pool", None)
    if type(stock) is httpcore2.AsyncConnectionPool and all(
        hasattr(stock, name) for name in _BUILT_ON
    ):
        transport._pool = ConnectionPool(
            ssl_context=stock._ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
        )
    return transport
