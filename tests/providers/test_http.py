"""HttpTransport: open/close, timeouts, connection failures and status -> error mapping."""

from __future__ import annotations

import json
import time
from email.utils import formatdate
from functools import partial
from typing import TYPE_CHECKING

import httpx2
import pytest
import trio

from kova import (
    InvalidRequest,
    KovaConnectionError,
    KovaError,
    KovaTimeoutError,
    ModelNotFound,
    ProviderAuthError,
    ProviderErrorClass,
    ProviderOverloaded,
    RateLimited,
    StreamError,
)
from kova._secret import Secret
from kova.providers._auth import bearer_auth, header_auth
from kova.providers._http import ErrorDetails, HttpTransport, default_error_details

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def mock(handler: Callable[[httpx2.Request], httpx2.Response]) -> HttpTransport:
    return HttpTransport(
        provider="test", base_url="http://api.test/", transport=httpx2.MockTransport(handler)
    )


async def test_calls_outside_open_raise_a_clear_error() -> None:
    transport = mock(lambda request: httpx2.Response(200, json={}))
    with pytest.raises(KovaError, match=r"async with provider.open\(\)"):
        await transport.request_json("GET", "/v1/models")


async def test_nested_opens_share_one_client_closed_by_the_last() -> None:
    transport = mock(lambda request: httpx2.Response(200, json={"ok": True}))
    async with transport.open():
        client = transport._client
        async with transport.open():
            assert transport._client is client
            assert await transport.request_json("GET", "/x") == {"ok": True}
        assert transport._client is client
        assert client is not None
        assert not client.is_closed
    assert transport._client is None
    assert client.is_closed
    # A new block gets a fresh client.
    async with transport.open():
        assert await transport.request_json("GET", "/x") == {"ok": True}


async def test_an_injected_client_is_used_and_never_closed() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(200, json=[1, 2])

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        transport = HttpTransport(provider="test", base_url="http://api.test", client=client)
        async with transport.open():
            assert await transport.request_json("GET", "v1/models") == [1, 2]
        assert not client.is_closed
    assert seen == ["http://api.test/v1/models"]


async def test_json_bodies_are_sent_compact_with_headers_and_params() -> None:
    captured: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        captured.append(request)
        return httpx2.Response(200, json={})

    transport = mock(handler)
    async with transport.open():
        await transport.request_json(
            "POST",
            "/v1/chat",
            json_body={"a": [1, "é"]},
            params={"api-version": "2024-10-21"},
            headers={"api-key": "k"},
        )
    (request,) = captured
    assert request.content == '{"a":[1,"é"]}'.encode()
    assert request.headers["content-type"] == "application/json"
    assert request.headers["api-key"] == "k"
    assert str(request.url) == "http://api.test/v1/chat?api-version=2024-10-21"


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, InvalidRequest),
        (401, ProviderAuthError),
        (403, ProviderAuthError),
        (404, ModelNotFound),
        (429, RateLimited),
        (500, ProviderOverloaded),
        (503, ProviderOverloaded),
    ],
)
async def test_error_statuses_become_classified_provider_errors(
    status: int, error_type: type[Exception]
) -> None:
    body = {"error": {"message": "nope", "type": "some_error", "code": None}}
    transport = mock(lambda request: httpx2.Response(status, json=body))
    async with transport.open():
        with pytest.raises(error_type) as info:
            await transport.request_json("GET", "/x")
    error = info.value
    assert error.status_code == status  # type: ignore[attr-defined]
    assert error.message == "nope"  # type: ignore[attr-defined]
    assert error.error_type == "some_error"  # type: ignore[attr-defined]
    assert error.provider == "test"  # type: ignore[attr-defined]
    assert "nope" in str(error)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({}, None),
    ],
)
async def test_retry_after_headers_are_parsed(
    headers: dict[str, str], expected: float | None
) -> None:
    transport = mock(lambda request: httpx2.Response(429, headers=headers, json={}))
    async with transport.open():
        with pytest.raises(RateLimited) as info:
            await transport.request_json("GET", "/x")
    assert info.value.retry_after == expected
    assert info.value.is_retryable


async def test_retry_after_as_http_date() -> None:
    date = formatdate(timeval=time.time() + 120, usegmt=True)
    transport = mock(lambda request: httpx2.Response(429, headers={"retry-after": date}))
    async with transport.open():
        with pytest.raises(RateLimited) as info:
            await transport.request_json("GET", "/x")
    assert info.value.retry_after is not None
    assert 100 < info.value.retry_after <= 120


async def test_non_json_error_bodies_use_the_text() -> None:
    transport = mock(lambda request: httpx2.Response(502, text="Bad gateway\n"))
    async with transport.open():
        with pytest.raises(ProviderOverloaded, match="Bad gateway"):
            await transport.request_json("GET", "/x")


async def test_an_error_details_hook_can_reclassify() -> None:
    def details(body: object) -> ErrorDetails:
        return ErrorDetails(message="quota", error_class=ProviderErrorClass.OTHER)

    transport = HttpTransport(
        provider="test",
        base_url="http://api.test",
        transport=httpx2.MockTransport(lambda request: httpx2.Response(429, json={})),
        error_details=details,
    )
    async with transport.open():
        with pytest.raises(KovaError) as info:
            await transport.request_json("GET", "/x")
    assert info.value.error_class is ProviderErrorClass.OTHER  # type: ignore[attr-defined]
    assert not info.value.is_retryable


def test_default_error_details_shapes() -> None:
    assert default_error_details({"error": {"message": "m", "status": "INVALID"}}) == ErrorDetails(
        message="m", error_type="INVALID"
    )
    assert default_error_details({"error": "boom"}) == ErrorDetails(message="boom")
    assert default_error_details({"message": "m2"}) == ErrorDetails(message="m2")
    assert default_error_details([1]) == ErrorDetails()


async def test_a_non_json_success_body_is_an_invalid_response() -> None:
    transport = mock(lambda request: httpx2.Response(200, text="<html>"))
    async with transport.open():
        with pytest.raises(KovaError, match="expected a JSON body"):
            await transport.request_json("GET", "/x")


async def test_transport_exceptions_are_mapped() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    transport = mock(refuse)
    async with transport.open():
        with pytest.raises(KovaConnectionError, match="refused") as info:
            await transport.request_json("GET", "/x")
    assert isinstance(info.value.__cause__, httpx2.ConnectError)
    assert isinstance(info.value, ConnectionError)


# --- real sockets on loopback -----------------------------------------------------------------


async def serve(
    nursery: trio.Nursery, handler: Callable[[trio.SocketStream], Awaitable[None]]
) -> int:
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return int(listeners[0].socket.getsockname()[1])


async def read_request(stream: trio.SocketStream) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive_some(65536)


FIRST_CHUNK = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
    b"d\r\ndata: hello\n\n\r\n"
)
"""A streamed response's head and first chunk, and no end."""


async def read_body(transport: HttpTransport, received: list[bytes]) -> None:
    async with transport.open(), transport.stream("POST", "/s", json_body={}) as stream:
        async for chunk in stream.iter_bytes():
            received.append(chunk)


async def test_a_refused_connection_is_a_connection_error() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    transport = HttpTransport(provider="test", base_url=f"http://127.0.0.1:{port}")
    async with transport.open():
        with pytest.raises(KovaConnectionError):
            await transport.request_json("GET", "/x")


async def test_a_silent_server_times_out_on_the_read_timeout(autojump_clock: object) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        port = await serve(nursery, silent)
        transport = HttpTransport(
            provider="test", base_url=f"http://127.0.0.1:{port}", timeout=30.0
        )
        start = trio.current_time()
        async with transport.open():
            with pytest.raises(KovaTimeoutError) as info:
                await transport.request_json("GET", "/x")
        assert trio.current_time() - start == pytest.approx(30.0)
        assert info.value.timeout == 30.0
        assert info.value.is_retryable
        nursery.cancel_scope.cancel()


async def test_a_connection_cut_mid_stream_is_a_stream_error() -> None:
    async def cut(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(FIRST_CHUNK)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        port = await serve(nursery, cut)
        transport = HttpTransport(provider="test", base_url=f"http://127.0.0.1:{port}")
        received: list[bytes] = []
        with pytest.raises(StreamError, match="cut mid-stream"):
            await read_body(transport, received)
        assert b"".join(received) == b"data: hello\n\n"
        nursery.cancel_scope.cancel()


async def test_a_streamed_error_status_raises_on_entry() -> None:
    body = json.dumps({"error": {"message": "slow down", "type": "rate_limit"}})
    transport = mock(lambda request: httpx2.Response(429, headers={"retry-after": "3"}, text=body))
    async with transport.open():
        with pytest.raises(RateLimited, match="slow down") as info:
            async with transport.stream("POST", "/s", json_body={}):
                pytest.fail("the block must not run")
    assert info.value.retry_after == 3.0


async def test_a_stream_that_stalls_mid_body_hits_the_read_timeout(autojump_clock: object) -> None:
    async def stall(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(FIRST_CHUNK)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        port = await serve(nursery, stall)
        transport = HttpTransport(provider="test", base_url=f"http://127.0.0.1:{port}", timeout=5)
        received: list[bytes] = []
        start = trio.current_time()
        with pytest.raises(KovaTimeoutError):
            await read_body(transport, received)
        assert trio.current_time() - start == pytest.approx(5.0)
        assert received == [b"data: hello\n\n"]
        nursery.cancel_scope.cancel()


async def test_a_header_auth_flow_sets_its_header_on_the_one_request_it_sends() -> None:
    """Its async flow (no generator per request) sends the request once, with the header,
    and takes no answer back: a 401 is the caller's to classify, never a second request."""
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("authorization"))
        return httpx2.Response(401, json={"error": {"message": "bad key"}})

    transport = HttpTransport(
        provider="test",
        base_url="http://api.test/",
        transport=httpx2.MockTransport(handler),
        auth=bearer_auth(Secret("sk-1")),
    )
    async with transport.open():
        with pytest.raises(ProviderAuthError):
            await transport.request_json("POST", "/v1/x", json_body={})
        with pytest.raises(ProviderAuthError):
            async with transport.stream("POST", "/v1/x", json_body={}):
                pytest.fail("entered a stream answered 401")
    assert seen == ["Bearer sk-1", "Bearer sk-1"]

    flow = bearer_auth(Secret("sk-2")).async_auth_flow(httpx2.Request("GET", "http://a.test"))
    request = await flow.__anext__()
    assert request.headers["authorization"] == "Bearer sk-2"
    with pytest.raises(StopAsyncIteration):
        await flow.asend(httpx2.Response(200))
    await flow.aclose()  # closing a finished or an unstarted flow is quiet
    unstarted = header_auth("x-api-key", Secret("k")).async_auth_flow(httpx2.Request("GET", "/"))
    await unstarted.aclose()
    with pytest.raises(StopAsyncIteration):
        await unstarted.__anext__()
