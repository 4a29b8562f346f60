"""The telemetry event stream: typed events, the hub subscribers attach to, the per-turn
emitter. Public names are re-exported by :mod:`kova.telemetry`.

This module imports nothing of kova but the models, so that every layer (the agent, the
tool pool, the provider actor's retry policy, the supervisor, MCP requests) can emit into
it without an import cycle.

**Cost when nobody listens.** A turn asks its hub for an emitter once; with no subscriber
(and no process-wide one, such as OpenTelemetry attached with
:func:`kova.telemetry.otel.instrument`) that is ``None``, and every emission site is a
single ``if emitter is not None``. No event object is built, no clock is read, nothing extra
is carried to an actor.

**Parent-child links.** Every event that starts something carries a fresh ``span_id`` and
the ``parent_id`` of what it belongs to (a provider call and a tool call belong to their
turn, an MCP request to the tool call it was made from). The ids are handed on explicitly
(a tool call's parent to the tool step, the model call's span to the admission that decides
its retries), never through trio's context, which is copied only when a task is spawned.
Inside a tool call's own task the current emitter and span are in a context variable
(:func:`current_scope`), which is how an MCP request made by a tool finds its parent.
"""

from __future__ import annotations

import contextvars
import enum
import math
import random
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, runtime_checkable

import trio

from ._errors import check_seconds
from ._log import get_logger
from ._record import Record

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from types import TracebackType

    from ._models import ToolResult, ToolUse, Usage

__all__ = [
    "ToolOutcome",
    "ActorRestarted",
    "GuardFinished",
    "GuardStarted",
    "McpRequestFinished",
    "McpRequestStarted",
    "ModelCallFallback",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "ModelFirstToken",
    "Outcome",
    "Subscriber",
    "Subscription",
    "SupervisorGaveUp",
    "TelemetryEvent",
    "TelemetryHub",
    "ToolExecutionStarted",
    "ToolFinished",
    "ToolStarted",
    "TurnEmitter",
    "TurnFinished",
    "TurnStarted",
    "current_scope",
    "new_span_id",
]

log = get_logger(__name__)

AWAIT_TIMEOUT = 30.0
"""How long a turn waits for an async subscriber by default, in seconds (see
:meth:`TurnEmitter.emit_and_wait`)."""


Outcome: TypeAlias = Literal["ok", "error", "cancelled"]
"""How a turn, provider call or MCP request ended."""


def new_span_id() -> int:
    """A random non-zero 64-bit id for a span of the event stream."""
    return random.getrandbits(64) or 1


# -- events -------------------------------------------------------------------------------


class ToolOutcome(enum.StrEnum):
    """How one tool call ended."""

    SUCCESS = "success"
    """The tool returned a result that is not an error."""
    ERROR = "error"
    """The tool raised, returned an error result, was unknown or got invalid arguments."""
    DENIED = "denied"
    """The approval handler refused the call; the tool never ran."""
    DEFERRED = "deferred"
    """The call was left to a person's decision (deferred approval); it has not run."""


class TurnStarted(Record):
    """An agent turn began."""

    turn_id: int
    """The turn's span id; every event of the turn carries it."""
    time: float
    """``trio.current_time()`` when it happened (every event is on trio's clock)."""
    agent: str
    """The agent's name (``invoke_agent {agent}``)."""
    provider: str
    model: str | None
    streamed: bool
    parent_id: int | None = None
    """The tool call that runs this turn (an agent used as a tool, ``agent.as_tool()``),
    when that call is observed; ``None`` for a turn the application started."""


class TurnFinished(Record):
    """An agent turn ended, whatever the outcome (also when cancelled)."""

    turn_id: int
    time: float
    outcome: Outcome
    error_type: str | None = None
    """The exception class name when ``outcome`` is ``"error"``."""
    usage: Usage | None = None
    """Summed over the turn's provider calls that returned."""
    llm_calls: int = 0


class ModelCallStarted(Record):
    """A provider call of the turn began (``chat {model}``)."""

    turn_id: int
    span_id: int
    parent_id: int
    """The turn."""
    time: float
    provider: str
    model: str | None
    max_tokens: int | None = None
    temperature: float | None = None
    streamed: bool = False


class ModelFirstToken(Record):
    """The first content of a streamed provider call reached the turn."""

    turn_id: int
    span_id: int
    time: float
    latency: float
    """Seconds since the call's :class:`ModelCallStarted`."""


class ModelCallRetrying(Record):
    """An attempt of a provider call failed and the provider actor's retry policy will try
    again after ``wait`` seconds. Emitted from the provider actor's task."""

    turn_id: int
    span_id: int
    """The provider call."""
    time: float
    attempt: int
    """The attempt that failed (1 for the first)."""
    error_type: str
    """The exception class name (``RateLimitedError``...)."""
    error_class: str | None
    """The provider's :class:`~kova.ProviderErrorClass` value, if a provider error."""
    wait: float
    """Seconds before the next attempt."""


class ModelCallFallback(Record):
    """A provider call moved on to the next provider of a
    :class:`~kova.providers.FallbackProvider`: the one before failed with an error its ``on``
    matches (after its own retries), or its rate-limit gate was closed (``error_type`` is
    then ``None``). Emitted from the caller's task."""

    turn_id: int
    span_id: int
    """The provider call."""
    time: float
    from_provider: str
    to_provider: str
    error_type: str | None
    """The exception class name; ``None`` when skipped for a closed rate-limit gate."""
    error_class: str | None
    """The provider's :class:`~kova.ProviderErrorClass` value, if a provider error."""


class ModelCallFinished(Record):
    """A provider call ended, whatever the outcome."""

    turn_id: int
    span_id: int
    time: float
    outcome: Outcome
    latency: float
    """Seconds since the call's :class:`ModelCallStarted` (retries included)."""
    error_type: str | None = None
    usage: Usage | None = None
    stop_reason: str | None = None
    """The normalized stop kind (``end_turn``, ``tool_use``...)."""
    response_model: str | None = None
    """The model that answered, as the provider named it
    (:attr:`kova.providers.ModelResponse.model`)."""
    response_id: str | None = None
    """The provider's id of the answer (:attr:`kova.providers.ModelResponse.id`)."""
    retried: bool = False
    """``True`` when this call was one attempt, failed, that will be made again as a call of
    its own (a model activity Temporal retries, see ``kova.temporal``): its
    :class:`ModelCallRetrying` came first and counts the failure."""


class ToolStarted(Record):
    """The tool pool took a tool call (before lookup, validation and approval)."""

    turn_id: int
    span_id: int
    parent_id: int
    """The turn."""
    time: float
    call: ToolUse


class ToolExecutionStarted(Record):
    """The tool itself begins to run: the call passed lookup, validation and approval and has
    a slot of the pool (a lifecycle hook's ``on_tool_start``). Denied, deferred and invalid
    calls never get one."""

    turn_id: int
    span_id: int
    """The tool call (its :class:`ToolStarted`'s span)."""
    time: float
    call: ToolUse


class ToolFinished(Record):
    """A tool call ended, whatever the outcome (also when cancelled)."""

    turn_id: int
    span_id: int
    time: float
    call: ToolUse
    outcome: Literal["success", "error", "denied", "deferred", "cancelled"]
    approved: bool | None
    """The approval outcome: ``None`` when no approval ran (no handler, or the call failed
    its checks first), else the handler's decision."""
    duration: float | None
    """Seconds the tool itself ran (``None`` if it never ran)."""
    error: str | None = None
    """The error text of an error result."""
    result: ToolResult | None = None
    """What goes back to the model (``None`` when cancelled). Content: OpenTelemetry records
    it only with ``capture_content``."""


class GuardStarted(Record):
    """A guard's check began (``guard {name}``): an input guard once per turn, an output
    guard at each check of the streamed text and of the answer, a tool guard per call."""

    turn_id: int
    span_id: int
    parent_id: int
    """The turn."""
    time: float
    guard: str
    """The guard's name."""
    kind: Literal["input", "output", "tool"]
    call_id: str = ""
    """The tool call a tool guard checks."""


class GuardFinished(Record):
    """A guard's check ended, whatever the outcome."""

    turn_id: int
    span_id: int
    time: float
    outcome: Literal["pass", "trip", "deny", "error", "cancelled"]
    """``pass``, ``trip`` (the turn stops), ``deny`` (a tool guard answered the call
    in-band), ``error`` (the check raised: the turn fails with its error) or ``cancelled``
    (the turn ended first: another guard tripped, or the turn failed or was cancelled)."""
    reason: str | None = None
    """A trip's or a denial's reason."""
    error_type: str | None = None
    """The exception class name when ``outcome`` is ``"error"``."""


class McpRequestStarted(Record):
    """A request to an MCP server began (from a tool call of the turn, or outside any)."""

    turn_id: int
    span_id: int
    parent_id: int
    """The tool call it was made from (or the turn)."""
    time: float
    connection: str
    method: str
    """The MCP method, e.g. ``tools/call``."""
    target: str | None = None
    """The tool, prompt or resource it names, if any."""


class McpRequestFinished(Record):
    """An MCP request ended, whatever the outcome."""

    turn_id: int
    span_id: int
    time: float
    outcome: Outcome
    error_type: str | None = None


class ActorRestarted(Record):
    """A supervisor restarted a crashed (or stopped permanent) child."""

    time: float
    supervisor: str
    actor: str
    restarts: int
    """How many times this child has been restarted."""
    delay: float


class SupervisorGaveUp(Record):
    """A supervisor exceeded its restart intensity and stops every child (an intensity
    trip)."""

    time: float
    supervisor: str
    actor: str
    max_restarts: int
    within: float
    error_type: str | None


TelemetryEvent: TypeAlias = (
    TurnStarted
    | TurnFinished
    | ModelCallStarted
    | ModelFirstToken
    | ModelCallRetrying
    | ModelCallFallback
    | ModelCallFinished
    | ToolStarted
    | ToolExecutionStarted
    | ToolFinished
    | GuardStarted
    | GuardFinished
    | McpRequestStarted
    | McpRequestFinished
    | ActorRestarted
    | SupervisorGaveUp
)
"""Everything kova reports: a closed union (dispatch with ``match``)."""


# -- subscribers ----------------------------------------------------------------------------


@runtime_checkable
class Subscriber(Protocol):
    """Receives every event of the hub it subscribed to.

    ``on_event`` is called synchronously, in the task where the event happened (the turn's,
    a tool call's, the provider actor's, a supervisor's): it must be quick and must not
    block. An exception it raises is logged (``telemetry.subscriber.failed``) and changes
    nothing. To process events in a task of your own, use :meth:`TelemetryHub.stream`.

    It may return an awaitable for the two events emitted where the tool call can wait,
    :class:`ToolExecutionStarted` and :class:`ToolFinished` of a call that ran: the tool
    pool awaits it in the call's task before going on (this is how an async lifecycle hook
    is served, see :class:`~kova.agent.LifecycleSubscriber`). Anywhere else an awaitable is
    closed unawaited and logged (``telemetry.subscriber.not_awaited``).
    """

    def on_event(self, event: TelemetryEvent) -> Awaitable[None] | None: ...


Deliver: TypeAlias = "Callable[[TelemetryEvent], Awaitable[None] | None]"


class Subscription:
    """A subscriber's registration; :meth:`close` (or leaving ``with``) unsubscribes."""

    __slots__ = ("_deliver", "_hub")

    def __init__(self, hub: TelemetryHub, deliver: Deliver) -> None:
        self._hub: TelemetryHub | None = hub
        self._deliver = deliver

    @property
    def active(self) -> bool:
        """Whether the subscriber still receives events."""
        return self._hub is not None

    def close(self) -> None:
        """Unsubscribe (idempotent)."""
        hub, self._hub = self._hub, None
        if hub is not None:
            hub._remove(self._deliver)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class TelemetryHub:
    """Where kova's events go: subscribe here to observe turns (and, given to the runtime,
    actor restarts and supervisor give-ups).

    Every :class:`~kova.Agent` has one (``agent.telemetry``; pass your own with
    ``AgentBuilder.telemetry(hub)`` to share one between agents). Its
    :class:`~kova.telemetry.MetricsCollector` is a subscriber; so is OpenTelemetry once
    :func:`kova.telemetry.otel.instrument` attached it (see ``docs/telemetry.md``).

    Subscribing changes nothing for turns already running: a turn takes the subscribers
    present when it starts.
    """

    __slots__ = ("_subscribers", "await_timeout")

    def __init__(self, *, await_timeout: float = AWAIT_TIMEOUT) -> None:
        """Args:
        await_timeout: how long a turn waits, in seconds, for an async subscriber (an
            async lifecycle hook) that returned an awaitable: past it the awaitable is
            cancelled, the event is dropped for that subscriber (logged as
            ``telemetry.subscriber.timed_out``) and the tool call goes on.

        Raises:
            ConfigError: ``await_timeout`` is not a positive, finite number of seconds.
        """
        check_seconds("await_timeout", await_timeout)
        self._subscribers: tuple[Deliver, ...] = ()
        self.await_timeout = await_timeout

    @property
    def listening(self) -> bool:
        """Whether anything would receive an event now."""
        return bool(self._subscribers or _process_subscribers)

    def subscribe(self, subscriber: Subscriber | Deliver) -> Subscription:
        """Deliver every event to ``subscriber`` (a :class:`Subscriber` or a plain callable
        taking the event) until the returned subscription is closed.

        Raises:
            TypeError: ``subscriber`` is neither.
        """
        if isinstance(subscriber, Subscriber):
            deliver: Deliver = subscriber.on_event
        elif callable(subscriber):
            deliver = subscriber
        else:
            raise TypeError(
                "subscriber must have on_event(event) or be a callable, "
                f"got {type(subscriber).__name__}"
            )
        self._subscribers = (*self._subscribers, deliver)
        return Subscription(self, deliver)

    @asynccontextmanager
    async def stream(
        self, *, buffer: int = 1024
    ) -> AsyncIterator[trio.MemoryReceiveChannel[TelemetryEvent]]:
        """``async with hub.stream() as events: async for event in events`` in a task of
        your own (a live view, a log shipper).

        The turn never waits for a slow reader: while ``buffer`` events are waiting, newer
        ones are dropped; how many is logged (``telemetry.stream.dropped``) when the block
        ends. Leaving the block unsubscribes.

        Raises:
            ValueError: ``buffer`` is below 1.
        """
        if buffer < 1:
            raise ValueError(f"buffer must be at least 1, got {buffer}")
        send, receive = trio.open_memory_channel[TelemetryEvent](buffer)
        sink = _ChannelSink(send)
        with receive, self.subscribe(sink.on_event):
            try:
                yield receive
            finally:
                send.close()
                if sink.dropped:
                    log.warning("telemetry.stream.dropped", dropped=sink.dropped)

    def emitter(self, extra: tuple[Deliver, ...] = ()) -> TurnEmitter | None:
        """The emitter of a new turn, or ``None`` when nobody listens (then emit nothing).

        ``extra`` subscribers hear this turn only (an agent's own metrics collector, when
        several agents share the hub)."""
        subscribers = self._subscribers + extra if extra else self._subscribers
        if _process_subscribers:
            subscribers = subscribers + _process_subscribers
        if not subscribers:
            return None
        return TurnEmitter(new_span_id(), subscribers, await_timeout=self.await_timeout)

    def emit(self, event: TelemetryEvent) -> None:
        """Deliver one event outside any turn (the supervisor's)."""
        _deliver_all(self._subscribers + _process_subscribers, event)

    def _remove(self, deliver: Deliver) -> None:
        self._subscribers = tuple(item for item in self._subscribers if item is not deliver)


_process_subscribers: tuple[Deliver, ...] = ()
"""Subscribers every hub in the process delivers to, after its own (OpenTelemetry, once
:func:`kova.telemetry.otel.instrument` attached it). Read once per turn."""


def attach_process_subscriber(deliver: Deliver) -> None:
    """Deliver every hub's events to ``deliver`` too, from the next turn on (idempotent)."""
    global _process_subscribers
    if deliver not in _process_subscribers:
        _process_subscribers = (*_process_subscribers, deliver)


def detach_process_subscriber(deliver: Deliver) -> None:
    """Undo :func:`attach_process_subscriber` (idempotent)."""
    global _process_subscribers
    _process_subscribers = tuple(item for item in _process_subscribers if item != deliver)


class _ChannelSink:
    __slots__ = ("_send", "dropped")

    def __init__(self, send: trio.MemorySendChannel[TelemetryEvent]) -> None:
        self._send = send
        self.dropped = 0

    def on_event(self, event: TelemetryEvent) -> None:
        try:
            self._send.send_nowait(event)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self.dropped += 1


HOST_CODE_FAULTS = (Exception, SystemExit, GeneratorExit)
"""What code the host gives kova to call back (a telemetry subscriber, a lifecycle hook, which
is one, an MCP client's callbacks) may raise without changing anything but that call:
``sys.exit()`` in such a function ends that call only, not the turn, the connection or the
program. Ctrl-C and trio's ``Cancelled`` go on as themselves."""


def stray_cancel(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``trio.Cancelled`` that no cancellation of this task explains:
    code the host gave kova (a provider, a tool, a hook, a subscriber) raised one it kept
    from elsewhere. Passed on, it looks like a cancellation to whoever catches it: an outer
    scope being cancelled swallows it (the caller's error vanishes), and an actor's task
    stops. A real cancellation keeps the task's effective deadline at ``-inf`` until the
    cancelled scope catches it."""
    return isinstance(exc, trio.Cancelled) and trio.current_effective_deadline() != -math.inf


_SUBSCRIBER_FAULTS = (*HOST_CODE_FAULTS, trio.Cancelled)


def _subscriber_failed(event: TelemetryEvent, exc: BaseException) -> None:
    """A subscriber must never change the turn: what it raised is logged, except a real
    cancellation of this task (re-raised), which goes on."""
    if isinstance(exc, trio.Cancelled) and not stray_cancel(exc):
        raise exc
    log.warning("telemetry.subscriber.failed", event_type=type(event).__name__, error=repr(exc))


def _deliver_all(subscribers: tuple[Deliver, ...], event: TelemetryEvent) -> None:
    for deliver in subscribers:
        try:
            pending = deliver(event)
        except _SUBSCRIBER_FAULTS as exc:
            _subscriber_failed(event, exc)
        else:
            if pending is not None:  # emitted where nothing may wait
                _not_awaited(pending, event)


def _not_awaited(pending: Awaitable[None], event: TelemetryEvent) -> None:
    close = getattr(pending, "close", None)
    if callable(close):
        close()  # a coroutine: no "never awaited" warning, and its body never runs
    log.warning("telemetry.subscriber.not_awaited", event_type=type(event).__name__)


class TurnEmitter:
    """Delivers one turn's events to the subscribers present when it started."""

    __slots__ = ("_subscribers", "await_timeout", "turn_id")

    def __init__(
        self,
        turn_id: int,
        subscribers: tuple[Deliver, ...],
        *,
        await_timeout: float = AWAIT_TIMEOUT,
    ) -> None:
        self.turn_id = turn_id
        self._subscribers = subscribers
        self.await_timeout = await_timeout

    def emit(self, event: TelemetryEvent) -> None:
        """Deliver ``event`` to every subscriber, in order."""
        _deliver_all(self._subscribers, event)

    async def emit_and_wait(self, event: TelemetryEvent) -> None:
        """Deliver ``event`` to every subscriber, in order, awaiting what each returns (the
        tool pool's :class:`ToolExecutionStarted` and :class:`ToolFinished`, where the call
        can wait). A failure of a subscriber is logged and changes nothing; one that has not
        returned within :attr:`await_timeout` is cancelled and logged
        (``telemetry.subscriber.timed_out``: the event is dropped for it), so a hook that
        never returns cannot hang the turn; a cancellation of the caller propagates."""
        for deliver in self._subscribers:
            try:
                pending = deliver(event)
                if pending is not None:
                    with trio.move_on_after(self.await_timeout) as scope:
                        await pending
                    if scope.cancelled_caught:
                        log.warning(
                            "telemetry.subscriber.timed_out",
                            event_type=type(event).__name__,
                            timeout=self.await_timeout,
                        )
            except _SUBSCRIBER_FAULTS as exc:
                _subscriber_failed(event, exc)


# -- the scope of a tool call -----------------------------------------------------------------

_scope: contextvars.ContextVar[tuple[TurnEmitter, int] | None] = contextvars.ContextVar(
    "kova_telemetry_scope", default=None
)


def current_scope() -> tuple[TurnEmitter, int] | None:
    """The emitter and the span id of the tool call running in this task, if observed."""
    return _scope.get()


@contextmanager
def tool_scope(emitter: TurnEmitter, span_id: int) -> Iterator[None]:
    """Mark this task as running tool call ``span_id`` (for MCP requests it makes)."""
    token = _scope.set((emitter, span_id))
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def observe_mcp_request(connection: str, method: str, target: str | None) -> Iterator[None]:
    """Emit McpRequestStarted/Finished around an MCP request made from an observed tool
    call; nothing at all otherwise."""
    scope = _scope.get()
    if scope is None:
        yield
        return
    emitter, parent = scope
    span_id = new_span_id()
    emitter.emit(
        McpRequestStarted(
            turn_id=emitter.turn_id,
            span_id=span_id,
            parent_id=parent,
            time=trio.current_time(),
            connection=connection,
            method=method,
            target=target,
        )
    )
    outcome: Outcome = "error"
    error_type: str | None = None
    try:
        yield
        outcome = "ok"
    except trio.Cancelled:
        outcome = "cancelled"
        raise
    except BaseException as exc:
        error_type = type(exc).__name__
        raise
    finally:
        emitter.emit(
            McpRequestFinished(
                turn_id=emitter.turn_id,
                span_id=span_id,
                time=trio.current_time(),
                outcome=outcome,
                error_type=error_type,
            )
        )
