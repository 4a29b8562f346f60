"""McpClient: the handle hosts and agents use to talk to one MCP server."""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._errors import (
    ActorFailed,
    KovaConnectionError,
    KovaError,
    KovaTimeoutError,
    MailboxClosed,
)
from .._log import get_logger
from ..actors import Runtime, Supervisor, open_supervisor
from ._connection import (
    CallTool,
    ConnectionSettings,
    GetPrompt,
    GetServerInfo,
    ListPrompts,
    ListResources,
    ListResourceTemplates,
    ListTools,
    McpConnection,
    Message,
    ReadResource,
    Reconnect,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from .._models import JSONObject, ToolDefinition, ToolResult
    from ..actors import Actor, ActorRef
    from ..providers import Provider
    from ._transports import Transport
    from ._types import (
        ElicitationHandler,
        McpPrompt,
        McpPromptResult,
        McpResource,
        McpResourceContents,
        McpResourceTemplate,
        McpServerInfo,
    )

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "McpClient"]

log = get_logger(__name__)

DEFAULT_REQUEST_TIMEOUT = 60.0
"""Seconds one MCP request may take unless the call says otherwise."""


def _sole_kova_error(group: BaseExceptionGroup[BaseException]) -> KovaError | None:
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        else:
            leaves.append(current)
    if len(leaves) == 1 and isinstance(leaves[0], KovaError):
        return leaves[0]
    return None


class McpClient:
    """A connection to one MCP server, served by a supervised connection actor.

    Create it with :meth:`connect`; it is usable inside that ``async with`` block, from any
    number of tasks at once. Every request has a timeout (:data:`DEFAULT_REQUEST_TIMEOUT`
    unless ``connect(request_timeout=...)`` or the call says otherwise).

    Recovery, as specified for kova's MCP client:

    * a request whose connection broke (the server process died, the socket dropped, the
      server ended the HTTP session) is sent once more after the supervisor restarted the
      actor, which reconnects and re-runs ``initialize``; a second failure raises
      :class:`~kova.KovaConnectionError`;
    * a JSON-RPC error from the server raises :class:`~kova.McpError` and is never retried;
    * :meth:`tools_list` is cached until :meth:`reconnect`, a restart, or a
      ``notifications/tools/list_changed`` from the server.
    """

    def __init__(self, ref: ActorRef, *, request_timeout: float) -> None:
        self._ref = ref
        self._request_timeout = request_timeout

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        transport: Transport,
        *,
        runtime: Runtime | Supervisor | None = None,
        name: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        sampling: Provider | None = None,
        sampling_model: str | None = None,
        elicitation: ElicitationHandler | None = None,
    ) -> AsyncIterator[McpClient]:
        """``async with McpClient.connect(transport) as client:`` connect to a server.

        Starts the connection actor (under ``runtime``, or under a supervisor of its own
        when none is given), which opens the transport and runs the ``initialize``
        handshake. A transient failure (refused, reset, timed out) is retried once after
        0.5 s. Leaving the block stops the actor, which closes the session and reaps a stdio
        child, also on cancellation.

        Args:
            transport: how to reach the server (:class:`StdioTransport`,
                :class:`StreamableHttpTransport`, :class:`SseTransport`, ...).
            runtime: the kova runtime (or a supervisor) to run the connection actor under;
                by default the client opens a supervisor of its own (restart intensity: 3
                restarts in 5 s). A server that keeps failing beyond the intensity makes
                that supervisor give up, as any other child would.
            name: the actor's name (for logs); unique within ``runtime``.
            request_timeout: the default timeout of one request, in seconds.
            sampling: a provider that answers the server's ``sampling/createMessage``
                requests. Off (the server is told sampling is unsupported) unless given.
            sampling_model: the model to ask for when sampling (the provider's default
                otherwise).
            elicitation: a host function that answers the server's ``elicitation/create``
                requests (asks the user). Off unless given.

        Raises:
            KovaConnectionError: the server could not be reached (after the one retry).
            McpError: the server rejected ``initialize``.
        """
        settings = ConnectionSettings(
            transport=transport,
            sampling=sampling,
            sampling_model=sampling_model,
            elicitation=elicitation,
        )

        def mcp_connection() -> Actor:
            return McpConnection(settings)

        connected = False
        try:
            async with AsyncExitStack() as stack:
                supervisor: Supervisor
                if runtime is None:
                    supervisor = await stack.enter_async_context(open_supervisor(name="mcp"))
                elif isinstance(runtime, Runtime):
                    supervisor = runtime.supervisor
                else:
                    supervisor = runtime
                ref = await supervisor.spawn(mcp_connection, name=name, restart="permanent")
                connected = True
                try:
                    yield cls(ref, request_timeout=request_timeout)
                finally:
                    with trio.CancelScope(shield=True):
                        await supervisor.stop_child(ref)
        except BaseExceptionGroup as group:
            # A failed connection attempt travels out through the actor's and the
            # supervisor's nurseries; the caller gets the one error it is about.
            error = None if connected else _sole_kova_error(group)
            if error is None:
                raise
            raise error from None

    @property
    def name(self) -> str:
        """The connection actor's name."""
        return self._ref.name

    async def _call(self, message: Message, *, time_limit: float | None = None) -> Any:
        """Send ``message`` to the connection actor: one retry after a broken connection,
        and the request timeout around both attempts."""
        limit = self._request_timeout if time_limit is None else time_limit
        with trio.move_on_after(limit):
            for attempt in (1, 2):
                try:
                    return await self._ref.call(message)
                except (ActorFailed, MailboxClosed) as exc:
                    if attempt == 2:
                        raise KovaConnectionError(
                            f"the MCP connection {self.name!r} failed twice: {exc}"
                        ) from exc
                    log.info(
                        "mcp.request.retried",
                        connection=self.name,
                        request=type(message).__name__,
                        error=repr(exc.__cause__ or exc),
                    )
        raise KovaTimeoutError(
            f"MCP request {type(message).__name__} to {self.name!r} timed out after {limit:g}s",
            timeout=limit,
        )

    # -- tools ----------------------------------------------------------------------------

    async def tools_list(self) -> tuple[ToolDefinition, ...]:
        """The server's tools (every page), cached until reconnect or ``list_changed``.

        Raises:
            McpError: the server answered with a JSON-RPC error.
            KovaConnectionError: the connection broke twice.
            KovaTimeoutError: the request timeout expired.
        """
        result: tuple[ToolDefinition, ...] = await self._call(ListTools())
        return result

    async def tools_call(self, name: str, arguments: JSONObject | None = None) -> ToolResult:
        """Call a tool with the default request timeout.

        Returns:
            The result: text, images and embedded resources converted; ``is_error`` is the
            server's ``isError`` (a tool failure the model should see).

        Raises:
            McpError: the server answered with a JSON-RPC error (e.g. an unknown tool).
            KovaConnectionError: the connection broke twice.
            KovaTimeoutError: the request timeout expired.

        Cancelling the caller cancels the request (the server is sent
        ``notifications/cancelled``) before this returns.
        """
        result: ToolResult = await self._call(CallTool(name=name, arguments=arguments or {}))
        return result

    async def tools_call_with_timeout(
        self,
        name: str,
        arguments: JSONObject | None,
        timeout: float,  # noqa: ASYNC109 - the seed's API: a per-call override
    ) -> ToolResult:
        """:meth:`tools_call` with its own timeout (seconds) instead of the default."""
        result: ToolResult = await self._call(
            CallTool(name=name, arguments=arguments or {}), time_limit=timeout
        )
        return result

    # -- resources and prompts ------------------------------------------------------------

    async def resources_list(self) -> tuple[McpResource, ...]:
        """The server's resources (every page)."""
        result: tuple[McpResource, ...] = await self._call(ListResources())
        return result

    async def resource_templates_list(self) -> tuple[McpResourceTemplate, ...]:
        """The server's resource templates (every page)."""
        result: tuple[McpResourceTemplate, ...] = await self._call(ListResourceTemplates())
        return result

    async def resources_read(self, uri: str) -> tuple[McpResourceContents, ...]:
        """Read one resource; a resource may have several contents."""
        result: tuple[McpResourceContents, ...] = await self._call(ReadResource(uri=uri))
        return result

    async def prompts_list(self) -> tuple[McpPrompt, ...]:
        """The server's prompt templates (every page)."""
        result: tuple[McpPrompt, ...] = await self._call(ListPrompts())
        return result

    async def prompts_get(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> McpPromptResult:
        """Render a prompt template into kova messages."""
        result: McpPromptResult = await self._call(
            GetPrompt(name=name, arguments=dict(arguments or {}))
        )
        return result

    # -- connection -----------------------------------------------------------------------

    async def server_info(self) -> McpServerInfo:
        """What the server said about itself in ``initialize`` (name, version,
        instructions for the model, the negotiated protocol version)."""
        result: McpServerInfo = await self._call(GetServerInfo())
        return result

    async def reconnect(self) -> None:
        """Close the connection and open a new one from the stored transport: a stdio child
        is respawned, ``initialize`` runs again and the tools cache is cleared. Requests in
        flight are sent again on the new connection.

        Raises:
            KovaConnectionError: the server could not be reached again.
        """
        await self._call(Reconnect())
        log.info("mcp.client.reconnected", connection=self.name)
