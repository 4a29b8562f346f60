"""The MCP connection actor: one per server, owning the ``mcp`` client session.

The ``mcp`` package's context managers (transport, task groups, session) must be entered and
left in one task. Each connection runs in a *session task* of its own, a child of the
nursery the actor opens in :meth:`McpConnection.resources`: it enters the transport and the
session, publishes the live connection, and holds it until the connection is retired or
lost. Requests are served concurrently by the actor's handler tasks, which share the session
(the ``mcp`` dispatcher correlates concurrent requests by id).

Recovery is the actor's own job, not its supervisor's. The *maintenance task* waits for the
session to end, for whatever reason (the server closed the stream, a stdio child exited, a
socket dropped, the server no longer knows our ``Mcp-Session-Id``, ``reconnect()``), and
opens a new one, running ``initialize`` again. The first attempt is immediate; after a
failure it backs off (:class:`~kova.mcp.ReconnectPolicy`: exponential, capped, jittered) and
keeps trying, so an outage of minutes does not end the host's block. While no session is
up the connection is ``unavailable`` and requests fail at once with
:class:`~kova.McpUnavailableError` (or wait for the session, up to their own timeout, when
the host asked for that). The policy can also give up: then the actor crashes and its
supervisor applies the OTP rules.

A request caught by a lost session is sent again on the next one only when that is safe:
the request never reached the server (kova's HTTP layer knows, see
:data:`~kova.mcp._transports.NOT_DELIVERED`), or it is a read (listing, reading a resource,
getting a prompt), or it calls a tool annotated read-only or idempotent (or one the host
named). Otherwise it fails with :class:`~kova.McpCallInterruptedError`: it may have run.
A JSON-RPC error from the server fails that request with :class:`~kova.McpError`; the
connection is fine and nothing is retried.

What one session is (its transport setup, how it ends, one request on it) lives in
:mod:`kova.mcp._session`; what the server asks of the client (sampling, elicitation,
roots, its log messages) in :mod:`kova.mcp._callbacks`.
"""

from __future__ import annotations

import math
import random
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types as mt
import trio

from .._errors import (
    KovaError,
    KovaTimeoutError,
    McpCallInterruptedError,
    McpError,
    McpUnavailableError,
)
from .._log import get_logger
from ..actors import Actor, UnknownMessage
from . import _operations as operations
from ._callbacks import ServerCallbacks, call_host
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
from ._session import (
    Session,
    SessionLost,
    Traffic,
    connect_error,
    describe,
    first_of,
    is_transient,
    leaves,
    open_client,
    request_once,
)
from ._state import now
from ._types import McpConnectionState

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from mcp import Client

    from .._models import ToolDefinition, ToolResult
    from ._state import ConnectionSettings, SharedState
    from ._types import ConnectionStatus

__all__ = ["ConnectionLost", "McpConnection"]

log = get_logger(__name__)

_T = TypeVar("_T")


CONNECT_RETRY_DELAY = 0.5
"""Seconds before the one retry of a first connection attempt that failed transiently."""

CLOSE_GRACE = 5.0
"""Seconds a lost session may take to release its transport (say, a ``DELETE`` to a server
that stopped answering) before it is cancelled."""

GONE_GRACE = 0.5
"""Seconds a session the server no longer has stays open for the requests already in flight
on it to get their answers from kova's HTTP layer."""

ECHO_WINDOW = 1.0
"""Seconds after a refresh that found no change during which ``notifications/tools/
list_changed`` starts no listing of its own; it doubles with each such refresh in a row."""

ECHO_WINDOW_MAX = 60.0
"""The longest quiet window, in seconds."""


class _CallProgress:
    """How far one tool call got, for the error its time limit reports."""

    __slots__ = ("in_flight", "lost")

    def __init__(self) -> None:
        self.in_flight = False
        """A request is out on a live session."""
        self.lost: str | None = None
        """Why the session was lost after the call may have reached the server."""


class ConnectionLost(Exception):
    """The reconnect policy gave up; raised to crash the actor so its supervisor decides."""


class McpConnection(Actor):
    """The connection actor. Build it through :meth:`McpClient.connect`; its messages are
    private to :mod:`kova.mcp`."""

    concurrent = True

    def __init__(self, settings: ConnectionSettings, shared: SharedState) -> None:
        self._settings = settings
        self._shared = shared
        self._callbacks = ServerCallbacks(settings=settings, shared=shared)
        self._nursery: trio.Nursery | None = None
        self._session: Session | None = None
        self._sessions_opened = shared.state.session
        self._closing = False
        self._kick = trio.Event()
        self._maintain_scope = trio.CancelScope()
        self._tools: tuple[ToolDefinition, ...] | None = None
        self._known_tools: dict[str, ToolDefinition] = {}
        self._tools_epoch = 0
        self._refreshing = False
        """A refresh after ``list_changed`` is running (at most one at a time)."""
        self._refresh_pending = False
        """A ``list_changed`` came while it ran: one more refresh follows (at most one)."""
        self._quiet_until = -math.inf
        """Until when (trio's clock) the notifications wait: the last listing found nothing
        new (see :meth:`_refresh_coalesced`)."""
        self._quiet = ECHO_WINDOW
        self._refresh_deferred = False
        """A refresh waits for the quiet window to end."""
        self._told_tools: tuple[ToolDefinition, ...] | None = None
        """The tools the watchers were last told."""
        self._random = random.Random()
        self._given_up: str | None = None
        """Why the reconnect policy gave up: no session will come on this incarnation."""
        self._waiting = 0
        """Requests waiting in :meth:`_live_session` for a session."""
        self._none_waiting = trio.Event()

    # -- lifetime -----------------------------------------------------------------------

    @asynccontextmanager
    async def _resources(self) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._maintain)
            try:
                yield
            finally:
                self._closing = True
                session = self._session
                if session is not None:
                    session.retire()
                else:
                    self._maintain_scope.cancel(reason="the MCP client is closing")
                # The session task leaves its context managers (shielded inside the mcp
                # transports where it matters: a stdio child is always reaped).

    def resources(self) -> AbstractAsyncContextManager[None]:
        return self._resources()

    def _publish(self, status: ConnectionStatus, **changes: Any) -> None:
        current = self._shared.state
        since = current.since if status == current.status == "unavailable" else now()
        self._shared.publish(
            McpConnectionState(
                status=status,
                since=changes.pop("since", since),
                session=self._sessions_opened,
                **changes,
            )
        )

    async def _maintain(self, *, task_status: trio.TaskStatus[None]) -> None:
        """The maintenance task: the first connection (one retry after
        :data:`CONNECT_RETRY_DELAY` if it failed transiently, else the error goes to
        ``connect()``), then a new session whenever the current one ends."""
        assert self._nursery is not None
        transport = type(self._settings.transport).__name__
        self._publish("connecting")
        for attempt in (1, 2):
            try:
                session = await self._nursery.start(self._serve_session)
                break
            except Exception as exc:
                if attempt == 2 or not is_transient(exc):
                    error = connect_error(exc, transport)
                    if any(error is leaf for leaf in leaves(exc)):
                        raise error from None  # already the precise error, with its traceback
                    raise error from exc
                log.info(
                    "mcp.connection.failed",
                    connection=self._shared.name,
                    transport=transport,
                    retry_in=CONNECT_RETRY_DELAY,
                    error=describe(exc),
                )
            await trio.sleep(CONNECT_RETRY_DELAY)
        task_status.started()
        with self._maintain_scope:
            while True:
                await session.closed.wait()
                if self._closing:
                    return
                session = await self._reconnect_until_up(session)

    async def _reconnect_until_up(self, old: Session) -> Session:
        """Open a new session after ``old`` ended: at once, then with backoff."""
        assert self._nursery is not None
        policy = self._settings.reconnect
        started = trio.current_time()
        outage_since = now()
        failures = 0
        reason = old.reason
        self._publish("connecting", error=reason)
        while True:
            self._kick = trio.Event()
            try:
                session: Session = await self._nursery.start(self._serve_session)
            except Exception as exc:
                failures += 1
                reason = describe(exc)
                if policy.gives_up(failures, trio.current_time() - started):
                    log.error(
                        "mcp.connection.given_up",
                        connection=self._shared.name,
                        attempts=failures,
                        error=reason,
                    )
                    given_up = (
                        f"MCP server {self._shared.name!r} still unavailable after "
                        f"{failures} reconnect attempts: {reason}"
                    )
                    self._publish(
                        "unavailable", since=outage_since, error=reason, attempts=failures
                    )
                    await self._answer_waiters(given_up)
                    raise ConnectionLost(given_up) from exc
                delay = policy.delay(failures, self._random)
                log.info(
                    "mcp.reconnect.failed",
                    connection=self._shared.name,
                    attempt=failures,
                    retry_in=round(delay, 3),
                    error=reason,
                )
                self._publish("unavailable", since=outage_since, error=reason, attempts=failures)
                with trio.move_on_after(delay):
                    await self._kick.wait()
                self._publish("connecting", since=outage_since, error=reason, attempts=failures)
            else:
                return session

    async def _serve_session(self, *, task_status: trio.TaskStatus[Session]) -> None:
        """The session task: connect, publish the session, then hold the ``mcp`` context
        managers open until the connection is retired or lost."""
        session: Session | None = None
        traffic = Traffic()
        timeout = self._settings.connect_timeout
        try:
            with trio.CancelScope() as scope:
                # The handshake (transport, initialize, the session's setup) is bounded by
                # the connect timeout: a server that never answers initialize, answers with
                # garbage, or accepts an HTTP connection and says nothing must not hold
                # connect() (or a recovery attempt) forever.
                scope.deadline = trio.current_time() + timeout
                opened = open_client(self._settings, self._callbacks, self._on_message, traffic)
                async with opened as (client, lost, watch):
                    await self._prepare(client)
                    scope.deadline = math.inf
                    self._sessions_opened += 1
                    session = Session(client=client, number=self._sessions_opened)
                    watch.on_gone = session.mark_gone
                    session.watch = watch
                    log.info(
                        "mcp.connection.opened",
                        connection=self._shared.name,
                        server=operations.server_info(client).name,
                        session=session.number,
                    )
                    self._session = session
                    task_status.started(session)
                    self._publish("connected")
                    await first_of(session.ended.wait, lost.wait, session.gone.wait)
                    if session.gone.is_set() and not session.ended.is_set():
                        # Let the requests the HTTP layer answered "not delivered" see that
                        # answer (so they are sent again) before the transport goes.
                        with trio.move_on_after(GONE_GRACE):
                            await session.idle.wait()
                        session.lose(session.reason or "the MCP session is gone")
                    if not session.ended.is_set():
                        session.lose("the MCP server closed the connection")
                    if not session.retired:
                        self._report_lost(session)
                    # Leaving the transport may wait on a server that stopped answering.
                    scope.deadline = trio.current_time() + CLOSE_GRACE
            if session is None:  # the handshake's deadline passed
                raise McpError(
                    f"MCP server {self._shared.name!r} did not complete initialize within "
                    f"{timeout:g}s (connect_timeout): {traffic.describe()}"
                )
        except Exception as exc:
            if session is None:
                raise  # the connection attempt failed: nursery.start() raises it
            # The transport broke out of its context managers: the session is lost.
            session.lose(describe(exc))
            self._report_lost(session)
        finally:
            if session is not None:
                if self._session is session:
                    self._session = None
                session.closed.set()
                log.info("mcp.connection.closed", connection=self._shared.name)

    def _report_lost(self, session: Session) -> None:
        # info, not warning: the actor reconnects by itself and the requests it touched
        # fail with errors that say so; giving up is the error the host must act on.
        log.info(
            "mcp.connection.lost",
            connection=self._shared.name,
            session=session.number,
            reason=session.reason,
        )
        self._publish("connecting", error=session.reason)

    async def _prepare(self, client: Client) -> None:
        """Bring a new session up to what the host asked for: log level, subscriptions."""
        capabilities = client.server_capabilities
        if self._settings.log_level is not None and capabilities.logging is not None:
            await operations.set_log_level(client, self._settings.log_level)
        for uri in sorted(self._shared.subscriptions):
            await operations.subscribe(client, uri, subscribe=True)

    # -- server-initiated traffic (runs in the session's task group) ----------------------

    async def _on_message(self, message: Any) -> None:
        match message:
            case mt.ToolListChangedNotification():
                self._tools = None
                self._tools_epoch += 1
                log.debug("mcp.tools.invalidated", reason="list_changed")
                if self._shared.tool_watchers and self._nursery is not None:
                    if self._refreshing:
                        self._refresh_pending = True
                    elif trio.current_time() < self._quiet_until:
                        if not self._refresh_deferred:
                            self._refresh_deferred = True
                            self._nursery.start_soon(self._refresh_later)
                    else:
                        self._refreshing = True
                        self._nursery.start_soon(self._refresh_coalesced)
            case mt.ResourceUpdatedNotification(params=params):
                handler = self._settings.on_resource_updated
                if handler is not None:
                    name = self._shared.name
                    await call_host("on_resource_updated", name, handler, str(params.uri))
            case mt.ResourceListChangedNotification() | mt.PromptListChangedNotification():
                log.debug("mcp.list_changed", kind=message.method)
            case _:
                pass
        await trio.lowlevel.checkpoint()

    # -- requests -----------------------------------------------------------------------

    async def handle_call(self, message: Message) -> Any:
        match message:
            case ListTools():
                return await self._list_tools()
            case CallTool():
                return await self._call_tool(message)
            case ListResources():
                return await self._request(operations.list_resources)
            case ListResourceTemplates():
                return await self._request(operations.list_resource_templates)
            case ReadResource(uri=uri):
                return await self._request(lambda c: operations.read_resource(c, uri))
            case Subscribe(uri=uri, subscribe=subscribe):
                if subscribe:
                    self._shared.subscriptions.add(uri)
                else:
                    self._shared.subscriptions.discard(uri)
                return await self._request(
                    lambda c: operations.subscribe(c, uri, subscribe=subscribe)
                )
            case ListPrompts():
                return await self._request(operations.list_prompts)
            case GetPrompt(name=name, arguments=arguments):
                return await self._request(lambda c: operations.get_prompt(c, name, arguments))
            case SetRoots(roots=roots):
                self._shared.roots = roots
                session = self._session
                if session is not None and session.usable:
                    # A notification: a lost session misses nothing, the next one asks anew.
                    await self._request(operations.roots_changed, replay=False)
                return None
            case SetLogLevel(level=level):
                return await self._request(lambda c: operations.set_log_level(c, level))
            case Reconnect():
                await self._reconnect()
                return None
            case GetServerInfo():
                session = await self._live_session(None)
                return operations.server_info(session.client)
            case _:
                raise UnknownMessage(self.name, message)

    async def _answer_waiters(self, given_up: str) -> None:
        """Before the actor crashes for a policy that gave up: the requests waiting for a
        session are answered (:class:`~kova.McpUnavailableError`, or "may have run" for a
        call lost after it was sent) rather than failed by the crash as if they had run."""
        self._given_up = given_up
        if self._waiting:
            self._none_waiting = trio.Event()
            self._shared.wake()
            await self._none_waiting.wait()

    def _gave_up(self) -> McpUnavailableError:
        # The error names the server and the attempts itself: its reason is the last
        # error only (it was the whole give-up sentence, which named them again).
        reason = f"{self._shared.state.error or self._given_up}; the reconnect policy gave up"
        return self._shared.unavailable(reason=reason)

    async def _live_session(self, avoid: Session | None, *, wait: bool = False) -> Session:
        """The live session (other than ``avoid``), waiting while one is being opened
        (the first connection, or the first attempt after a session was lost).

        With ``wait`` (a request that was lost after it was sent, to be sent again), it
        also waits while the server is unavailable: failing fast would report "nothing was
        sent" for a request the server may have run.

        Raises:
            McpUnavailableError: the server is unavailable (the actor is backing off, or
                trying again after a failed attempt) and neither the host nor ``wait``
                asked requests to wait; or the reconnect policy gave up (whatever was
                asked).
        """
        while True:
            session = self._session
            if session is not None and session is not avoid and session.usable:
                return session
            if self._given_up is not None:
                raise self._gave_up()
            state = self._shared.state
            # Known down: backing off, or trying again after a failed attempt (a call does
            # not wait on that probe). The first attempt after a loss is waited for.
            down = state.status == "unavailable" or (
                state.status == "connecting" and state.attempts > 0
            )
            if down and not wait and not self._settings.wait_for_connection:
                raise self._shared.unavailable()
            self._waiting += 1
            try:
                await self._shared.changed.wait()
            finally:
                self._waiting -= 1
                if not self._waiting:
                    self._none_waiting.set()

    async def _request(
        self, operation: Callable[[Client], Awaitable[_T]], *, replay: bool = True
    ) -> _T:
        """Run ``operation`` on the live session, once more on the next session if the first
        one was lost under it and ``replay`` allows (or it never reached the server)."""
        avoid: Session | None = None
        wait = False
        for attempt in (1, 2):
            session = await self._live_session(avoid, wait=wait)
            try:
                return await request_once(session, operation)
            except SessionLost as lost:
                if attempt == 2 or not (replay or not lost.delivered):
                    raise McpUnavailableError(
                        server=self._shared.name, since=now(), reason=lost.reason
                    ) from None
                log.info("mcp.request.replayed", connection=self._shared.name, reason=lost.reason)
                avoid = session
                # A request the server may have run waits for the next session to be sent
                # again; one that never reached it fails fast like any new call.
                wait = lost.delivered
        raise AssertionError("unreachable")

    async def _call_tool(self, message: CallTool) -> ToolResult:
        """One tool call, bounded as a whole by ``message.timeout`` so that the error says
        what happened: nothing sent (:class:`~kova.McpUnavailableError`), sent and lost
        and not sent again (:class:`~kova.McpCallInterruptedError`), or in flight on a live
        session when the time ran out (:class:`~kova.KovaTimeoutError`)."""
        progress = _CallProgress()
        epoch = self._tools_epoch
        with trio.move_on_after(message.timeout) as scope:
            result = await self._call_tool_attempts(message, progress)
        if scope.cancelled_caught:
            raise self._call_timed_out(message, progress)
        if epoch != self._tools_epoch and self._shared.tool_watchers:
            # The call changed the server's tools: the agent that made it sees the new list
            # before its next step.
            await self._refresh_tools()
        return result

    async def _call_tool_attempts(self, message: CallTool, progress: _CallProgress) -> ToolResult:
        name = message.name
        avoid: Session | None = None
        for attempt in (1, 2):
            # A call lost after it was sent waits for the next session to be sent again;
            # one that never reached the server fails fast like any new call.
            try:
                session = await self._live_session(avoid, wait=progress.lost is not None)
            except McpUnavailableError:
                if progress.lost is None:
                    raise  # never sent
                raise McpCallInterruptedError(
                    server=self._shared.name,
                    tool=name,
                    reason=progress.lost,
                    why="the reconnect policy gave up before a new session came up",
                ) from None
            progress.in_flight = True
            try:
                return await request_once(
                    session,
                    lambda c: operations.call_tool(
                        c, name, message.arguments, message.progress, self._shared.name
                    ),
                )
            except SessionLost as lost:
                progress.in_flight = False
                avoid = session
                # Provably never ran: the same as a call made just now.
                fresh = not lost.delivered and progress.lost is None
                if attempt == 2 and fresh:
                    raise McpUnavailableError(
                        server=self._shared.name, since=now(), reason=lost.reason
                    ) from None
                if attempt == 2:
                    why = (
                        "it was already sent again once"
                        if lost.delivered
                        else "the new session was lost before the call reached it"
                    )
                    raise McpCallInterruptedError(
                        server=self._shared.name,
                        tool=name,
                        reason=lost.reason,
                        replayed=lost.delivered,
                        why=why,
                    ) from None
                if not fresh:
                    progress.lost = lost.reason
                    refusal = await self._replay_refusal(message)
                    if refusal is not None:
                        raise McpCallInterruptedError(
                            server=self._shared.name, tool=name, reason=lost.reason, why=refusal
                        ) from None
                log.info(
                    "mcp.request.replayed",
                    connection=self._shared.name,
                    tool=name,
                    delivered=lost.delivered,
                    reason=lost.reason,
                )
        raise AssertionError("unreachable")

    def _call_timed_out(self, message: CallTool, progress: _CallProgress) -> KovaError:
        limit = message.timeout
        if progress.lost is not None:
            return McpCallInterruptedError(
                server=self._shared.name,
                tool=message.name,
                reason=progress.lost,
                why=f"no new session came up within the call's {limit:g}s timeout",
            )
        if progress.in_flight:
            return KovaTimeoutError(
                f"MCP request CallTool to {self._shared.name!r} timed out after {limit:g}s",
                timeout=limit,
            )
        return self._shared.unavailable(within=limit)

    async def _replay_refusal(self, message: CallTool) -> str | None:
        """Why an interrupted call of this tool may not be sent again (``None``: it may):
        the host's word, else its annotations (read-only or idempotent), listed from the
        server (on the next session) when they are not known yet."""
        if message.replay is not None:
            return None if message.replay else "the caller passed replay=False"
        if message.name in self._settings.replay_tools:
            return None
        definition = self._known_tools.get(message.name)
        if definition is None:
            try:
                await self._list_tools(wait=True)
            except (McpError, McpUnavailableError) as exc:
                return f"its annotations could not be listed ({exc})"
            definition = self._known_tools.get(message.name)
            if definition is None:
                return "the server no longer lists the tool"
        annotations = definition.annotations
        if annotations is not None and (
            annotations.read_only is True or annotations.idempotent is True
        ):
            return None
        return "the tool is not annotated read-only or idempotent"

    async def _list_tools(self, *, wait: bool = False) -> tuple[ToolDefinition, ...]:
        if self._tools is not None:
            return self._tools
        epoch = self._tools_epoch
        if wait:
            await self._live_session(None, wait=True)
        tools = await self._request(operations.list_tools)
        self._known_tools = {tool.name: tool for tool in tools}
        if epoch == self._tools_epoch:
            # Only cache a listing that no list_changed notification overtook.
            self._tools = tools
        return tools

    async def _refresh_coalesced(self) -> None:
        """Refresh after ``list_changed``: one at a time, and the notifications that come
        while one runs cost one more at most, only if it found a change (a server may say
        "changed" in answer to our listing itself). A listing that found nothing new starts
        a quiet window (:data:`ECHO_WINDOW` seconds, doubling with each such listing in a
        row up to :data:`ECHO_WINDOW_MAX`): the notifications in it cost one listing when
        it ends. So 20,000 notifications cost a handful of listings and a few tasks, and the
        tools cache is cleared by each all the same (``tools_list()`` lists afresh)."""
        try:
            while True:
                self._refresh_pending = False
                changed = await self._refresh_tools()
                if changed:
                    self._quiet = ECHO_WINDOW
                else:
                    self._quiet_until = trio.current_time() + self._quiet
                    self._quiet = min(self._quiet * 2, ECHO_WINDOW_MAX)
                if not (changed and self._refresh_pending):
                    return
        finally:
            self._refreshing = False
            self._refresh_pending = False

    async def _refresh_later(self) -> None:
        """The one refresh for the notifications of a quiet window, when it ends."""
        try:
            await trio.sleep_until(self._quiet_until)
        finally:
            self._refresh_deferred = False
        if self._refreshing:
            self._refresh_pending = True
            return
        self._refreshing = True
        await self._refresh_coalesced()

    async def _refresh_tools(self) -> bool:
        """List the tools again and tell the watchers if they changed (after
        ``list_changed``); whether they did."""
        try:
            tools = await self._list_tools()
        except KovaError as exc:
            # The agents keep the list they had; the next reconnect lists the tools again.
            log.info("mcp.tools.refresh_failed", connection=self._shared.name, error=repr(exc))
            return False
        if tools == self._told_tools:
            return False
        self._told_tools = tools
        self._shared.tell_tools(tools)
        return True

    async def _reconnect(self) -> None:
        """Retire the session (or cut a backoff short) and wait for the next one."""
        old = self._session
        self._tools = None
        self._tools_epoch += 1
        log.info("mcp.reconnect.started", connection=self._shared.name)
        if old is not None:
            old.retire()
        else:
            # Backing off (or connecting): cut the wait short and see the attempt through.
            self._kick.set()
            await self._shared.changed.wait()
        while True:
            session = self._session
            if session is not None and session is not old and session.usable:
                return
            state = self._shared.state
            if state.status == "unavailable" and (old is None or old.closed.is_set()):
                raise self._shared.unavailable()
            await self._shared.changed.wait()
