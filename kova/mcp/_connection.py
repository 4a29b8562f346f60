"""The MCP connection actor: one per server, owning the ``mcp`` client session.

The ``mcp`` package's context managers (transport, task groups, session) must be entered and
left in one task. That task is the actor's *session task*, a child of the nursery the actor
opens in :meth:`McpConnection.resources`; it enters the transport and the session, reports
the live connection, and waits until the connection is retired or lost. Requests are served
concurrently by the actor's handler tasks, which share the session (the ``mcp`` dispatcher
correlates concurrent requests by id).

How a connection ends decides what happens next:

* ``reconnect()`` retires the connection on purpose: the session task leaves its context
  managers (reaping a stdio child), a new session task connects and re-runs ``initialize``,
  and requests caught in between are sent again on the new connection.
* The transport breaks (the child exited, the socket dropped, the server ended the
  Streamable HTTP session with a ``404``): the actor crashes and its supervisor restarts it,
  which reconnects. Callers see :class:`~kova.ActorFailed` or
  :class:`~kova.MailboxClosed`, which :class:`~kova.mcp.McpClient` answers with exactly one
  retry.
* The server answers with a JSON-RPC error: that request fails with :class:`~kova.McpError`;
  the connection is fine and nothing is retried.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import attrs
import httpx2
import mcp_types as mt
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .._errors import KovaConnectionError, KovaError, McpError
from .._log import get_logger
from .._models import ChatRequest
from ..actors import Actor
from . import _convert
from ._auth import SessionExpired
from ._types import McpServerInfo

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping

    from mcp.client.context import ClientRequestContext

    from .._models import JSONObject, ToolDefinition, ToolResult
    from ..providers import Provider
    from ._transports import Transport
    from ._types import (
        ElicitationHandler,
        McpPrompt,
        McpPromptResult,
        McpResource,
        McpResourceContents,
        McpResourceTemplate,
    )

__all__ = ["ConnectionSettings", "McpConnection"]

log = get_logger(__name__)

_T = TypeVar("_T")


class _Paginated(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


_Page = TypeVar("_Page", bound=_Paginated)

CONNECT_RETRY_DELAY = 0.5
"""Seconds before the one retry of a connection attempt that failed transiently."""

_MAX_PAGES = 1000
"""A bound on ``*/list`` pagination, so a server whose cursors never end cannot hang us."""


def _is_local_close(error: MCPError) -> bool:
    """Whether the ``mcp`` package made this error up because the transport broke.

    It reports a transport that closed under a request as code -32000 with fixed messages
    ("Connection closed" from the dispatcher; "SSE stream ..." when a Streamable HTTP
    response stream was cut). -32000 is also the JSON-RPC "server error" range a server may
    use for its own errors, hence the message check.
    """
    return error.code == mt.CONNECTION_CLOSED and (
        error.message == "Connection closed" or error.message.startswith("SSE stream ")
    )


class ConnectionLost(Exception):
    """The transport broke under the actor; raised to crash it so its supervisor restarts it."""


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """Everything the connection actor needs to (re)connect. Immutable, shared by restarts."""

    transport: Transport
    sampling: Provider | None = None
    sampling_model: str | None = None
    elicitation: ElicitationHandler | None = None
    client_name: str = "kova"
    client_version: str = "0.1.0"


# ---------------------------------------------------------------------------------------------
# Messages (a closed set; dispatched with ``match``)


@attrs.frozen
class ListTools:
    pass


@attrs.frozen(kw_only=True)
class CallTool:
    name: str
    arguments: JSONObject


@attrs.frozen
class ListResources:
    pass


@attrs.frozen
class ListResourceTemplates:
    pass


@attrs.frozen(kw_only=True)
class ReadResource:
    uri: str


@attrs.frozen
class ListPrompts:
    pass


@attrs.frozen(kw_only=True)
class GetPrompt:
    name: str
    arguments: Mapping[str, str]


@attrs.frozen
class Reconnect:
    pass


@attrs.frozen
class GetServerInfo:
    pass


Message = (
    ListTools
    | CallTool
    | ListResources
    | ListResourceTemplates
    | ReadResource
    | ListPrompts
    | GetPrompt
    | Reconnect
    | GetServerInfo
)


# ---------------------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Session:
    """One live connection: the ``mcp`` client and how it ends."""

    client: Client
    number: int
    retire: trio.Event = attrs.field(factory=trio.Event)
    """Set to close this connection on purpose (reconnect, or the actor stopping)."""
    retired: bool = False
    lost: trio.Event = attrs.field(factory=trio.Event)
    """Set when the server closed the message stream."""
    closed: trio.Event = attrs.field(factory=trio.Event)
    """Set once the session task has left every context manager."""


def _is_transient(exc: BaseException) -> bool:
    """A connection failure that may go away if we try again (refused, reset, timed out)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_transient(inner) for inner in exc.exceptions)
    return isinstance(
        exc,
        OSError | httpx2.TransportError | anyio.BrokenResourceError | KovaConnectionError,
    )


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``exc`` is, or is a (nested) exception group holding, a ``kind``."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(inner, kind) for inner in exc.exceptions)
    return isinstance(exc, kind)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _connect_error(exc: Exception, transport: str) -> Exception:
    """The error ``connect()`` reports for a failed connection attempt."""
    for leaf in _leaves(exc):
        if isinstance(leaf, KovaError):
            return leaf
        if isinstance(leaf, MCPError):
            return McpError(f"MCP initialize failed: {leaf.message}", code=leaf.code)
    if _is_transient(exc):
        return KovaConnectionError(f"cannot connect to the MCP server ({transport}): {exc!r}")
    return McpError(f"cannot connect to the MCP server ({transport}): {exc!r}")


class McpConnection(Actor):
    """The connection actor. Build it through :meth:`McpClient.connect`; its messages are
    private to :mod:`kova.mcp`."""

    concurrent = True

    def __init__(self, settings: ConnectionSettings) -> None:
        self._settings = settings
        self._nursery: trio.Nursery | None = None
        self._session: _Session | None = None
        self._ready = trio.Event()
        self._sessions_opened = 0
        self._reconnecting = False
        self._tools: tuple[ToolDefinition, ...] | None = None
        self._tools_epoch = 0

    # -- lifetime -----------------------------------------------------------------------

    @asynccontextmanager
    async def _resources(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._open_session()
            try:
                yield
            finally:
                session = self._session
                if session is not None:
                    session.retired = True
                    session.retire.set()
                # The session task leaves its context managers (shielded inside the mcp
                # transports where it matters: a stdio child is always reaped).

    def resources(self) -> AbstractAsyncContextManager[None]:
        return self._resources()

    async def _open_session(self) -> None:
        assert self._nursery is not None
        self._session = await self._nursery.start(self._serve_session)
        self._ready.set()

    async def _serve_session(self, *, task_status: trio.TaskStatus[_Session]) -> None:
        """The session task: connect (retrying a transient failure once, after
        :data:`CONNECT_RETRY_DELAY`), report the session, then hold the ``mcp`` context
        managers open until the connection is retired or lost."""
        transport = type(self._settings.transport).__name__
        for attempt in (1, 2):
            session: _Session | None = None
            try:
                async with self._open_client() as (client, lost):
                    self._sessions_opened += 1
                    session = _Session(client=client, number=self._sessions_opened, lost=lost)
                    log.info(
                        "mcp.connection.opened",
                        transport=transport,
                        server=_server_name(client),
                        connection=session.number,
                    )
                    task_status.started(session)
                    await _first_of(session.retire.wait, lost.wait)
                    if not session.retire.is_set():
                        log.warning("mcp.connection.lost", connection=session.number)
                        raise ConnectionLost("the MCP server closed the connection")
                return
            except Exception as exc:
                if session is not None:
                    # The connection was up: whatever broke it crashes the actor.
                    if _contains(exc, SessionExpired):
                        raise ConnectionLost("the MCP server ended the session") from exc
                    raise
                if attempt == 2 or not _is_transient(exc):
                    error = _connect_error(exc, transport)
                    if any(error is leaf for leaf in _leaves(exc)):
                        raise error from None  # already the precise error, with its traceback
                    raise error from exc
                log.info(
                    "mcp.connection.failed",
                    transport=transport,
                    retry_in=CONNECT_RETRY_DELAY,
                    error=repr(exc),
                )
            finally:
                if session is not None:
                    session.closed.set()
                    log.info("mcp.connection.closed", connection=session.number)
            await trio.sleep(CONNECT_RETRY_DELAY)

    @asynccontextmanager
    async def _open_client(self) -> AsyncIterator[tuple[Client, trio.Event]]:
        """Open the transport and the ``mcp`` client on it (``initialize`` included).

        The transport's read stream is pumped through a stream of our own so we learn when
        the server closes it, even while no request is waiting.
        """
        settings = self._settings
        lost = trio.Event()

        @asynccontextmanager
        async def watched_transport() -> AsyncIterator[Any]:
            async with settings.transport.open() as (read_stream, write_stream):
                send, receive = anyio.create_memory_object_stream[Any](0)

                async def pump() -> None:
                    async with send:
                        try:
                            async for item in read_stream:
                                await send.send(item)
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            return  # the session side closed first: we are shutting down
                    lost.set()

                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(pump)
                    try:
                        yield receive, write_stream
                    finally:
                        task_group.cancel_scope.cancel()
                        receive.close()

        client = Client(
            watched_transport(),
            mode="legacy",
            cache=None,
            client_info=mt.Implementation(
                name=settings.client_name, version=settings.client_version
            ),
            sampling_callback=self._sample if settings.sampling is not None else None,
            elicitation_callback=self._elicit if settings.elicitation is not None else None,
            message_handler=self._on_message,
        )
        async with client:
            yield client, lost

    # -- server-initiated traffic (runs in the session's task group) ----------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools = None
            self._tools_epoch += 1
            log.debug("mcp.tools.invalidated", reason="list_changed")
        await trio.lowlevel.checkpoint()

    async def _sample(
        self, context: ClientRequestContext, params: mt.CreateMessageRequestParams
    ) -> mt.CreateMessageResult | mt.ErrorData:
        provider = self._settings.sampling
        assert provider is not None
        messages, config = _convert.sampling_request(params)
        if self._settings.sampling_model is not None:
            config = attrs.evolve(config, model=self._settings.sampling_model)
        try:
            async with provider.open():
                response = await provider.chat_completion(
                    ChatRequest(messages=messages, config=config)
                )
        except KovaError as exc:
            # The server asked; it gets a JSON-RPC error back and the connection carries on.
            log.warning("mcp.sampling.failed", provider=provider.name, error=repr(exc))
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message=f"sampling failed: {exc}")
        model = config.model or self._settings.sampling_model or provider.name
        log.info("mcp.sampling.answered", provider=provider.name, messages=len(messages))
        return _convert.sampling_result(response, model=model)

    async def _elicit(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        handler = self._settings.elicitation
        assert handler is not None
        request = _convert.elicitation_request(params)
        response = await handler(request)
        return _convert.elicitation_result(response, request)

    # -- requests -----------------------------------------------------------------------

    async def handle_call(self, message: Message) -> Any:
        match message:
            case ListTools():
                return await self._list_tools()
            case CallTool(name=name, arguments=arguments):
                return await self._request(lambda c: _call_tool(c, name, arguments))
            case ListResources():
                return await self._request(_list_resources)
            case ListResourceTemplates():
                return await self._request(_list_resource_templates)
            case ReadResource(uri=uri):
                return await self._request(lambda c: _read_resource(c, uri))
            case ListPrompts():
                return await self._request(_list_prompts)
            case GetPrompt(name=name, arguments=arguments):
                return await self._request(lambda c: _get_prompt(c, name, arguments))
            case Reconnect():
                await self._reconnect()
                return None
            case GetServerInfo():
                session = await self._current()
                return _server_info(session.client)
            case _:
                raise McpError(f"unknown request {message!r}")

    async def _current(self) -> _Session:
        await self._ready.wait()
        assert self._session is not None
        return self._session

    async def _request(self, operation: Callable[[Client], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the live session, mapping the ``mcp`` package's errors.

        A request caught by a deliberate reconnect is sent once more on the new connection;
        a transport that broke under it crashes the actor (the supervisor reconnects).
        """
        for attempt in range(2):
            session = await self._current()
            try:
                return await operation(session.client)
            except MCPError as exc:
                local_close = _is_local_close(exc) or (
                    exc.code == mt.CONNECTION_CLOSED and session.lost.is_set()
                )
                if not local_close:
                    raise McpError(exc.message, code=exc.code) from exc
                if session.retired and attempt == 0:
                    continue  # we closed it ourselves (reconnect): use the new connection
                raise ConnectionLost("the MCP connection closed during a request") from exc
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                if session.retired and attempt == 0:
                    continue
                raise ConnectionLost("the MCP connection closed during a request") from exc
            except ValidationError as exc:
                raise McpError(f"the MCP server sent an invalid response: {exc}") from exc
            except RuntimeError as exc:
                # The mcp package raises RuntimeError for results that break the tool's
                # declared output schema, and for results it cannot use.
                raise McpError(str(exc)) from exc
        raise AssertionError("unreachable")

    async def _list_tools(self) -> tuple[ToolDefinition, ...]:
        if self._tools is not None:
            return self._tools
        epoch = self._tools_epoch
        tools = await self._request(_list_tools)
        if epoch == self._tools_epoch:
            # Only cache a listing that no list_changed notification overtook.
            self._tools = tools
        return tools

    async def _reconnect(self) -> None:
        if self._reconnecting:
            await self._current()
            return
        self._reconnecting = True
        try:
            old = self._session
            self._ready = trio.Event()
            self._tools = None
            self._tools_epoch += 1
            if old is not None:
                old.retired = True
                old.retire.set()
                await old.closed.wait()
            log.info("mcp.reconnect.started")
            try:
                await self._open_session()
            except KovaError as exc:
                # Without a session this actor can serve nothing: crash it, so that its
                # supervisor takes over (restart, or give up) instead of callers waiting.
                raise ConnectionLost(f"reconnecting failed: {exc}") from exc
        finally:
            self._reconnecting = False


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as one of ``waits`` returns."""
    async with trio.open_nursery() as nursery:

        async def run(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        for wait in waits:
            nursery.start_soon(run, wait)


def _server_name(client: Client) -> str:
    info = client.server_info
    return info.name if info is not None else ""


def _server_info(client: Client) -> McpServerInfo:
    info = client.server_info
    return McpServerInfo(
        name=info.name if info is not None else "",
        version=info.version if info is not None else "",
        instructions=client.instructions,
        protocol_version=client.protocol_version,
    )


async def _all_pages(
    fetch: Callable[[str | None], Awaitable[_Page]], items: Callable[[_Page], Iterable[_T]]
) -> tuple[_T, ...]:
    """Every item of a paginated MCP list (``nextCursor``), up to ``_MAX_PAGES`` pages."""
    collected: list[_T] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await fetch(cursor)
        collected.extend(items(page))
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(collected)


async def _list_tools(client: Client) -> tuple[ToolDefinition, ...]:
    return await _all_pages(
        lambda cursor: client.list_tools(cursor=cursor),
        lambda page: (_convert.tool_definition(tool) for tool in page.tools),
    )


async def _call_tool(client: Client, name: str, arguments: JSONObject) -> ToolResult:
    result = await client.call_tool(name, dict(arguments))
    return _convert.tool_result(result)


async def _list_resources(client: Client) -> tuple[McpResource, ...]:
    return await _all_pages(
        lambda cursor: client.list_resources(cursor=cursor),
        lambda page: (_convert.resource(item) for item in page.resources),
    )


async def _list_resource_templates(client: Client) -> tuple[McpResourceTemplate, ...]:
    return await _all_pages(
        lambda cursor: client.list_resource_templates(cursor=cursor),
        lambda page: (_convert.resource_template(item) for item in page.resource_templates),
    )


async def _read_resource(client: Client, uri: str) -> tuple[McpResourceContents, ...]:
    result = await client.read_resource(uri)
    return tuple(_convert.resource_contents(item) for item in result.contents)


async def _list_prompts(client: Client) -> tuple[McpPrompt, ...]:
    return await _all_pages(
        lambda cursor: client.list_prompts(cursor=cursor),
        lambda page: (_convert.prompt(item) for item in page.prompts),
    )


async def _get_prompt(client: Client, name: str, arguments: Mapping[str, str]) -> McpPromptResult:
    result = await client.get_prompt(name, dict(arguments))
    return _convert.prompt_result(result)
