"""McpClient over real transports: stdio child processes, Streamable HTTP (SSE and JSON
responses), legacy HTTP+SSE, bearer tokens and server-ended sessions.

These talk to real processes, so they run on the real clock; ``fail_after`` only guards
against hangs.
"""

from __future__ import annotations

import sys

import attrs
import httpx2
import psutil
import pytest
import trio
from mcp_fixtures import SERVER, RunningServer, start_server, stop_server

import kova
from kova.mcp import (
    McpClient,
    SseTransport,
    StdioTransport,
    StreamableHttpTransport,
    TokenProvider,
)

GUARD = 60  # seconds; a hang guard, never reached when things work

STDIO = StdioTransport(sys.executable, args=[str(SERVER), "stdio"])


def _children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_stdio_tools_and_child_reaped_on_exit():
    with trio.fail_after(GUARD):
        async with McpClient.connect(STDIO) as client:
            assert "echo" in {tool.name for tool in await client.tools_list()}
            assert (await client.tools_call("echo", {"text": "over stdio"})).text == "over stdio"
            pid = int((await client.tools_call("pid")).text)
            assert pid in _children()
    assert not _alive(pid)


async def test_stdio_child_reaped_when_the_host_is_cancelled():
    with trio.fail_after(GUARD):
        pid = 0
        with trio.CancelScope() as scope:
            async with McpClient.connect(STDIO) as client:
                pid = int((await client.tools_call("pid")).text)
                scope.cancel()
                await trio.sleep_forever()
    assert pid
    assert not _alive(pid)


@pytest.mark.parametrize("fixture", ["http_server", "json_http_server"])
async def test_streamable_http_tools(fixture, request):
    server: RunningServer = request.getfixturevalue(fixture)
    transport = StreamableHttpTransport(f"{server.base_url}/mcp")
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.server_info()).name == "kova-test-server"
            assert (await client.tools_call("add", {"a": 1, "b": 2})).text == "3"
            picture = await client.tools_call("picture")
            assert isinstance(picture.content, tuple)
            assert picture.content[1] == kova.Image(
                media_type="image/png", data=picture.content[1].data
            )
            failed = await client.tools_call("fail", {"reason": "nope"})
            assert failed.is_error
            with pytest.raises(kova.McpError):
                await client.tools_call("protocol_error")
            # Half an emoji in the arguments goes out as U+FFFD (before: the package's HTTP
            # writer failed on it and the connection was lost, the call "may have run").
            assert (await client.tools_call("echo", {"text": "half \ud83d"})).text == "half \ufffd"
            assert client.state.session == 1


async def test_legacy_sse_transport(sse_server):
    transport = SseTransport(f"{sse_server.base_url}/sse")
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert "add" in {tool.name for tool in await client.tools_list()}
            assert (await client.tools_call("add", {"a": 20, "b": 22})).text == "42"
            greeting = await client.resources_read("kova://greeting")
            assert greeting[0].text == "hello from the server"


@attrs.define
class RotatingTokens:
    """Hands out a stale token first; ``refresh`` returns the current one."""

    current: str
    stale: str = "stale-token"
    refreshes: int = 0
    served_stale: bool = False

    async def token(self) -> str:
        await trio.lowlevel.checkpoint()
        if not self.served_stale:
            self.served_stale = True
            return self.stale
        return self.current

    async def refresh(self) -> str:
        await trio.lowlevel.checkpoint()
        self.refreshes += 1
        return self.current


async def _stats(server: RunningServer) -> dict[str, int]:
    async with httpx2.AsyncClient() as http:
        response = await http.get(f"{server.base_url}/control/stats")
    stats: dict[str, int] = response.json()
    return stats


async def test_bearer_token_refreshed_once_after_401(token_server):
    tokens = RotatingTokens(current="fresh-token")
    assert isinstance(tokens, TokenProvider)
    before = await _stats(token_server)
    transport = StreamableHttpTransport(f"{token_server.base_url}/mcp", auth=tokens)
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.tools_call("echo", {"text": "authorized"})).text == "authorized"
    after = await _stats(token_server)
    assert tokens.refreshes == 1
    assert after["unauthorized"] - before["unauthorized"] == 1


async def test_bearer_token_rejected_twice_fails_connect(token_server):
    tokens = RotatingTokens(current="also-wrong")
    transport = StreamableHttpTransport(f"{token_server.base_url}/mcp", auth=tokens)
    with trio.fail_after(GUARD), pytest.raises(kova.McpError) as caught:
        async with McpClient.connect(transport):
            raise AssertionError("connected with a rejected token")
    assert tokens.refreshes == 1
    # Issue 44, item 5: it said "JSON-RPC error -32603" and nothing about the 401.
    assert "HTTP 401" in str(caught.value)
    assert "refused the credentials" in str(caught.value)
    assert "-32603" not in str(caught.value)


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_token_refused_twice_mid_session_names_the_401(kind):
    """A token that stops working during a session: the call fails naming the 401 (the
    session is healthy; nothing is replayed as if the connection were lost)."""
    server = start_server(kind, "--token", "fresh-token")
    try:
        await _refused_mid_session(kind, server)
    finally:
        stop_server(server)


async def _refused_mid_session(kind: str, server: RunningServer) -> None:
    tokens = RotatingTokens(current="fresh-token", stale="fresh-token")
    transport = (
        StreamableHttpTransport(f"{server.base_url}/mcp", auth=tokens)
        if kind == "http"
        else SseTransport(f"{server.base_url}/sse", auth=tokens)
    )
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            tokens.current = "revoked"
            tokens.served_stale = True
            with pytest.raises(kova.McpError) as caught:
                await client.tools_call("echo", {"text": "x"})
            assert "HTTP 401" in str(caught.value), str(caught.value)


async def test_legacy_sse_with_a_refreshed_token(sse_token_server):
    tokens = RotatingTokens(current="fresh-token")
    transport = SseTransport(f"{sse_token_server.base_url}/sse", auth=tokens)
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.tools_call("echo", {"text": "sse+token"})).text == "sse+token"
    assert tokens.refreshes == 1
    assert (await _stats(sse_token_server))["unauthorized"] == 1


async def test_static_headers_are_sent(token_server):
    transport = StreamableHttpTransport(
        f"{token_server.base_url}/mcp", headers={"Authorization": "Bearer fresh-token"}
    )
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.tools_call("echo", {"text": "static"})).text == "static"


async def test_session_ended_by_the_server_is_reinitialized(fresh_http_server):
    transport = StreamableHttpTransport(f"{fresh_http_server.base_url}/mcp")
    with trio.fail_after(GUARD):
        async with McpClient.connect(transport) as client:
            assert (await client.tools_call("echo", {"text": "one"})).text == "one"
            async with httpx2.AsyncClient() as http:
                await http.post(f"{fresh_http_server.base_url}/control/forget")
            # The server now answers 404 for the session: the actor re-initializes and the
            # call is retried once on the new session.
            assert (await client.tools_call("echo", {"text": "two"})).text == "two"
            assert (await client.tools_call("echo", {"text": "three"})).text == "three"
    assert (await _stats(fresh_http_server))["sessions"] == 2


async def test_connect_retries_once_then_reports_connection_error():
    # Nothing listens on this port (we bound it and closed it).
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
    start = trio.current_time()
    with trio.fail_after(GUARD), pytest.raises(kova.KovaConnectionError):
        async with McpClient.connect(transport):
            raise AssertionError("connected to nothing")
    assert trio.current_time() - start >= 0.5  # the one retry, 500 ms later


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: StdioTransport(5), TypeError, "command must be a non-empty str"),
        (lambda: StdioTransport("npx", env={"A": 1}), TypeError, "env must map str to str"),
        (lambda: StdioTransport("npx", cwd=5), TypeError, "cwd must be a path"),
        (lambda: StreamableHttpTransport(5), TypeError, "url must be a str"),
        (lambda: StreamableHttpTransport("ftp://x/mcp"), ValueError, "url must be an http"),
        (lambda: SseTransport("localhost:8080/sse"), ValueError, "url must be an http"),
        (lambda: StreamableHttpTransport("http://x", headers={"a": 1}), TypeError, "headers"),
        (lambda: StreamableHttpTransport("http://x", headers={"a": "b\nc"}), ValueError, "break"),
        (lambda: StreamableHttpTransport("http://x", auth="token"), TypeError, "TokenProvider"),
        (lambda: SseTransport("http://x", http_auth=5), TypeError, "httpx2.Auth"),
        (lambda: StreamableHttpTransport("http://x", timeout="30"), TypeError, "number of seconds"),
        (lambda: SseTransport("http://x", sse_read_timeout=0), ValueError, "must be a positive"),
    ],
)
def test_a_transport_value_of_the_wrong_type_fails_where_it_is_built(build, error, match):
    # Before, each was accepted and failed at connect() as "cannot connect to the MCP server"
    # wrapping a TypeError or AttributeError from deep inside the package (or, for a str
    # auth, "'str' object has no attribute 'token'").
    with pytest.raises(error, match=match):
        build()


def test_a_reconnect_policy_of_the_wrong_type_names_the_field():
    # Before: "'<' not supported between instances of 'str' and 'int'".
    from kova.mcp import ReconnectPolicy

    with pytest.raises(TypeError, match=r"ReconnectPolicy\.initial must be a number, got '1'"):
        ReconnectPolicy(initial="1")
    with pytest.raises(TypeError, match="max_attempts must be a number"):
        ReconnectPolicy(max_attempts=True)
    assert ReconnectPolicy(give_up_after=60).give_up_after == 60
