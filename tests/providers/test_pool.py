"""kova's connection pool (kova.providers._pool) against real sockets on loopback: reuse,
limits, queueing, timeouts, cancellation, server-closed connections, and bookkeeping that does
not grow with the requests in flight."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import httpcore2
import httpx2
import pytest
import trio
import trio.testing

from kova.providers._http import HttpTransport
from kova.providers._pool import ConnectionPool, _Lease, _PoolStream, pooled_transport
from kova.testing._http_server import FakeResponse, FakeStream, RecordedRequest, serve_http

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from httpcore2 import AsyncConnectionInterface, Origin, Request, Response


class Server:
    """A loopback server whose answers can be held back until released."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.release = trio.Event()
        self.hold = False
        self.arrived = trio.Condition()

    async def handle(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        self.requests.append(request)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        async with self.arrived:
            self.arrived.notify_all()
        try:
            if self.hold:
                await self.release.wait()
        finally:
            self.in_flight -= 1
        if request.path == "/stream":
            return FakeStream(chunks=[b"one", b"two"], hold=True)
        return FakeResponse(body=b"ok")

    async def wait_for(self, count: int) -> None:
        async with self.arrived:
            while len(self.requests) < count:
                await self.arrived.wait()

    def connections(self) -> list[int]:
        return [request.connection for request in self.requests]


async def open_server(nursery: trio.Nursery) -> tuple[Server, str]:
    server = Server()
    base_url: str = await nursery.start(serve_http, server.handle)
    return server, base_url


def client_for(limits: httpx2.Limits, **timeouts: float) -> httpx2.AsyncClient:
    timeout = httpx2.Timeout(30.0, **timeouts)
    return httpx2.AsyncClient(transport=pooled_transport(limits), timeout=timeout)


def pool_of(client: httpx2.AsyncClient) -> ConnectionPool:
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, ConnectionPool)
    return pool


async def get_ok(client: httpx2.AsyncClient, url: str) -> None:
    response = await client.get(url)
    assert response.status_code == 200
    assert response.content == b"ok"


async def test_kova_clients_use_the_pool_and_an_injected_transport_is_left_alone() -> None:
    transport = HttpTransport(provider="test", base_url="http://127.0.0.1:1")
    async with transport.open():
        assert isinstance(transport._require_client()._transport._pool, ConnectionPool)  # type: ignore[attr-defined]
    mock = httpx2.MockTransport(lambda request: httpx2.Response(200))
    injected = HttpTransport(provider="test", base_url="http://127.0.0.1:1", transport=mock)
    async with injected.open():
        assert injected._require_client()._transport is mock


async def test_sequential_requests_reuse_one_connection() -> None:
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        async with client_for(httpx2.Limits(max_connections=None)) as client:
            for _ in range(5):
                await get_ok(client, base_url + "/x")
            assert len(pool_of(client).connections) == 1
        nursery.cancel_scope.cancel()
    assert server.connections() == [1, 1, 1, 1, 1]


async def test_concurrent_requests_each_open_a_connection_and_the_surplus_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    count = 30
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=5)
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        server.hold = True
        async with client_for(limits) as client:
            with trio.fail_after(10):  # all of them must be open at once to be released
                async with trio.open_nursery() as requests:
                    for _ in range(count):
                        requests.start_soon(get_ok, client, base_url + "/x")
                    await server.wait_for(count)
                    assert server.most_in_flight == count
                    assert len(pool_of(client).connections) == count
                    server.release.set()
            pool = pool_of(client)
            assert len(pool.connections) == 5
            assert all(connection.is_idle() for connection in pool.connections)
            server.hold = False
            async with trio.open_nursery() as requests:
                for _ in range(count):
                    requests.start_soon(get_ok, client, base_url + "/x")
        nursery.cancel_scope.cancel()
    first, second = server.connections()[:count], server.connections()[count:]
    assert len(set(first)) == count
    assert len(set(second) & set(first)) == 5  # the five kept alive were reused


async def test_max_connections_queues_the_rest(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        server.hold = True
        async with client_for(httpx2.Limits(max_connections=2)) as client:
            async with trio.open_nursery() as requests:
                for _ in range(6):
                    requests.start_soon(get_ok, client, base_url + "/x")
                await server.wait_for(2)
                await trio.testing.wait_all_tasks_blocked()
                assert len(server.requests) == 2  # the other four wait for a connection
                assert "4 queued" in repr(pool_of(client))
                server.release.set()
            assert len(pool_of(client).connections) == 2
        nursery.cancel_scope.cancel()
    assert server.most_in_flight == 2
    assert sorted(set(server.connections())) == [1, 2]


async def test_a_full_pool_times_out_on_the_pool_timeout_and_serves_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        server.hold = True
        async with client_for(httpx2.Limits(max_connections=1), pool=1.0) as client:
            nursery.start_soon(get_ok, client, base_url + "/held")
            await server.wait_for(1)
            start = trio.current_time()
            with pytest.raises(httpx2.PoolTimeout):
                await client.get(base_url + "/late")
            assert trio.current_time() - start == pytest.approx(1.0)
            server.release.set()
            server.hold = False
            await get_ok(client, base_url + "/next")
            assert len(pool_of(client).connections) == 1
        nursery.cancel_scope.cancel()
    assert [r.path for r in server.requests] == ["/held", "/next"]
    assert server.connections() == [1, 1]


async def test_a_cancelled_waiter_is_skipped(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        server.hold = True
        async with client_for(httpx2.Limits(max_connections=1)) as client:
            nursery.start_soon(get_ok, client, base_url + "/held")
            await server.wait_for(1)
            with trio.move_on_after(1.0) as waiting:
                await client.get(base_url + "/cancelled")
            assert waiting.cancelled_caught
            async with trio.open_nursery() as requests:
                requests.start_soon(get_ok, client, base_url + "/next")
                await trio.testing.wait_all_tasks_blocked()
                server.release.set()
            assert "0 queued" in repr(pool_of(client))
            assert len(pool_of(client).connections) == 1
        nursery.cancel_scope.cancel()
    assert [r.path for r in server.requests] == ["/held", "/next"]
    assert server.connections() == [1, 1]


async def test_a_stream_cancelled_mid_body_drops_its_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        async with client_for(httpx2.Limits(max_connections=None)) as client:
            received = []
            with trio.move_on_after(5.0):  # the server stalls after two chunks
                async with client.stream("GET", base_url + "/stream") as response:
                    async for chunk in response.aiter_raw():
                        received.append(chunk)
            assert b"".join(received) == b"onetwo"
            assert pool_of(client).connections == []  # unfinished body: closed, not reused
            await get_ok(client, base_url + "/x")
        nursery.cancel_scope.cancel()
    assert server.connections() == [1, 2]


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    closed = trio.Event()

    async def answer_then_close(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await stream.aclose()
        closed.set()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, answer_then_close, 0))
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/x"
        async with client_for(httpx2.Limits(max_connections=None)) as client:
            await get_ok(client, url)
            await closed.wait()
            first = pool_of(client).connections
            await get_ok(client, url)  # a new connection, not a read error on the dead one
            assert pool_of(client).connections != first
        nursery.cancel_scope.cancel()


class _Counting:
    """A connection that counts the questions the pool asks it."""

    asked = 0

    def __init__(self, connection: AsyncConnectionInterface) -> None:
        self._connection = connection

    def _ask(self, answer: Callable[[], bool]) -> bool:
        _Counting.asked += 1
        return answer()

    async def handle_async_request(self, request: Request) -> Response:
        return await self._connection.handle_async_request(request)

    async def aclose(self) -> None:
        await self._connection.aclose()

    def can_handle_request(self, origin: Origin) -> bool:
        return self._ask(lambda: self._connection.can_handle_request(origin))

    def is_available(self) -> bool:
        return self._ask(self._connection.is_available)

    def has_expired(self) -> bool:
        return self._ask(self._connection.has_expired)

    def is_idle(self) -> bool:
        return self._ask(self._connection.is_idle)

    def is_closed(self) -> bool:
        return self._ask(self._connection.is_closed)

    def is_connected(self) -> bool:
        return self._ask(self._connection.is_connected)

    def can_multiplex(self) -> bool:
        return self._ask(self._connection.can_multiplex)


class _CountingPool(ConnectionPool):
    def create_connection(self, origin: Origin) -> AsyncConnectionInterface:
        return _Counting(super().create_connection(origin))  # type: ignore[return-value]


async def _asked_for(count: int, base_url: str, server: Server) -> int:
    """Connection questions for ``count`` requests all in flight at once, then all done."""
    _Counting.asked = 0
    server.requests.clear()
    server.release = trio.Event()
    pool = _CountingPool(max_connections=None, max_keepalive_connections=10)
    transport = httpx2.AsyncHTTPTransport()
    transport._pool = pool
    async with httpx2.AsyncClient(transport=transport) as client:
        async with trio.open_nursery() as requests:
            for _ in range(count):
                requests.start_soon(get_ok, client, base_url + "/x")
            await server.wait_for(count)
            server.release.set()
    return _Counting.asked


async def test_bookkeeping_per_request_does_not_grow_with_the_requests_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The stock pool asks every connection its state on every arrival and release: for 200
    # requests in flight, ~1.5 million questions. This pool asks the connection concerned.
    async with trio.open_nursery() as nursery:
        server, base_url = await open_server(nursery)
        server.hold = True
        small = await _asked_for(50, base_url, server)
        large = await _asked_for(200, base_url, server)
        nursery.cancel_scope.cancel()
    assert small <= 50 * 6
    assert large <= 200 * 6


async def test_pool_errors_match_the_stock_pools() -> None:
    pool = ConnectionPool()
    for url, message in [
        ("ftp://example.com/", "unsupported protocol 'ftp://'"),
        ("//example.com/", "missing an 'http://' or 'https://'"),
    ]:
        with pytest.raises(httpcore2.UnsupportedProtocol, match=message):
            await pool.handle_async_request(httpcore2.Request("GET", url))
    await pool.aclose()
    assert pool.connections == []


def test_this_httpcore2_has_what_the_pool_is_built_on() -> None:
    # A release that renames the private names ConnectionPool relies on fails here (the
    # transport would quietly keep the stock pool, quadratic with thousands of requests).
    transport = pooled_transport(httpx2.Limits(max_connections=10))
    assert type(transport._pool) is ConnectionPool  # type: ignore[attr-defined]


async def test_without_what_the_pool_is_built_on_the_stock_pool_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kova.providers._pool as pool_module

    monkeypatch.setattr(pool_module, "_BUILT_ON", (*pool_module._BUILT_ON, "_renamed_away"))
    transport = pooled_transport(httpx2.Limits(max_connections=10))
    assert type(transport._pool) is httpcore2.AsyncConnectionPool  # type: ignore[attr-defined]
    async with trio.open_nursery() as nursery:
        _, base_url = await open_server(nursery)
        async with httpx2.AsyncClient(transport=transport, timeout=30.0) as client:
            await get_ok(client, base_url + "/")
        nursery.cancel_scope.cancel()


async def test_a_body_closed_early_closes_the_connection_s_own_iterator() -> None:
    # The pool hands out the connection's body iterator itself (no async generator of its
    # own around it): closing the body finishes that iterator, not the garbage collector.
    events: list[str] = []

    class Body:
        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                yield b"one"
                yield b"two"
            finally:
                events.append("iterator closed")

        async def aclose(self) -> None:
            events.append("body closed")

    pool = ConnectionPool()
    stream = _PoolStream(Body(), _Lease(httpcore2.Origin(b"http", b"a.test", 80)), pool)
    chunks = stream.__aiter__()
    assert await chunks.__anext__() == b"one"
    await stream.aclose()
    assert events == ["iterator closed", "body closed"]
    await stream.aclose()  # once
    assert events == ["iterator closed", "body closed"]
