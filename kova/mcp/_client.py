"""McpClient: the handle hosts and agents use to talk to one MCP server."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._errors import (
    ActorFailed,
    KovaConnectionError,
    KovaError,
    KovaTimeoutError,
    MailboxClosed,
    McpCallInterruptedError,
    McpError,
    McpUnavailableError,
    check_seconds,
)
from .._groups import raise_lone
from .._json import check_depth
from .._log import get_logger
from ..actors import Runtime, Supervisor, open_supervisor
from ._connection import McpConnection
from ._lazy import LazyStart
from ._messages import (
    CallTool,
    GetPrompt,
    GetServerInfo,
    ListPrompts,
    ListResources,
    ListResourceTemplates,
    ListTools,
    Message,
    ReadResource,
    Reconnect,
    SetLogLevel,
    SetRoots,
    Subscribe,
)
from ._session import leaves
from ._state import ConnectionSettings, SharedState
from ._state import now as _now
from ._telemetry import observe_request
from ._tool_memory import McpToolMemory, server_key
from ._transports import InProcessTransport, SseTransport, StdioTransport, StreamableHttpTransport
from ._types import McpConnectionState, McpRoot, ReconnectPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable

    from .._models import JSONObject, ToolDefinition, ToolResult
    from ..actors import Actor, ActorRef
    from ..providers import Provider
    from ._transports import Transport
    from ._types import (
        ConnectionStatus,
        ElicitationHandler,
        LogHandler,
        McpPrompt,
        McpPromptResult,
        McpResource,
        McpResourceContents,
        McpResourceTemplate,
        McpServerInfo,
        ProgressHandler,
        ResourceUpdatedHandler,
        StateChangeHandler,
    )

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_REQUEST_TIMEOUT", "McpClient"]

log = get_logger(__name__)

DEFAULT_REQUEST_TIMEOUT = 60.0
"""Seconds one MCP request may take unless the call says otherwise."""

DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds one connection attempt (transport, ``initialize``) may take unless ``connect``
says otherwise."""

ACTOR_GRACE = 1.0
"""Seconds past a tool call's limit before the client stops waiting for an actor that does
not answer (the actor itself ends the call at its limit, with the error that says why)."""


_MEMORY_GRACE = 2.0
"""Seconds a lazy client's block end waits to save the last tool list the server announced."""

_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _describe_transport(transport: Transport) -> str:
    """How errors name a server the host did not name."""
    match transport:
        case StreamableHttpTransport(url=url) | SseTransport(url=url):
            return url
        case StdioTransport(command=command, args=args):
            return " ".join((command, *args[:1]))
        case InProcessTransport(server=server):
            return str(getattr(server, "name", "in-process server"))
        case _:
            return type(transport).__name__


@asynccontextmanager
async def _supervised(
    cls: type[McpClient],
    settings: ConnectionSettings,
    shared: SharedState,
    runtime: Runtime | Supervisor | None,
    name: str | None,
    request_timeout: float,
    memory: McpToolMemory | None,
) -> AsyncIterator[McpClient]:
    """:meth:`McpClient.connect`'s client, its connection actor under a supervisor (started
    now, or by the first request when ``memory`` is given: a lazy client)."""

    def mcp_connection() -> Actor:
        return McpConnection(settings, shared)

    connected = False
    try:
        async with AsyncExitStack() as stack:
            supervisor = await _supervisor(stack, runtime)

            async def spawn() -> ActorRef:
                return await supervisor.spawn(mcp_connection, name=name, restart="permanent")

            starter: LazyStart | None = None
            ref: ActorRef | None = None
            if memory is not None:
                starter = LazyStart(spawn, memory, server_key(settings.transport))
                shared.tool_watchers.append(starter.listed)
                shared.publish(McpConnectionState(status="idle", since=_now()))
            else:
                ref = await spawn()
            connected = True
            client = cls(
                ref,
                shared,
                request_timeout=request_timeout,
                roots_enabled=settings.roots_enabled,
                lazy=starter,
            )
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client._close()
                    if client._ref is not None:
                        await supervisor.stop_child(client._ref)
                shared.publish(McpConnectionState(status="closed", since=_now()))
    except BaseExceptionGroup as group:
        _raise_alone(group, connected)
        raise


def _check_connect(
    request_timeout: object,
    connect_timeout: object,
    log_level: object,
    lazy: object,
    tool_memory: object,
) -> None:
    check_seconds("request_timeout", request_timeout)
    check_seconds("connect_timeout", connect_timeout)
    if log_level is not None and log_level not in _LOG_LEVELS:
        raise ValueError(f"log_level must be one of {_LOG_LEVELS}, got {log_level!r}")
    if not isinstance(lazy, bool):
        raise TypeError(f"lazy must be a bool, got {lazy!r}")
    if tool_memory is not None and not isinstance(tool_memory, McpToolMemory):
        raise TypeError(f"tool_memory must be a kova.mcp.McpToolMemory, got {tool_memory!r}")


def _roots(roots: Iterable[McpRoot | str]) -> tuple[McpRoot, ...]:
    return tuple(root if isinstance(root, McpRoot) else McpRoot(uri=root) for root in roots)


async def _supervisor(stack: AsyncExitStack, runtime: Runtime | Supervisor | None) -> Supervisor:
    """Where the connection actor runs: ``runtime``'s supervisor, or one of the client's own
    (open while ``stack`` is)."""
    if runtime is None:
        return await stack.enter_async_context(open_supervisor(name="mcp"))
    if isinstance(runtime, Runtime):
        return runtime.supervisor
    return runtime


def _raise_alone(group: BaseExceptionGroup[BaseException], connected: bool) -> None:
    """A failed connection attempt, or the supervisor giving up on the actor (its
    ActorFailed), travels out through the actor's and the supervisor's nurseries: the
    caller gets the one error it is about, as itself. Returns if there is none (the group
    goes on as it is)."""
    if connected:
        raise_lone(group)
    error = _sole_kova_error(group)
    if error is not None:
        raise error from None


def _sole_kova_error(group: BaseExceptionGroup[BaseException]) -> KovaError | None:
    found = leaves(group)
    return found[0] if len(found) == 1 and isinstance(found[0], KovaError) else None


class McpClient:
    """A connection to one MCP server, served by a supervised connection actor.

    Create it with :meth:`connect`; it is usable inside that ``async with`` block, from any
    number of tasks at once. Every request has a timeout (:data:`DEFAULT_REQUEST_TIMEOUT`
    unless ``connect(request_timeout=...)`` or the call says otherwise).

    Recovery, as specified for kova's MCP client:

    * when the session goes away (the server process died, the socket dropped, the server
      no longer knows the session), the connection actor opens a new one by itself, running
      ``initialize`` again, with backoff (:class:`ReconnectPolicy`); :attr:`state` and
      ``on_state_change`` show where it stands;
    * while no session is up, requests fail at once with :class:`~kova.McpUnavailableError`
      (or wait, up to their timeout, with ``wait_for_connection=True``);
    * a request the lost session interrupted is sent again on the new one if it never
      reached the server, if it only reads, or if it calls a tool annotated read-only or
      idempotent (or named in ``replay_tools``); otherwise it raises
      :class:`~kova.McpCallInterruptedError` (the tool may have run);
    * a JSON-RPC error from the server raises :class:`~kova.McpError` and is never retried;
    * :meth:`tools_list` is cached until :meth:`reconnect`, a new session, or a
      ``notifications/tools/list_changed`` from the server.
    """

    def __init__(
        self,
        ref: ActorRef | None,
        shared: SharedState,
        *,
        request_timeout: float,
        roots_enabled: bool = False,
        lazy: LazyStart | None = None,
    ) -> None:
        self._ref = ref
        self._shared = shared
        self._request_timeout = request_timeout
        self._roots_enabled = roots_enabled
        self._lazy = lazy

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        transport: Transport,
        *,
        runtime: Runtime | Supervisor | None = None,
        name: str | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        sampling: Provider | None = None,
        sampling_model: str | None = None,
        elicitation: ElicitationHandler | None = None,
        reconnect: ReconnectPolicy | None = None,
        wait_for_connection: bool = False,
        on_state_change: StateChangeHandler | None = None,
        replay_tools: Iterable[str] = (),
        roots: Iterable[McpRoot | str] | None = None,
        on_log: LogHandler | None = None,
        log_level: str | None = None,
        on_resource_updated: ResourceUpdatedHandler | None = None,
        lazy: bool = False,
        tool_memory: McpToolMemory | None = None,
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
                restarts in 5 s). The actor recovers lost sessions by itself; it crashes,
                and its supervisor decides, only when ``reconnect`` gives up.
            name: the actor's name (for logs); unique within ``runtime``.
            request_timeout: the default timeout of one request, in seconds.
            connect_timeout: how long one connection attempt may take, in seconds: opening
                the transport, the ``initialize`` handshake and the session's setup. A
                server that does not answer ``initialize`` in time (silent, answering
                garbage, or an HTTP server that accepts and never replies) fails the
                attempt with :class:`~kova.McpError` naming the server and what it sent;
                recovery then retries on its backoff schedule.
            sampling: a provider that answers the server's ``sampling/createMessage``
                requests. Off (the server is told sampling is unsupported) unless given.
            sampling_model: the model to ask for when sampling (the provider's default
                otherwise).
            elicitation: a host function that answers the server's ``elicitation/create``
                requests (asks the user). Off unless given.
            reconnect: how lost sessions are reopened (default: at once, then exponential
                backoff from 0.1 s to 2 s, jittered, never giving up).
            wait_for_connection: while no session is up, requests wait for one (up to
                their own timeout) instead of failing at once with
                :class:`~kova.McpUnavailableError`.
            on_state_change: called with the new :class:`McpConnectionState` on every
                change (in the connection actor's task: keep it quick, do not block).
            replay_tools: tools whose interrupted calls may be sent again although their
                annotations do not say they are read-only or idempotent.
            roots: offer the server these roots (``file://`` URIs or :class:`McpRoot`);
                change them later with :meth:`set_roots`. No roots capability unless given.
            on_log: receives the server's log messages (they are also logged through
                structlog as ``mcp.server.log`` at the matching level).
            log_level: ask the server for log messages at this level and above
                (``logging/setLevel`` on every new session).
            on_resource_updated: told the URI of a subscribed resource that changed (see
                :meth:`resources_subscribe`).
            lazy: don't start the server (no process, no HTTP session) when the block is
                entered: its first request does, once. An agent that defers the server's
                tools (``AgentBuilder.mcp_client(..., defer=True)``) takes them from
                ``tool_memory`` when the server ran before, so the server starts only when
                the model calls one of them (docs/tools.md, "Many tools"). The state is
                ``idle`` until then.
            tool_memory: where a lazy client remembers the server's tools and version
                between runs (default: ``McpToolMemory()``, ``~/.kova/mcp-tools.db``).

        Raises:
            KovaConnectionError: the server could not be reached (after the one retry).
            McpError: the server rejected ``initialize``, or did not complete it within
                ``connect_timeout``.
            ConfigError: ``request_timeout`` or ``connect_timeout`` is not a positive, finite
                number of seconds.
            ValueError: ``log_level`` is not valid.
            TypeError: ``lazy`` is not a bool, or ``tool_memory`` not an McpToolMemory.

        With ``lazy=True`` nothing is reached here: a server that cannot be started fails
        the request that starts it, with :class:`~kova.McpUnavailableError`.
        """
        _check_connect(request_timeout, connect_timeout, log_level, lazy, tool_memory)
        settings = ConnectionSettings(
            transport=transport,
            sampling=sampling,
            sampling_model=sampling_model,
            elicitation=elicitation,
            reconnect=reconnect if reconnect is not None else ReconnectPolicy(),
            wait_for_connection=wait_for_connection,
            replay_tools=frozenset(replay_tools),
            on_log=on_log,
            log_level=log_level,
            on_resource_updated=on_resource_updated,
            roots_enabled=roots is not None,
            connect_timeout=float(connect_timeout),
        )
        shared = SharedState(
            name=name or _describe_transport(transport),
            on_state_change=on_state_change,
            roots=_roots(roots or ()),
        )

        memory = None
        if lazy:
            memory = tool_memory if tool_memory is not None else McpToolMemory()
        async with _supervised(
            cls, settings, shared, runtime, name, request_timeout, memory
        ) as client:
            yield client

    @property
    def name(self) -> str:
        """The connection actor's name (a lazy client's server name until it starts)."""
        return self._shared.name if self._ref is None else self._ref.name

    async def _close(self) -> None:
        """A lazy client's block ends: no start from now on; a tool list that waits is
        saved."""
        lazy = self._lazy
        if lazy is not None:
            lazy.closed = True
            with trio.move_on_after(_MEMORY_GRACE):
                await lazy.flush()

    @property
    def server(self) -> str:
        """How errors name the server: ``connect(name=...)``, else its URL or command."""
        return self._shared.name

    @property
    def state(self) -> McpConnectionState:
        """Where the connection stands now (connecting, connected, unavailable, closed)."""
        return self._shared.state

    async def wait_for_state(self, *statuses: ConnectionStatus) -> McpConnectionState:
        """Wait until :attr:`state` has one of ``statuses`` (returns at once if it has).

        Cancellation: just stops waiting. Put a timeout around it (``trio.fail_after``).
        """
        while self._shared.state.status not in statuses:
            await self._shared.changed.wait()
        return self._shared.state

    def add_tools_listener(
        self, listener: Callable[[tuple[ToolDefinition, ...]], None]
    ) -> Callable[[], None]:
        """Call ``listener`` with the server's new tool list after each
        ``notifications/tools/list_changed`` (this is how an agent's view of the tools
        follows the server). Returns a function that removes the listener.

        The listener runs in the connection actor's task: keep it quick and synchronous.
        """
        watchers = self._shared.tool_watchers
        watchers.append(listener)

        def remove() -> None:
            if listener in watchers:
                watchers.remove(listener)

        return remove

    async def _call(self, message: Message, *, time_limit: float | None = None) -> Any:
        """Send ``message`` to the connection actor, with the request timeout around it.

        The actor recovers lost sessions itself; the one retry here is for the rare case
        that the actor crashed (a bug, or its reconnect policy gave up), and never resends
        a tool call that may have run.
        """
        limit = self._request_timeout if time_limit is None else time_limit
        lazy = self._lazy
        with observe_request(self.server, message):
            if lazy is not None:
                if self._ref is None:
                    await self._start(lazy)
                if lazy.pending is not None:
                    await lazy.flush()
            return await self._send(message, limit)

    async def _start(self, lazy: LazyStart) -> None:
        """Start a lazy client's server (once, whoever asks first), then compare its tools
        and version with the remembered ones."""
        while self._ref is None:
            if lazy.closed:
                raise KovaConnectionError(f"the MCP client for {self.server!r} is closed")
            starting = lazy.starting
            if starting is not None:
                await starting.wait()
                continue
            lazy.starting = trio.Event()
            try:
                log.info("mcp.server.started_lazily", connection=self.server)
                try:
                    self._ref = await lazy.spawn()
                except BaseExceptionGroup as group:
                    error = _sole_kova_error(group)
                    if error is None:
                        raise
                    raise self._not_started(error) from error
                except KovaError as exc:
                    raise self._not_started(exc) from exc
                if lazy.key is not None:
                    await self._refresh_memory(lazy)
            finally:
                lazy.starting.set()
                lazy.starting = None

    def _not_started(self, error: KovaError) -> McpUnavailableError:
        return McpUnavailableError(server=self.server, since=_now(), reason=str(error))

    async def _refresh_memory(self, lazy: LazyStart) -> None:
        try:
            info: McpServerInfo = await self._send(GetServerInfo(), self._request_timeout)
            tools: tuple[ToolDefinition, ...] = await self._send(ListTools(), self._request_timeout)
        except KovaError as exc:
            # The request that started the server goes on; the memory is refreshed at the
            # next start.
            log.info("mcp.tool_memory.refresh_failed", connection=self.server, error=repr(exc))
            return
        await lazy.saw(info.version, tools)
        lazy.tell(self._shared, tools)

    async def _send(self, message: Message, limit: float) -> Any:
        if isinstance(message, CallTool):
            # The actor bounds a tool call by its limit and says what expired (see
            # McpConnection._call_tool); this scope is only a backstop for an actor that
            # does not answer at all.
            message = attrs.evolve(message, timeout=limit)
            limit += ACTOR_GRACE
        ref = self._ref
        assert ref is not None  # a lazy client started it in _call
        with trio.move_on_after(limit):
            for attempt in (1, 2):
                try:
                    return await ref.call(message)
                except (ActorFailed, MailboxClosed) as exc:
                    if isinstance(message, CallTool) and message.replay is not True:
                        if isinstance(exc, ActorFailed):
                            # The actor crashed while serving the call: it may have run.
                            raise McpCallInterruptedError(
                                server=self.server,
                                tool=message.name,
                                reason=str(exc),
                                why="the connection actor crashed while serving it",
                            ) from exc
                        if attempt == 2:
                            # Never reached the actor (it was restarting), so never sent.
                            raise McpUnavailableError(
                                server=self.server, since=_now(), reason=str(exc)
                            ) from exc
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
        if self._shared.state.status != "connected":
            # The time went on waiting for a session: say so, not "timed out".
            raise self._shared.unavailable(within=limit)
        raise KovaTimeoutError(
            f"MCP request {type(message).__name__} to {self.server!r} timed out after {limit:g}s",
            timeout=limit,
        )

    # -- tools ----------------------------------------------------------------------------

    async def tools_list(self, *, remembered: bool = False) -> tuple[ToolDefinition, ...]:
        """The server's tools (every page), cached until reconnect or ``list_changed``.

        Args:
            remembered: a lazy client whose server has not started answers from its tool
                memory when the server ran before, without starting it (the server's own
                list replaces it when it starts, if it differs; see ``connect(lazy=True)``).

        Raises:
            McpError: the server answered with a JSON-RPC error.
            KovaConnectionError: the connection broke twice.
            KovaTimeoutError: the request timeout expired.
        """
        lazy = self._lazy
        if remembered and lazy is not None and self._ref is None:
            known = await lazy.recall()
            if known is not None and self._ref is None:
                lazy.given = known.tools
                return known.tools
        result: tuple[ToolDefinition, ...] = await self._call(ListTools())
        return result

    async def tools_call(
        self,
        name: str,
        arguments: JSONObject | None = None,
        *,
        progress: ProgressHandler | None = None,
        replay: bool | None = None,
    ) -> ToolResult:
        """Call a tool with the default request timeout.

        Args:
            name: the server's name for the tool.
            arguments: its arguments.
            progress: receives the server's progress notifications for this call (kova
                sends a ``progressToken`` only when this is given).
            replay: whether the call may be sent again on a new session if the connection
                is lost while it runs. ``None`` (the default): only if the tool is
                annotated read-only or idempotent, or named in ``replay_tools``.

        Returns:
            The result: text, images and embedded resources converted; ``is_error`` is the
            server's ``isError`` (a tool failure the model should see); ``structured`` is
            the server's ``structuredContent``.

        Raises:
            McpError: the server answered with a JSON-RPC error (e.g. an unknown tool).
            McpUnavailableError: no session is up (the server is down or being reconnected).
            McpCallInterruptedError: the connection was lost while the call ran, and it was
                not safe to send it again.
            KovaTimeoutError: the request timeout expired.

        Cancelling the caller cancels the request (the server is sent
        ``notifications/cancelled``, and the HTTP request is closed) before this returns.
        """
        return await self.tools_call_with_timeout(
            name, arguments, self._request_timeout, progress=progress, replay=replay
        )

    async def tools_call_with_timeout(
        self,
        name: str,
        arguments: JSONObject | None,
        timeout: float,  # noqa: ASYNC109 - the seed's API: a per-call override
        *,
        progress: ProgressHandler | None = None,
        replay: bool | None = None,
    ) -> ToolResult:
        """:meth:`tools_call` with its own timeout (seconds) instead of the default.

        Raises:
            ConfigError: ``timeout`` is not a positive, finite number of seconds.
        """
        check_seconds("timeout", timeout)
        result: ToolResult = await self._call(
            CallTool(
                name=name, arguments=_arguments(name, arguments), progress=progress, replay=replay
            ),
            time_limit=timeout,
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
        _check_text("the resource URI", uri)
        result: tuple[McpResourceContents, ...] = await self._call(ReadResource(uri=uri))
        return result

    async def resources_subscribe(self, uri: str) -> None:
        """Ask the server to tell us when ``uri`` changes (``resources/subscribe``); each
        change reaches ``on_resource_updated``. Subscriptions are renewed on every new
        session."""
        _check_text("the resource URI", uri)
        await self._call(Subscribe(uri=uri, subscribe=True))

    async def resources_unsubscribe(self, uri: str) -> None:
        """Stop :meth:`resources_subscribe` for ``uri``."""
        await self._call(Subscribe(uri=uri, subscribe=False))

    async def prompts_list(self) -> tuple[McpPrompt, ...]:
        """The server's prompt templates (every page)."""
        result: tuple[McpPrompt, ...] = await self._call(ListPrompts())
        return result

    async def prompts_get(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> McpPromptResult:
        """Render a prompt template into kova messages."""
        result: McpPromptResult = await self._call(
            GetPrompt(name=name, arguments=_prompt_arguments(name, arguments))
        )
        return result

    # -- connection -----------------------------------------------------------------------

    async def server_info(self) -> McpServerInfo:
        """What the server said about itself in ``initialize`` (name, version,
        instructions for the model, the negotiated protocol version)."""
        result: McpServerInfo = await self._call(GetServerInfo())
        return result

    async def set_roots(self, roots: Iterable[McpRoot | str]) -> None:
        """Offer the server these roots from now on, and tell it they changed
        (``notifications/roots/list_changed``).

        Raises:
            ValueError: a root is not a ``file://`` URI.
            McpError: the client was connected without ``roots=`` (no roots capability).
        """
        if not self._roots_enabled:
            raise McpError("this client offers no roots: pass roots=[...] to connect()")
        await self._call(SetRoots(roots=_roots(roots)))

    async def set_log_level(self, level: str) -> None:
        """Ask the server for log messages at ``level`` and above (``logging/setLevel``)."""
        if level not in _LOG_LEVELS:
            raise ValueError(f"level must be one of {_LOG_LEVELS}, got {level!r}")
        await self._call(SetLogLevel(level=level))

    async def reconnect(self) -> None:
        """Close the connection and open a new one from the stored transport: a stdio child
        is respawned, ``initialize`` runs again and the tools cache is cleared. While the
        server is unavailable, this cuts the backoff short and tries at once. Requests in
        flight follow the replay rule (see the class docstring).

        Raises:
            McpUnavailableError: the server could not be reached again (the actor keeps
                trying, with backoff).
        """
        await self._call(Reconnect())
        log.info("mcp.client.reconnected", connection=self.name)


def _arguments(name: str, arguments: Mapping[str, Any] | None) -> JSONObject:
    """A call's arguments, checked before anything is sent: a JSON object that JSON can
    carry, nested at most :data:`~kova._json.MAX_JSON_DEPTH` deep. The session serializes a
    request in the connection actor's task, so before, a value it could not write (10,000
    levels deep, an ``object()``) crashed the actor and failed every call in flight."""
    _check_text("the name", name)
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise TypeError(
            f"the arguments for {name!r} must be a JSON object (a dict), got "
            f"{type(arguments).__name__}"
        )
    check_depth(arguments, f"the arguments object for {name!r}")
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the arguments for {name!r} must hold JSON values only: {exc}") from None
    if not text.isascii() and _SURROGATE.search(text):
        # A lone surrogate (half an emoji a model streamed) cannot be encoded as UTF-8: the
        # mcp package's HTTP writers fail on it, ending the connection, and a server that
        # reads JSON with pydantic refuses its escape. It is sent as U+FFFD.
        replaced: JSONObject = json.loads(_SURROGATE.sub("\ufffd", text))
        return replaced
    return arguments


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(what: str, value: object) -> None:
    """A name or URI the caller gives: a non-empty ``str`` that UTF-8 can carry."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty str, got {value!r}")
    if not value.isascii() and _SURROGATE.search(value):
        raise ValueError(f"{what} {value!r} holds a lone surrogate, which UTF-8 cannot carry")


def _prompt_arguments(name: str, arguments: Mapping[str, str] | None) -> dict[str, str]:
    """A prompt's arguments, checked before anything is sent: MCP's are strings."""
    _check_text("the name", name)
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise TypeError(
            f"the arguments for prompt {name!r} must be a mapping of str to str, got "
            f"{type(arguments).__name__}"
        )
    for key, value in arguments.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"the arguments for prompt {name!r} must map str to str, got {key!r}: "
                f"{type(value).__name__}"
            )
        if _SURROGATE.search(value):
            raise ValueError(f"the argument {key!r} of prompt {name!r} holds a lone surrogate")
    return dict(arguments)
