"""The event server: one port serving the page and a WebSocket that streams agent events.

State (connected pages, the turns kept for reconnecting pages, pending approvals) belongs to
the :class:`EventServer`; every change to it happens in a plain (non-async) method, so under
trio's single thread no task ever sees a half-made change, and no lock is needed. Each page
has a bounded buffer (a trio memory channel) and one writer task that sends, once per flush
interval, everything that piled up as one frame; publishing never waits: a page whose buffer
is full is dropped (it reconnects and gets the current state), the agent is never slowed.

The pieces: :mod:`kova.web._http` answers plain HTTP (the page's files) and checks a
request's host and origin; :mod:`kova.web._page` is one page's WebSocket session (its reader
and its frame writer); :mod:`kova.web._approvals` holds the tool calls waiting for a
decision; :mod:`kova.web._turns` the turns kept for reconnecting pages.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._errors import KovaError, check_seconds
from .._log import get_logger
from .._models import (
    Audio,
    ContentBlock,
    Document,
    File,
    Image,
    Message,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolAnnotations,
    ToolResult,
    ToolUse,
)
from .._record import EMPTY, Record
from ..agent import (
    ContextCompacted,
    GuardPassed,
    GuardTripped,
    ToolCallDeferred,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolsAdded,
    ToolsFound,
    TurnCompleted,
)
from . import _schema
from ._approvals import Approvals
from ._http import RequestHead, load_static
from ._page import CLOSE_NORMAL, CLOSE_TOO_SLOW, Page, close_page, serve_page
from ._turns import Turn, TurnLog

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping

    import trio_websocket

    from ..agent import AgentEvent
    from ..sessions import Session, SessionStore
    from ..telemetry import TelemetryEvent
    from ..tools import Tool

__all__ = ["EventServer", "WebApproval", "WebRequest"]

log = get_logger(__name__)


def attachment_label(block: ContentBlock) -> str | None:
    """How the page names a media block of a prompt (``None`` for text and the rest)."""
    match block:
        case Document(title=title, media_type=media_type):
            return f"{title} ({media_type})" if title else f"document ({media_type})"
        case Image(media_type=media_type):
            return f"image ({media_type or 'by URL'})"
        case Audio(format=audio_format):
            return f"audio ({audio_format})"
        case File(file_id=file_id):
            return f"file {file_id}"
    return None


class WebRequest(Record):
    """A WebSocket upgrade request, as a host-supplied ``authorize`` check sees it."""

    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    """Header names lower-cased."""


class EventServer:
    """A live web view of agents: open it with :func:`open_event_server`.

    Feed it a turn's events with :meth:`relay` (or :meth:`publish`), gate tool calls with
    :meth:`approval_handler`, add telemetry with ``agent.telemetry.subscribe(server)`` (see
    :meth:`on_event`), and point a browser at :attr:`url`.
    """

    __slots__ = (
        "_allowed_origins",
        "_approvals",
        "_authorize",
        "_chat",
        "_closed",
        "_disconnect_grace",
        "_dropped",
        "_flush_interval",
        "_host",
        "_log",
        "_max_buffered",
        "_max_chat_chars",
        "_max_message_bytes",
        "_max_pages",
        "_opened",
        "_page_buffer",
        "_page_numbers",
        "_pages",
        "_port",
        "_prompt_receive",
        "_prompt_send",
        "_session",
        "_sessions",
        "_static",
        "_stop_requested",
        "_stoppable",
        "_token",
    )

    def __init__(
        self,
        *,
        token: str | None = None,
        authorize: Callable[[WebRequest], bool] | None = None,
        allowed_origins: Iterable[str] = (),
        chat: bool = False,
        page_buffer: int = 4096,
        flush_interval: float = 0.05,
        max_message_bytes: int = 64 * 1024,
        max_chat_chars: int = 32_000,
        max_pages: int = 64,
        keep_turns: int = 20,
        disconnect_grace: float = 10.0,
        sessions: SessionStore | None = None,
    ) -> None:
        """A checked server that listens nowhere yet (arguments as :func:`open_event_server`'s;
        the serving functions make it)."""
        if sessions is not None:
            from ..sessions import SessionStore

            if not isinstance(sessions, SessionStore):
                raise TypeError(
                    f"sessions must be a kova.sessions.SessionStore, got {type(sessions).__name__}"
                )
        if token is not None and (not isinstance(token, str) or len(token) < 16):
            raise ValueError("token must be a string of at least 16 characters")
        for name, count in (
            ("page_buffer", page_buffer),
            ("max_message_bytes", max_message_bytes),
            ("max_chat_chars", max_chat_chars),
            ("max_pages", max_pages),
            ("keep_turns", keep_turns),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"{name} must be a positive integer, not {count!r}")
        check_seconds("flush_interval", flush_interval)
        check_seconds("disconnect_grace", disconnect_grace)
        self._token = token if token is not None else secrets.token_urlsafe(24)
        self._sessions = sessions
        self._session: Session | None = None
        self._opened: dict[str, Any] | None = None
        self._authorize = authorize
        self._allowed_origins = frozenset(allowed_origins)
        self._page_buffer = page_buffer
        self._flush_interval = float(flush_interval)
        self._max_message_bytes = max_message_bytes
        self._max_chat_chars = max_chat_chars
        self._max_pages = max_pages
        self._disconnect_grace = disconnect_grace
        self._chat = chat
        self._host = ""
        self._port = 0
        self._static: Mapping[str, tuple[bytes, str]] = load_static()
        self._pages: dict[int, Page] = {}
        self._page_numbers = itertools.count(1)
        self._log = TurnLog(keep=keep_turns)
        self._approvals = Approvals(
            emit=self._emit,
            has_pages=lambda: bool(self._pages),
            disconnect_grace=float(disconnect_grace),
        )
        self._prompt_send: trio.MemorySendChannel[str] | None = None
        self._prompt_receive: trio.MemoryReceiveChannel[str] | None = None
        if chat:
            self._prompt_send, self._prompt_receive = trio.open_memory_channel[str](8)
        self._dropped = 0
        self._max_buffered = 0
        self._closed = False
        self._stoppable: trio.CancelScope | None = None
        self._stop_requested = False

    def __repr__(self) -> str:
        # The token is a credential: never in a repr.
        return f"EventServer(host={self._host!r}, port={self._port!r}, pages={len(self._pages)})"

    # -- public surface --------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The address the server listens on."""
        return self._host

    @property
    def port(self) -> int:
        """The port the server listens on (the real one when 0 was asked for)."""
        return self._port

    @property
    def token(self) -> str:
        """The secret every WebSocket connection must present (``?token=``)."""
        return self._token

    @property
    def url(self) -> str:
        """The page's address, token included (in the fragment: never sent over HTTP)."""
        return f"http://{self._netloc}/#token={self._token}"

    @property
    def websocket_url(self) -> str:
        """The WebSocket address for other front ends, token included."""
        return f"ws://{self._netloc}/ws?token={self._token}"

    @property
    def page_count(self) -> int:
        """How many pages are connected now."""
        return len(self._pages)

    @property
    def dropped_pages(self) -> int:
        """How many pages were dropped for falling a whole buffer behind."""
        return self._dropped

    @property
    def max_buffered(self) -> int:
        """The most events any one page ever had waiting (never above ``page_buffer``)."""
        return self._max_buffered

    @property
    def pending_approvals(self) -> int:
        """Tool calls waiting for a person's decision now."""
        return len(self._approvals)

    @property
    def prompts(self) -> trio.MemoryReceiveChannel[str]:
        """Prompts typed into the page (only with ``chat=True``; ``kova serve`` reads them).

        Raises:
            RuntimeError: the server was opened without ``chat=True``.
        """
        if self._prompt_receive is None:
            raise RuntimeError("open the event server with chat=True to receive prompts")
        return self._prompt_receive

    @property
    def session(self) -> Session | None:
        """The session the pages have open (``None`` without ``sessions=``): the
        conversation the next prompt continues. A new one until a page opens another."""
        if self._sessions is None:
            return None
        if self._session is None:
            self._session = self._sessions.session(_new_session_id())
        return self._session

    def begin_turn(self, prompt: str | Message | None = None) -> int:
        """Start a turn on every page (``prompt``: the user's message, shown above it; a
        :class:`~kova.Message` shows its text and names its documents, images, audio and
        files as attachments).

        A turn still open is closed first. Returns the turn's number.
        """
        current = self._current()
        if current is not None and current.open:
            self._close_turn(current, {"type": "turn_failed", "error": "superseded"})
        number = self._log.begin(trio.current_time()).number
        event: dict[str, Any] = {"type": "turn_started", "turn": number, "prompt": prompt}
        if isinstance(prompt, Message):
            event["prompt"] = prompt.text
            event["attachments"] = [
                label for block in prompt.content if (label := attachment_label(block))
            ]
        self._emit(event)
        return number

    def publish(self, event: AgentEvent) -> None:
        """Send one event of ``agent.stream()`` to every page (never waits).

        A delta with no turn open starts one; :class:`~kova.agent.TurnCompleted` ends it.
        """
        turn = self._current()
        if turn is None or not turn.open:
            self.begin_turn()
            turn = self._current()
            assert turn is not None
        match event:
            case TextDelta() | ThinkingDelta():
                if turn.first_delta is None:
                    turn.first_delta = trio.current_time()
                self._emit(_schema.delta(turn.number, event))
            case ToolCallStarted(call=call):
                self._emit(_schema.tool_started(turn.number, call, event.path))
            case ToolCallFinished(call=call, result=result):
                self._emit(_schema.tool_finished(turn.number, call, result, event.path))
            case ToolCallDeferred(call=call):
                self._emit(_schema.tool_deferred(turn.number, call, event.path))
            case ToolCallDelta():
                # Live only: a reconnecting page gets the call's card (tool_started), not
                # every piece of its arguments.
                self._fan_out(
                    _schema.encode(
                        _schema.tool_arguments(
                            turn.number, event.call_id, event.name, event.arguments_text, event.path
                        )
                    )
                )
            case ToolsFound(query=query, names=names):
                found = ", ".join(names) if names else "nothing"
                self._emit(
                    _schema.note(turn.number, f"searched tools for {query!r}: {found}", event.path)
                )
            case ToolsAdded():
                pass  # the ToolsFound note before it says which
            case ContextCompacted():
                self._emit(
                    _schema.note(
                        turn.number,
                        f"context compacted ({event.strategy}): ~{event.tokens_before} -> "
                        f"~{event.tokens_after} tokens, {event.removed} messages",
                        event.path,
                    )
                )
            case GuardPassed(guard=guard, kind=kind):
                self._emit(_schema.note(turn.number, f"{kind} guard {guard} passed", event.path))
            case GuardTripped(guard=guard, kind=kind, reason=reason, denied=denied):
                verdict = "denied a call" if denied else "stopped the turn"
                self._emit(
                    _schema.note(
                        turn.number, f"{kind} guard {guard} {verdict}: {reason}", event.path
                    )
                )
            case TurnCompleted(response=response):
                now = trio.current_time()
                self._close_turn(
                    turn,
                    {
                        "type": "turn_completed",
                        "text": response.text,
                        "stop_reason": _schema.stop_reason(response.stop_reason),
                        "usage": _schema.usage_json(response.usage),
                        "llm_calls": response.llm_calls,
                        "duration_s": round(now - turn.started, 6),
                        "first_delta_s": None
                        if turn.first_delta is None
                        else round(turn.first_delta - turn.started, 6),
                    },
                )
            case _:
                raise TypeError(f"not an agent event: {type(event).__name__}")

    def on_event(self, event: TelemetryEvent) -> None:
        """Take one telemetry event (the server is a telemetry ``Subscriber``).

        ``with agent.telemetry.subscribe(server):`` adds retries, model-call latency and usage,
        tool outcomes and durations, errors and actor restarts to the pages, as ``telemetry``
        events attached to the open turn (``turn`` null outside one). Never waits.
        """
        shown = _schema.telemetry_json(event)
        if shown is None:
            return
        turn = self._current()
        shown["turn"] = turn.number if turn is not None and turn.open else None
        self._emit(shown)

    def fail_turn(self, error: BaseException | str) -> None:
        """End the open turn on every page with an error (no-op when no turn is open)."""
        turn = self._current()
        if turn is None or not turn.open:
            return
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._close_turn(turn, {"type": "turn_failed", "error": message})

    async def relay(
        self, events: AsyncIterator[AgentEvent], *, prompt: str | Message | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Publish a streamed turn while passing its events on.

        ``async for event in server.relay(events, prompt=text): ...`` where ``events`` is
        what ``agent.stream(history)`` gave. The turn starts on the pages before the first
        event; an error (or cancellation) of the turn ends it there as failed and is raised.
        """
        self.begin_turn(prompt)
        try:
            async for event in events:
                self.publish(event)
                yield event
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                self.fail_turn("stopped" if self._stop_requested else "cancelled")
            else:
                self.fail_turn(exc)
            raise
        self.fail_turn("the stream ended without TurnCompleted")

    def approval_handler(
        self,
        *,
        timeout: float = 300.0,
        tools: Iterable[Tool] = (),
        annotations: Mapping[str, ToolAnnotations] | None = None,
    ) -> WebApproval:
        """An approval handler that asks the people on the pages.

        Args:
            timeout: seconds to wait for an answer; then the call is denied.
            tools: the agent's tools, whose ``annotations`` (where they have one) are shown.
            annotations: annotations by tool name (overrides what ``tools`` gives).

        Raises:
            ConfigError: ``timeout`` is not a positive, finite number of seconds.
        """
        check_seconds("timeout", timeout)
        table: dict[str, ToolAnnotations] = {}
        for tool in tools:
            found = getattr(tool, "annotations", None)
            if isinstance(found, ToolAnnotations):
                table[tool.name] = found
        table.update(annotations or {})
        return WebApproval(server=self, timeout=float(timeout), annotations=table)

    async def _ask(
        self,
        call: ToolUse,
        annotations: ToolAnnotations | None,
        seconds: float,
        path: tuple[str, ...] = (),
    ) -> bool | str:
        turn = self._current()
        number = turn.number if turn is not None and turn.open else None
        return await self._approvals.ask(call, annotations, seconds, turn=number, path=path)

    # -- turns and fan-out -----------------------------------------------------------------

    def _current(self) -> Turn | None:
        return self._log.current()

    def _close_turn(self, turn: Turn, event: dict[str, Any]) -> None:
        turn.open = False
        event["turn"] = turn.number
        self._emit(event)

    def _emit(self, event: dict[str, Any]) -> None:
        """Remember ``event`` for reconnecting pages and send it to every page."""
        self._log.remember(event)
        self._fan_out(_schema.encode(event))

    def _fan_out(self, encoded: str) -> None:
        for page in list(self._pages.values()):
            self._send_to(page, encoded)

    def _drop(self, page: Page) -> None:
        log.warning("web.page.dropped", page=page.number, buffer=self._page_buffer)
        page.dropped = True
        self._dropped += 1
        self._max_buffered = max(self._max_buffered, self._page_buffer)  # it was full
        self._detach(page)
        page.scope.cancel()

    def _attach(self, page: Page) -> None:
        hello = {
            "type": "hello",
            "page": page.number,
            "chat": self._chat,
            "sessions": self._sessions is not None,
            "session": self._opened,
            "limits": {
                "max_message_bytes": self._max_message_bytes,
                "max_chat_chars": self._max_chat_chars,
            },
            "replay": self._approvals.with_time_left(
                self._log.replay() + self._approvals.outside_turns()
            ),
        }
        page.send.send_nowait(_schema.encode(hello))
        self._pages[page.number] = page
        self._approvals.pages_changed()

    def _detach(self, page: Page) -> None:
        if self._pages.pop(page.number, None) is None:
            return
        page.send.close()
        self._approvals.pages_changed()

    def _error_to(self, page: Page, message: str) -> None:
        self._send_to(page, _schema.encode({"type": "error", "message": message}))

    def _on_message(self, page: Page, message: _schema.PageMessage) -> Awaitable[None] | None:
        match message:
            case _schema.ListSessions():
                return self._list_sessions(page)
            case _schema.OpenSession(session=identifier):
                return self._open_session(page, identifier)
            case _schema.Decision(id=identifier, approve=approve, reason=reason):
                self._approvals.answer(identifier, approve=approve, reason=reason)
            case _schema.Stop(turn=turn):
                self._stop(page, turn)
            case _schema.ChatInput(text=text):
                if self._prompt_send is None:
                    self._error_to(page, "this server does not take prompts")
                    return None
                try:
                    self._prompt_send.send_nowait(text)
                except trio.WouldBlock:
                    self._error_to(page, "busy: too many prompts waiting; try again")
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._error_to(page, "this server no longer takes prompts")
        return None

    async def _list_sessions(self, page: Page) -> None:
        if self._sessions is None:
            self._error_to(page, "this server keeps no sessions")
            return
        try:
            infos = await self._sessions.list()
        except KovaError as exc:
            self._error_to(page, f"the sessions cannot be listed: {exc}")
            return
        current = self.session
        self._send_to(
            page,
            _schema.encode(
                {
                    "type": "sessions",
                    "current": None if current is None else current.id,
                    "sessions": [
                        {
                            "id": info.id,
                            "title": info.title,
                            "updated": info.updated,
                            "messages": info.messages,
                            "pending": info.pending,
                        }
                        for info in infos[:_LISTED]
                    ],
                }
            ),
        )

    async def _open_session(self, page: Page, identifier: str | None) -> None:
        store = self._sessions
        if store is None:
            self._error_to(page, "this server keeps no sessions")
            return
        current = self._current()
        if current is not None and current.open:
            self._error_to(page, "a turn is running: wait for it (or stop it) first")
            return
        from ..sessions._store import check_session_id_text

        problem = None if identifier is None else check_session_id_text(identifier)
        if problem is not None:
            self._error_to(page, problem)
            return
        session = store.session(identifier if identifier is not None else _new_session_id())
        try:
            messages = await session.load()
            info = await session.info()
        except KovaError as exc:
            self._error_to(page, f"session {session.id!r} cannot be opened: {exc}")
            return
        if self._current() is not current or (current is not None and current.open):
            self._error_to(page, "a turn started meanwhile: try again when it ends")
            return
        self._session = session
        self._opened = {
            "type": "session",
            "id": session.id,
            "title": None if info is None else info.title,
            "earlier": max(0, len(messages) - _SHOWN),
            "messages": [_shown(message) for message in messages[-_SHOWN:]],
        }
        self._log.clear()  # a reconnecting page replays this conversation, not the last
        self._fan_out(_schema.encode(self._opened))

    def _send_to(self, page: Page, encoded: str) -> None:
        """Queue ``encoded`` for ``page`` (never waits: a page whose buffer is full is
        dropped; one already closing is skipped)."""
        try:
            page.send.send_nowait(encoded)
        except trio.WouldBlock:
            self._drop(page)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def _stop(self, page: Page, turn: int | None) -> None:
        current = self._current()
        if self._stoppable is None or current is None or not current.open:
            self._error_to(page, "no turn is running")
            return
        if turn is not None and turn != current.number:
            return  # a late press for a turn that already ended
        self._stop_requested = True
        self._stoppable.cancel(reason="stopped from the web page")

    @contextlib.contextmanager
    def stoppable(self) -> Iterator[trio.CancelScope]:
        """``with server.stoppable() as scope:`` around a relayed turn: the page's Stop
        button cancels ``scope`` (the turn ends on the pages as ``stopped``; check
        ``scope.cancelled_caught``). One turn at a time is stoppable.

        Raises:
            RuntimeError: another turn is stoppable already.
        """
        if self._stoppable is not None:
            raise RuntimeError("another turn is stoppable already; one at a time")
        scope = trio.CancelScope()
        self._stoppable, self._stop_requested = scope, False
        try:
            with scope:
                yield scope
        finally:
            self._stoppable = None

    # -- connections -----------------------------------------------------------------------

    @property
    def _netloc(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{host}:{self._port}"

    def _authorized(self, head: RequestHead) -> bool:
        if self._authorize is not None:
            request = WebRequest(path=head.path, query=head.query, headers=head.headers)
            try:
                return bool(self._authorize(request))
            except Exception as exc:  # the host's check: refuse this connection, serve on
                log.warning("web.authorize.failed", error=repr(exc))
                return False
        given = head.query.get("token", [""])[0]
        return secrets.compare_digest(given.encode(), self._token.encode())

    async def _run_page(self, connection: trio_websocket.WebSocketConnection) -> None:
        send, receive = trio.open_memory_channel[str](self._page_buffer)
        page = Page(number=next(self._page_numbers), send=send, scope=trio.CancelScope())
        self._attach(page)
        reason = CLOSE_NORMAL
        try:
            with page.scope:
                reason = await serve_page(
                    connection,
                    page,
                    receive,
                    flush_interval=self._flush_interval,
                    max_chat_chars=self._max_chat_chars,
                    on_message=self._on_message,
                    on_batch=self._note_batch,
                )
        finally:
            self._detach(page)
            if page.dropped:
                reason = CLOSE_TOO_SLOW
            await close_page(connection, reason)

    def _note_batch(self, size: int) -> None:
        if size > self._max_buffered:
            self._max_buffered = size


class WebApproval:
    """An approval handler (see :meth:`EventServer.approval_handler`): asks the pages.

    The pending call (tool, arguments, annotations) goes to every page; the first answer
    wins and every page sees it decided. No answer within ``timeout`` denies the call; so
    does having no page connected for the server's ``disconnect_grace``. A denial reaches
    the model in-band, with the person's reason when they gave one.
    """

    __slots__ = ("annotations", "server", "timeout")

    def __init__(
        self,
        *,
        server: EventServer,
        timeout: float,
        annotations: Mapping[str, ToolAnnotations] = EMPTY,
    ) -> None:
        self.server = server
        self.timeout = timeout
        self.annotations = annotations

    async def approve(self, call: ToolUse, *, path: tuple[str, ...] = ()) -> bool | str:
        """Wait for a person's decision on ``call``: ``True``, or the denial reason.

        ``path``: the tool-call ids that led to the call when an inner agent (an agent used
        as a tool, ``agent.as_tool()``) makes it; the page shows it inside that call's card.
        """
        return await self.server._ask(call, self.annotations.get(call.name), self.timeout, path)


_LISTED = 200
"""The most sessions a page is sent (the most recently updated)."""

_SHOWN = 200
"""The most messages of an opened session a page is sent (the latest; the page says how
many earlier ones it does not show)."""


def _new_session_id() -> str:
    return f"web-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def _shown(message: Message) -> dict[str, Any]:
    """A stored message as an opened session's page shows it: who, and its text (tool calls
    and results named, media by their labels)."""
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, Text):
            parts.append(block.text)
        elif isinstance(block, ToolUse):
            parts.append(f"[called {block.name}]")
        elif isinstance(block, ToolResult):
            parts.append(f"[{'error from' if block.is_error else 'result of'} a tool call]")
        elif (label := attachment_label(block)) is not None:
            parts.append(f"[{label}]")
    return {"role": message.role.value, "text": "\n".join(parts)}


def close_pages(server: EventServer) -> None:
    """Close ``server`` to new pages, deny what waits for approval, end every page."""
    server._closed = True
    server._approvals.deny_all("the web view closed", by="closed")
    for page in list(server._pages.values()):
        page.scope.cancel()


@asynccontextmanager
async def open_hosted_event_server(
    host: str,
    port: int,
    *,
    token: str | None = None,
    chat: bool = False,
    **options: Any,
) -> AsyncIterator[EventServer]:
    """An event server whose page and WebSocket another HTTP server serves (``kova serve``
    mounts them on :func:`kova.serve.app` with :func:`kova.web._asgi.routes`).

    ``host`` and ``port``: where that server listens (the host and origin checks compare
    requests with them). Options as :func:`open_event_server`'s.
    """
    server = EventServer(token=token, chat=chat, **options)
    server._host, server._port = host, port
    try:
        yield server
    finally:
        close_pages(server)
