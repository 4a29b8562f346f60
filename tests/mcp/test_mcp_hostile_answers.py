"""The same answer has the same outcome on stdio, legacy SSE and Streamable HTTP (issue 44,
items 1, 3 and 5): results up to the 16 MiB limit are delivered on every transport, a larger
one fails only its own call with McpError naming the limit (the session goes on, nothing is
sent twice), and an answer kova cannot read has one rule everywhere (the table in
docs/mcp.md, "Hostile answers").

Before, an answer over 1 MiB framed as a server-sent event (legacy SSE, and Streamable HTTP
servers that answer POSTs with ``text/event-stream``) was reported as a lost connection and
replayed into the same failure, and unreadable answers were dropped over SSE (the call waited
its whole timeout) or failed with -32700 over HTTP.

The server is ``hostile_server.py``, one hand-written server speaking all three transports.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import attrs
import pytest
import structlog.testing
import trio
from mcp_fixtures import HOSTILE, start_server, stop_server

import kova
from kova.mcp import McpClient, SseTransport, StdioTransport, StreamableHttpTransport, Transport

if TYPE_CHECKING:
    from collections.abc import Iterator

GUARD = 60
MIB = 1024 * 1024
TRANSPORTS = ("stdio", "sse", "http", "http-json")


@pytest.fixture(scope="module", params=TRANSPORTS)
def hostile(request: pytest.FixtureRequest) -> Iterator[Transport]:
    mode = request.param
    if mode == "stdio":
        yield StdioTransport(sys.executable, args=[str(HOSTILE), "stdio"])
        return
    options = ("--json",) if mode == "http-json" else ()
    server = start_server("sse" if mode == "sse" else "http", *options, script=HOSTILE)
    try:
        if mode == "sse":
            yield SseTransport(f"{server.base_url}/sse")
        else:
            yield StreamableHttpTransport(f"{server.base_url}/mcp")
    finally:
        stop_server(server)


@pytest.mark.parametrize("size", [2 * 1000 * 1000, 15 * 1000 * 1000], ids=["2MB", "15MB"])
async def test_a_large_result_is_delivered_on_every_transport(
    hostile: Transport, size: int
) -> None:
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(hostile, request_timeout=30) as client:
            result = await client.tools_call("big", {"size": size})
            assert result.text == "x" * size
    assert not [e for e in logs if e["event"] == "mcp.connection.lost"]


@pytest.mark.parametrize("tool", ["big", "big_id_last"])
async def test_a_result_over_the_limit_fails_only_its_call(hostile: Transport, tool: str) -> None:
    """Also when the id comes last (TypeScript servers' order), so the message's head does
    not name the request (it waited for its whole timeout over stdio and legacy SSE)."""
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(hostile, request_timeout=30) as client:
            before = await client.tools_call("runs", {})
            started = trio.current_time()
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call(tool, {"size": 17 * MIB})
            assert trio.current_time() - started < 20  # not the request timeout
            assert caught.value.code == -32051
            assert "limit of 16777216 bytes" in str(caught.value)
            assert "(max_message_bytes=...)" in str(caught.value)
            # The session goes on, and the call was not sent again.
            assert (await client.tools_call("echo", {"a": 1})).text == '{"a": 1}'
            after = await client.tools_call("runs", {})
            assert _runs(after.text)[tool] == _runs(before.text).get(tool, 0) + 1
            assert client.state.status == "connected"
    assert not [e for e in logs if e["event"] in ("mcp.connection.lost", "mcp.request.replayed")]


PAUSE = 2.5


async def test_an_unfinished_answer_over_the_limit_with_its_id_last_fails_at_once(
    hostile: Transport,
) -> None:
    """The id comes last and the answer stops half-way (for ``PAUSE`` seconds here; 200 MB
    without a newline never end): the call fails as soon as the answer goes over the limit,
    before the server has sent what names the request, since it is the one call waiting; and
    once the answer ends the session goes on, nothing answered twice or sent again. (Over
    stdio and legacy SSE it waited for the answer's end, or its whole timeout.)"""
    small = attrs.evolve(hostile, max_message_bytes=MIB)  # type: ignore[misc]
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(small, request_timeout=30) as client:
            started = trio.current_time()
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call("slow_id_last", {"size": 2 * MIB, "pause": PAUSE})
            assert trio.current_time() - started < PAUSE  # before the id was sent
            assert caught.value.code == -32051
            assert f"limit of {MIB} bytes" in str(caught.value)
            assert (await client.tools_call("echo", {"c": 3})).text == '{"c": 3}'
            assert _runs((await client.tools_call("runs", {})).text)["slow_id_last"] == 1
            assert client.state.status == "connected"
            assert client.state.session == 1
    assert not [e for e in logs if e["event"] in ("mcp.connection.lost", "mcp.request.replayed")]


def _runs(text: str) -> dict[str, int]:
    import json

    return dict(json.loads(text.replace("'", '"')))


# The table in docs/mcp.md ("Hostile answers"): the same outcome on every transport.
DELIVERED = [
    ("surrogate", {}, "half \ud83d"),
    ("bad_utf8", {}, "bad \ufffd byte"),
]
REFUSED = [
    ("deep", {"depth": 10_000}, "nested too deeply"),
    ("envelope", {}, "cannot read"),
]


@pytest.mark.parametrize(("tool", "arguments", "text"), DELIVERED, ids=[t[0] for t in DELIVERED])
async def test_a_readable_oddity_reaches_the_caller_alike(
    hostile: Transport, tool: str, arguments: dict[str, object], text: str
) -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(hostile, request_timeout=30) as client:
            assert (await client.tools_call(tool, arguments)).text == text


async def test_a_result_nested_200_deep_is_delivered(hostile: Transport) -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(hostile, request_timeout=30) as client:
            result = await client.tools_call("deep", {"depth": 200})
            value = result.structured["a"]  # type: ignore[index]
            depth = 0
            while value != []:
                value, depth = value[0], depth + 1
            assert depth == 199


@pytest.mark.parametrize(("tool", "arguments", "reason"), REFUSED, ids=[t[0] for t in REFUSED])
async def test_an_unreadable_answer_fails_its_call_at_once_alike(
    hostile: Transport, tool: str, arguments: dict[str, object], reason: str
) -> None:
    with trio.fail_after(GUARD):
        async with McpClient.connect(hostile, request_timeout=30) as client:
            started = trio.current_time()
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call(tool, arguments)
            assert trio.current_time() - started < 10  # not the request timeout
            assert caught.value.code == -32052
            assert reason in str(caught.value)
            assert (await client.tools_call("echo", {"b": 2})).text == '{"b": 2}'
