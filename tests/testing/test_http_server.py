"""The loopback HTTP server the wire-level fakes share."""

from __future__ import annotations

import httpx2
import pytest
import trio

from kova.testing._http_server import (
    FakeResponse,
    FakeStream,
    RecordedRequest,
    json_response,
    serve_http,
)


async def test_json_response_and_recorded_request() -> None:
    seen: list[RecordedRequest] = []

    async def handler(request: RecordedRequest) -> FakeResponse:
        seen.append(request)
        return json_response({"ok": True}, headers={"x-extra": "1"})

    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(serve_http, handler)
        async with httpx2.AsyncClient() as client:
            response = await client.post(
                f"{base_url}/v1/things?limit=2&after_id=a", json={"a": 1}, headers={"X-Key": "k"}
            )
            again = await client.get(f"{base_url}/second")  # same keep-alive connection
        nursery.cancel_scope.cancel()
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert response.headers["x-extra"] == "1"
    assert again.status_code == 200
    assert [r.path for r in seen] == ["/v1/things", "/second"]
    assert seen[0].connection == seen[1].connection == 1
    assert seen[0].method == "POST"
    assert seen[0].query == {"limit": "2", "after_id": "a"}
    assert seen[0].headers["x-key"] == "k"
    assert seen[0].json() == {"a": 1}
    assert seen[1].json() is None


async def test_stream_sends_chunks_and_cut_breaks_the_body() -> None:
    async def handler(request: RecordedRequest) -> FakeStream:
        return FakeStream(chunks=[b"one,", b"two,"], cut=request.path == "/cut")

    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(serve_http, handler)
        async with httpx2.AsyncClient() as client:
            async with client.stream("GET", f"{base_url}/whole") as response:
                body = b"".join([chunk async for chunk in response.aiter_bytes()])
            assert body == b"one,two,"
            received: list[bytes] = []

            async def read_cut() -> None:
                async with client.stream("GET", f"{base_url}/cut") as response:
                    async for chunk in response.aiter_bytes():
                        received.append(chunk)

            with pytest.raises(httpx2.RemoteProtocolError):
                await read_cut()
            assert b"".join(received) == b"one,two,"
        nursery.cancel_scope.cancel()
