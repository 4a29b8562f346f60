"""Bearer-token authentication for the HTTP transports.

kova keeps no OAuth state: the host owns the flow and the token store, and hands kova a
:class:`TokenProvider`. The HTTP transports attach ``Authorization: Bearer <token>`` to every
request; when the server answers ``401``, they call :meth:`TokenProvider.refresh` once and
send the request again. A second ``401`` fails that request (with :class:`~kova.McpError`).

The mechanism is an ``httpx2.Auth`` flow, the seam httpx2 provides for exactly this: it sees
every request the ``mcp`` transports send (POSTs, the server-to-client GET stream, the
session ``DELETE``), so no request can slip out without the token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import httpx2

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

__all__ = ["TokenProvider"]

MCP_SESSION_ID_HEADER = "mcp-session-id"


@runtime_checkable
class TokenProvider(Protocol):
    """Supplies the bearer token for an HTTP MCP server.

    Both methods may be called from any task, concurrently; an implementation that refreshes
    over the network should make concurrent refreshes share one round trip.
    """

    async def token(self) -> str:
        """The current bearer token (without the ``Bearer`` prefix)."""
        ...

    async def refresh(self) -> str:
        """Obtain (and persist) a fresh token after the server rejected the current one."""
        ...


class McpHttpAuth(httpx2.Auth):
    """The ``httpx2.Auth`` flow of kova's HTTP transports.

    Args:
        tokens: where bearer tokens come from; ``None`` sends no ``Authorization`` header.
        inner: a host's own ``httpx2.Auth`` (say, the ``mcp`` package's
            ``OAuthClientProvider`` running a full OAuth flow) used instead of ``tokens``.
    """

    def __init__(
        self,
        tokens: TokenProvider | None,
        *,
        inner: httpx2.Auth | None = None,
    ) -> None:
        if tokens is not None and inner is not None:
            raise ValueError("give a TokenProvider or an httpx2.Auth, not both")
        self._tokens = tokens
        self._inner = inner

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._inner is not None:
            # Drive the host's flow.
            flow = self._inner.async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    try:
                        outgoing = await flow.asend(response)
                    except StopAsyncIteration:
                        return
            finally:
                await flow.aclose()
        if self._tokens is not None:
            request.headers["Authorization"] = f"Bearer {await self._tokens.token()}"
        response = yield request
        if response.status_code == 401 and self._tokens is not None:
            # One refresh and one retry: a server that rejects a token it was just handed
            # will not accept it on a third try either.
            request.headers["Authorization"] = f"Bearer {await self._tokens.refresh()}"
            response = yield request
            # A second 401 is left to the ``mcp`` transport, which fails that one request with
            # a JSON-RPC error: the connection itself is healthy and must not be torn down.
