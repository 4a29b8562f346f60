"""Transports: how the connection actor reaches an MCP server.

A transport is a plain value the host constructs and passes to :meth:`McpClient.connect`.
The connection actor calls :meth:`Transport.open` every time it (re)connects, inside its own
task, and speaks MCP over the streams it yields; so the protocol's next transport is one
more class with an ``open`` method, not a change to the client.

The JSON-RPC framing, the stdio child process handling and the Streamable HTTP session
rules (``Mcp-Session-Id``, JSON or SSE responses, the resumable GET stream) are the ``mcp``
package's; these classes only configure it.
"""

from __future__ import annotations

import sys
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ._auth import McpHttpAuth, TokenProvider

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from pathlib import Path

    from mcp.server import Server
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "InProcessTransport",
    "SseTransport",
    "StdioTransport",
    "StreamableHttpTransport",
    "Transport",
]


@runtime_checkable
class Transport(Protocol):
    """How to reach one MCP server.

    :meth:`open` returns an async context manager yielding the ``mcp`` package's pair of
    message streams (an ``mcp.client.Transport``). It is entered and left in one task, the
    connection actor's, once per connection; leaving it must release everything (reap the
    child process, close HTTP connections), also when the task is cancelled.
    """

    def open(self) -> AbstractAsyncContextManager[Any]:
        """Open one connection to the server."""
        ...


def _str_tuple(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("args must be a sequence of strings, not one string")
    return tuple(str(item) for item in value)  # type: ignore[attr-defined]


def _str_mapping(value: Mapping[str, str] | None) -> Mapping[str, str] | None:
    return None if value is None else dict(value)


def _headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return {} if value is None else dict(value)


@attrs.frozen
class StdioTransport:
    """Start the server as a child process and talk to it over its stdin and stdout.

    The child runs in its own process group. When the connection closes (or the actor is
    cancelled) its stdin is closed, it gets a short grace period to exit, and then the
    whole process tree is terminated and reaped.

    Args:
        command: the executable, e.g. ``"npx"`` or ``sys.executable``.
        args: its arguments.
        env: extra environment variables. The child does *not* inherit the whole
            environment, only a safe subset (``HOME``, ``PATH``, ``USER``, ...) plus these.
        cwd: the working directory of the child.
    """

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, kw_only=True)
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_str_mapping, kw_only=True)
    cwd: str | Path | None = attrs.field(default=None, kw_only=True)

    def open(self) -> AbstractAsyncContextManager[Any]:
        parameters = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=None if self.env is None else dict(self.env),
            cwd=self.cwd,
        )
        # The child's stderr goes where ours goes (looked up now, so a host that redirects
        # sys.stderr later still gets it).
        return stdio_client(parameters, errlog=sys.stderr)


@attrs.frozen
class StreamableHttpTransport:
    """The Streamable HTTP transport (MCP 2025-03-26 and later).

    The ``mcp`` package runs the ``initialize`` handshake, tracks ``Mcp-Session-Id`` and
    reads JSON or SSE responses. kova adds bearer authentication (see
    :class:`TokenProvider`) and treats a ``404`` for a known session as the server ending
    the session: the connection actor restarts and initializes a new one.

    Args:
        url: the MCP endpoint, e.g. ``"https://mcp.example.com/mcp"``.
        headers: static headers sent with every request.
        auth: supplies a bearer token for every request; refreshed once on ``401``.
        http_auth: instead of ``auth``, any ``httpx2.Auth`` the host wants to run, e.g. the
            ``mcp`` package's ``OAuthClientProvider`` for a full OAuth flow.
        timeout: connect, write and pool timeout in seconds.
        sse_read_timeout: how long an open SSE stream may stay silent, in seconds.
    """

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, kw_only=True)
    auth: TokenProvider | None = attrs.field(default=None, kw_only=True)
    http_auth: httpx2.Auth | None = attrs.field(default=None, kw_only=True)
    timeout: float = attrs.field(default=30.0, kw_only=True)
    sse_read_timeout: float = attrs.field(default=300.0, kw_only=True)

    def open(self) -> AbstractAsyncContextManager[Any]:
        return _open_streamable_http(self)


@asynccontextmanager
async def _open_streamable_http(transport: StreamableHttpTransport) -> AsyncIterator[Any]:
    client = httpx2.AsyncClient(
        headers=dict(transport.headers),
        timeout=httpx2.Timeout(transport.timeout, read=transport.sse_read_timeout),
        auth=McpHttpAuth(transport.auth, detect_session_end=True, inner=transport.http_auth),
    )
    async with client, streamable_http_client(transport.url, http_client=client) as streams:
        yield streams


@attrs.frozen
class SseTransport:
    """The legacy HTTP+SSE transport (MCP 2024-11-05): a GET event stream for server
    messages and POSTs to the endpoint the server announces on it.

    Args:
        url: the SSE endpoint, e.g. ``"http://localhost:8080/sse"``.
        headers: static headers sent with every request.
        auth: supplies a bearer token for every request; refreshed once on ``401``.
        http_auth: instead of ``auth``, any ``httpx2.Auth`` the host wants to run.
        timeout: timeout of the POSTs in seconds.
        sse_read_timeout: how long the event stream may stay silent, in seconds.
    """

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict, converter=_headers, kw_only=True)
    auth: TokenProvider | None = attrs.field(default=None, kw_only=True)
    http_auth: httpx2.Auth | None = attrs.field(default=None, kw_only=True)
    timeout: float = attrs.field(default=30.0, kw_only=True)
    sse_read_timeout: float = attrs.field(default=300.0, kw_only=True)

    def open(self) -> AbstractAsyncContextManager[Any]:
        return sse_client(
            self.url,
            headers=dict(self.headers),
            timeout=self.timeout,
            sse_read_timeout=self.sse_read_timeout,
            auth=McpHttpAuth(self.auth, detect_session_end=False, inner=self.http_auth),
        )


@attrs.frozen
class InProcessTransport:
    """Run an ``mcp`` server in this process, connected through memory streams.

    Meant for tests (of kova and of hosts): no process, no socket, so it also runs on
    ``trio.testing.MockClock``. The server runs in the connection actor's task group.

    Args:
        server: an ``mcp.server.mcpserver.MCPServer`` or low-level ``mcp.server.Server``.
    """

    server: MCPServer[Any] | Server[Any]

    def open(self) -> AbstractAsyncContextManager[Any]:
        # The mcp package's own in-memory transport (it is not re-exported publicly).
        from mcp.client._memory import InMemoryTransport

        return InMemoryTransport(self.server)
