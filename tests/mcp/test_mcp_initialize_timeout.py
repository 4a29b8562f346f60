"""``initialize`` is bounded by the connect timeout (issue 23, item 10): a server that never
answers it, answers with garbage, or accepts an HTTP connection and never replies fails the
attempt with an ``McpError`` naming the server and what it did, and recovery retries it on
its backoff schedule. Virtual time throughout (``autojump_clock``)."""

from __future__ import annotations

import functools
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import pytest
import structlog.testing
import trio
import trio.testing
from mcp_test_server import build_server
from test_mcp_recovery import FlakyTransport

import kova
from kova.mcp import McpClient, ReconnectPolicy, StreamableHttpTransport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

GUARD = 3600
NO_JITTER = ReconnectPolicy(initial=1.0, factor=2.0, maximum=8.0, jitter=0)


@asynccontextmanager
async def mute_streams(*, garbage: bool) -> AsyncIterator[Any]:
    """A server that takes the connection and then answers nothing; with ``garbage``, it
    answers every message with something that is not JSON-RPC (as the stdio transport
    reports a line it cannot parse)."""
    to_client, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_client = anyio.create_memory_object_stream[Any](0)

    async def swallow() -> None:
        async for _ in from_client:
            if garbage:
                await to_client.send(ValueError("Invalid JSON: expected value at line 1"))

    async with to_client, read_stream, write_stream, from_client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(swallow)
            try:
                yield read_stream, write_stream
            finally:
                nursery.cancel_scope.cancel()


@attrs.frozen
class MuteTransport:
    garbage: bool = False

    def open(self) -> Any:
        return mute_streams(garbage=self.garbage)


@attrs.define(eq=False)
class SometimesMute(FlakyTransport):
    """The in-process server, killable (``FlakyTransport``); while ``mute``, a connection
    is taken and ``initialize`` never answered."""

    mute: bool = False

    def open(self) -> Any:
        return mute_streams(garbage=False) if self.mute else super().open()


@pytest.mark.parametrize(
    ("garbage", "what"),
    [(False, "it sent nothing"), (True, "1 message that is not JSON-RPC (the first: ValueError")],
    ids=["silent", "garbage"],
)
async def test_a_server_that_does_not_answer_initialize_fails_connect(
    autojump_clock: trio.testing.MockClock, garbage: bool, what: str
) -> None:
    start = trio.current_time()
    with trio.fail_after(GUARD), pytest.raises(kova.McpError) as caught:
        async with McpClient.connect(
            MuteTransport(garbage=garbage), name="mute", connect_timeout=5
        ):
            pytest.fail("connected to a server that never answered initialize")
    assert trio.current_time() - start == 5  # not retried: the server answered, badly
    message = str(caught.value)
    assert "MCP server 'mute' did not complete initialize within 5s (connect_timeout)" in message
    assert what in message


async def test_an_http_server_that_accepts_and_never_replies_fails_connect(
    autojump_clock: trio.testing.MockClock,
) -> None:
    held: list[trio.SocketStream] = []

    async def hold(stream: trio.SocketStream) -> None:
        held.append(stream)
        await trio.sleep_forever()

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, hold, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            url = f"http://127.0.0.1:{port}/mcp"
            start = trio.current_time()
            with pytest.raises(kova.McpError, match="did not complete initialize within 2s"):
                async with McpClient.connect(StreamableHttpTransport(url), connect_timeout=2):
                    pass
            assert trio.current_time() - start == 2
            nursery.cancel_scope.cancel()


async def test_recovery_retries_a_mute_server_on_its_backoff_schedule(
    autojump_clock: trio.testing.MockClock,
) -> None:
    transport = SometimesMute(build_server())
    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with McpClient.connect(
            transport, name="flaky", reconnect=NO_JITTER, connect_timeout=5
        ) as client:
            assert (await client.tools_call("echo", {"text": "up"})).text == "up"
            transport.mute = True  # comes back, takes connections, never answers initialize
            transport.kill()
            start = trio.current_time()
            state = await client.wait_for_state("unavailable")
            assert trio.current_time() - start == 5  # the first attempt timed out
            with pytest.raises(kova.McpUnavailableError, match="did not complete initialize"):
                await client.tools_call("echo", {"text": "down"})
            await trio.sleep(6)  # attempts at 0 (-> 5) and 6 (-> 11) failed
            transport.mute = False
            state = await client.wait_for_state("connected")
            assert trio.current_time() - start == 13  # the third attempt, after 11 s + 2 s
            assert state.session == 2
            assert (await client.tools_call("echo", {"text": "back"})).text == "back"
    retries = [entry["retry_in"] for entry in logs if entry["event"] == "mcp.reconnect.failed"]
    assert retries == [1, 2]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
async def test_connect_timeout_must_be_positive(bad: Any) -> None:
    with pytest.raises(kova.ConfigError, match="connect_timeout must be a"):
        async with McpClient.connect(MuteTransport(), connect_timeout=bad):
            pytest.fail("connected with a bad connect_timeout")


@pytest.mark.parametrize("bad", ["5", True])
async def test_connect_timeout_must_be_a_number(bad: Any) -> None:
    with pytest.raises(TypeError, match="connect_timeout must be a number of seconds"):
        async with McpClient.connect(MuteTransport(), connect_timeout=bad):
            pytest.fail("connected with a bad connect_timeout")
