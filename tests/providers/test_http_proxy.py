"""A proxy named in the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) is used as
httpx2 and the official SDKs use it. kova's clients are made with a transport of kova's own
(its connection pool), and httpx2 ignores the environment for a client given a transport: with
a proxy in the environment kova leaves the transports to httpx2, except for servers on this
machine (loopback), which are reached directly on kova's pool."""

from __future__ import annotations

import httpx2
import pytest
import trio

from kova.providers._http import HttpTransport
from kova.providers._pool import ConnectionPool

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


async def _one_http_server(
    nursery: trio.Nursery, request_lines: list[str], host: str = "127.0.0.1"
) -> int:
    """A server on ``host`` (a loopback address) answering each request with ``{}``; the
    request lines it read go to ``request_lines``. Returns its port."""
    listeners = await trio.open_tcp_listeners(0, host=host)

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some()
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            request_lines.append(lines[0])
            length = next(
                (
                    int(line.split(":")[1])
                    for line in lines
                    if line.lower().startswith("content-length")
                ),
                0,
            )
            while len(body) < length:
                body += await stream.receive_some()
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: 2\r\nconnection: close\r\n\r\n{}"
            )

    nursery.start_soon(trio.serve_listeners, serve, listeners)
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def _call(base_url: str, method: str = "POST") -> None:
    """One request to ``{base_url}/v1/x`` through a transport of its own, closed after."""
    transport = HttpTransport(provider="test", base_url=base_url)
    async with transport.open():
        assert await transport.request_json(method, "/v1/x", json_body={}) == {}
        client = transport._require_client()
    assert client.is_closed


async def test_a_proxy_in_the_environment_carries_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    async with trio.open_nursery() as nursery:
        port = await _one_http_server(nursery, seen)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        await _call("http://api.kova-proxy.invalid/")
        nursery.cancel_scope.cancel()
    # The proxy got the request in absolute form: the client sent it there.
    assert seen == ["POST http://api.kova-proxy.invalid/v1/x HTTP/1.1"]


async def test_no_proxy_hosts_are_reached_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    # 127.0.0.2: loopback, so the tests may reach it, but not one of the names kova always
    # reaches directly, so only NO_PROXY keeps it from the proxy.
    through_proxy: list[str] = []
    direct: list[str] = []
    async with trio.open_nursery() as nursery:
        proxy_port = await _one_http_server(nursery, through_proxy)
        port = await _one_http_server(nursery, direct, host="127.0.0.2")
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy_port}")
        await _call(f"http://127.0.0.2:{port}/", "GET")
        monkeypatch.setenv("no_proxy", "127.0.0.2")
        await _call(f"http://127.0.0.2:{port}/")
        nursery.cancel_scope.cancel()
    assert through_proxy == [f"GET http://127.0.0.2:{port}/v1/x HTTP/1.1"]
    assert direct == ["POST /v1/x HTTP/1.1"]


async def test_without_a_proxy_kova_s_own_pool_serves() -> None:
    transport = HttpTransport(provider="test", base_url="http://127.0.0.1:9/")
    async with transport.open():
        client = transport._require_client()
        assert isinstance(client._transport, httpx2.AsyncHTTPTransport)
        assert isinstance(client._transport._pool, ConnectionPool)


async def test_a_server_on_this_machine_is_reached_directly_past_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    through_proxy: list[str] = []
    direct: list[str] = []
    async with trio.open_nursery() as nursery:
        proxy_port = await _one_http_server(nursery, through_proxy)
        port = await _one_http_server(nursery, direct)
        # No NO_PROXY: a machine whose proxy is only meant for the outside (a CI runner
        # reaching its package registries) still runs Ollama or kova's demo locally.
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        for host in ("127.0.0.1", "localhost"):
            await _call(f"http://{host}:{port}/")
        await _call("http://api.kova-proxy.invalid/", "GET")
        nursery.cancel_scope.cancel()
    assert direct == ["POST /v1/x HTTP/1.1"] * 2
    assert through_proxy == ["GET http://api.kova-proxy.invalid/v1/x HTTP/1.1"]
