"""The metrics actor and :class:`MetricsCollector`, the handle records go into (an agent's
through its :class:`~kova.telemetry.MetricsSubscriber`, a subscriber of its event stream).

Recording must never slow an agent down, so every ``record_*`` method is a synchronous
``cast`` into the actor's bounded mailbox: it never waits. If the mailbox is full (the actor
is behind) or closed (the actor stopped), the record is dropped and counted, and
:attr:`MetricsSnapshot.dropped_records` reports how many. Reading is a ``call``:
``await collector.snapshot()``. Because casts and calls travel through one mailbox in order
and the actor serves them one at a time, a snapshot sees every record cast before it.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING

import trio

from .._errors import MailboxClosed
from .._models import Usage
from .._record import Record, evolve, set_field
from ..actors import Actor, Call, UnknownMessage
from ._metrics import DEFAULT_BOUNDS_MS, Metrics, MetricsSnapshot, ToolOutcome

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from ..actors import ActorRef, Runtime

__all__ = ["MetricsCollector", "open_metrics"]

DEFAULT_METRICS_MAILBOX_SIZE = 256
"""Records that may queue before new ones are dropped. Each is served in microseconds, so
only a burst far beyond any agent's rate (or a stopped actor) fills it."""


def _milliseconds(name: str, value: float | None) -> None:
    """A record's time, checked in the caller's task: a value the actor cannot add up (a
    ``str``, NaN, a negative time) would otherwise crash it, and a restart loses every count."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of milliseconds, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")


class LlmRequestRecorded(Record):
    """A provider call returned (cast)."""

    latency_ms: float
    usage: Usage | None

    def __init__(self, *, latency_ms: float, usage: Usage | None = None) -> None:
        if latency_ms is None:
            raise TypeError("latency_ms must be a number of milliseconds, got None")
        _milliseconds("latency_ms", latency_ms)
        if usage is not None and not isinstance(usage, Usage):
            raise TypeError(
                "usage must be a kova.Usage (record_llm_request(latency_ms, "
                f"Usage(input_tokens=..., output_tokens=...))), got {type(usage).__name__}"
            )
        set_field(self, "latency_ms", latency_ms)
        set_field(self, "usage", usage)


class LlmErrorRecorded(Record):
    """A provider call failed (cast)."""


class ToolInvocationRecorded(Record):
    """A tool call ended (cast). ``duration_ms`` is ``None`` for a denied call."""

    duration_ms: float | None
    outcome: ToolOutcome

    def __init__(self, *, duration_ms: float | None, outcome: ToolOutcome | str) -> None:
        _milliseconds("duration_ms", duration_ms)
        set_field(self, "duration_ms", duration_ms)
        set_field(self, "outcome", ToolOutcome(outcome))


class GetSnapshot(Record, Call["MetricsSnapshot"]):
    """Ask for a :class:`MetricsSnapshot` (call)."""


MetricsEvent = LlmRequestRecorded | LlmErrorRecorded | ToolInvocationRecorded


class MetricsActor(Actor):
    """Owns one :class:`Metrics`; fed by casts of the ``*Recorded`` events, answers
    :class:`GetSnapshot` calls. A restart starts from zero (the counts are not persisted).

    Args:
        latency_bounds: bucket bounds (ms) of the LLM latency histogram.
        duration_bounds: bucket bounds (ms) of the tool duration histogram.
    """

    concurrent = False  # one message at a time, in mailbox order: snapshots see prior casts

    def __init__(
        self,
        *,
        latency_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
        duration_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
    ) -> None:
        self._metrics = Metrics(latency_bounds=latency_bounds, duration_bounds=duration_bounds)

    async def handle_cast(self, message: object) -> None:
        match message:
            case LlmRequestRecorded(latency_ms=latency_ms, usage=usage):
                self._metrics.record_llm_request(latency_ms, usage)
            case LlmErrorRecorded():
                self._metrics.record_llm_error()
            case ToolInvocationRecorded(duration_ms=duration_ms, outcome=outcome):
                self._metrics.record_tool_invocation(duration_ms, outcome)
            case _:
                raise UnknownMessage(self.name, message, kind="cast")

    async def handle_call(self, message: object) -> MetricsSnapshot:
        match message:
            case GetSnapshot():
                return self._metrics.snapshot()
            case _:
                raise UnknownMessage(self.name, message)


class MetricsCollector:
    """The handle to a running metrics actor: record without waiting, read with ``await``.

    Create one with :func:`open_metrics` (standalone or on a runtime) or
    :meth:`MetricsCollector.spawn`, and give it to ``AgentBuilder.metrics(...)``; the agent
    then subscribes a :class:`~kova.telemetry.MetricsSubscriber` to its turns, which records
    every LLM call and tool call into it.

    Use it from trio tasks of the thread that runs the actor (it keeps a plain drop counter,
    which needs no lock there: nothing in it awaits).
    """

    __slots__ = ("_dropped", "_ref")

    def __init__(self, ref: ActorRef) -> None:
        self._ref = ref
        self._dropped = 0

    @classmethod
    async def spawn(
        cls,
        runtime: Runtime,
        *,
        name: str | None = None,
        mailbox_size: int = DEFAULT_METRICS_MAILBOX_SIZE,
        latency_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
        duration_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
    ) -> MetricsCollector:
        """Start a metrics actor on ``runtime``; it lives until the runtime closes (or
        ``runtime.stop(collector.ref)``).

        Args:
            runtime: where the actor runs.
            name: the actor's name; by default ``metrics`` (``metrics-2``... if taken).
            mailbox_size: records that may queue before new ones are dropped.
            latency_bounds: bucket bounds (ms) of the LLM latency histogram.
            duration_bounds: bucket bounds (ms) of the tool duration histogram.
        """

        def metrics() -> MetricsActor:
            return MetricsActor(latency_bounds=latency_bounds, duration_bounds=duration_bounds)

        ref = await runtime.spawn(metrics, name=name, mailbox_size=mailbox_size)
        return cls(ref)

    @property
    def ref(self) -> ActorRef:
        """The metrics actor's ref."""
        return self._ref

    @property
    def dropped_records(self) -> int:
        """Records this handle could not deliver (mailbox full or actor stopped)."""
        return self._dropped

    def record_llm_request(self, latency_ms: float, usage: Usage | None = None) -> None:
        """Count one provider call that returned. Never waits.

        Raises:
            TypeError: ``latency_ms`` is not a number, or ``usage`` not a :class:`~kova.Usage`.
            ValueError: ``latency_ms`` is NaN or negative.
        """
        self._cast(LlmRequestRecorded(latency_ms=latency_ms, usage=usage))

    def record_llm_error(self) -> None:
        """Count one failed provider call. Never waits."""
        self._cast(LlmErrorRecorded())

    def record_tool_invocation(
        self, duration_ms: float | None, outcome: ToolOutcome | str | bool
    ) -> None:
        """Count one tool call. Never waits.

        Args:
            duration_ms: how long it ran; ``None`` for a denied call.
            outcome: a :class:`ToolOutcome` (or its string value, e.g. ``"denied"``), or
                ``True``/``False`` for success/error (the seed's signature).

        Raises:
            TypeError: ``duration_ms`` is not a number (or ``None``).
            ValueError: ``duration_ms`` is NaN or negative, or ``outcome`` is not an outcome.
        """
        if isinstance(outcome, bool):
            outcome = ToolOutcome.SUCCESS if outcome else ToolOutcome.ERROR
        self._cast(ToolInvocationRecorded(duration_ms=duration_ms, outcome=outcome))

    async def snapshot(self) -> MetricsSnapshot:
        """Everything recorded so far, including the records cast before this call.

        Cancellation: safe; nothing is changed.

        Raises:
            MailboxClosed: the metrics actor is stopped.
        """
        snapshot: MetricsSnapshot = await self._ref.call(GetSnapshot())
        return evolve(snapshot, dropped_records=snapshot.dropped_records + self._dropped)

    def _cast(self, message: MetricsEvent) -> None:
        try:
            self._ref.cast(message)
        except (trio.WouldBlock, MailboxClosed):
            self._dropped += 1


@contextlib.asynccontextmanager
async def open_metrics(
    *,
    runtime: Runtime | None = None,
    mailbox_size: int = DEFAULT_METRICS_MAILBOX_SIZE,
    latency_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
    duration_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
) -> AsyncIterator[MetricsCollector]:
    """``async with open_metrics() as collector:`` a metrics actor for the block.

    Without ``runtime`` it opens a runtime of its own; with one, it spawns the actor there.
    Either way the actor stops when the block ends; records made after that are dropped
    (and counted), and :meth:`MetricsCollector.snapshot` raises :class:`~kova.MailboxClosed`.

    Args:
        runtime: a runtime the application already runs.
        mailbox_size: records that may queue before new ones are dropped.
        latency_bounds: bucket bounds (ms) of the LLM latency histogram.
        duration_bounds: bucket bounds (ms) of the tool duration histogram.
    """
    async with contextlib.AsyncExitStack() as own:
        if runtime is None:
            from ..actors import open_runtime

            runtime = await own.enter_async_context(open_runtime(name="metrics"))
        collector = await MetricsCollector.spawn(
            runtime,
            mailbox_size=mailbox_size,
            latency_bounds=latency_bounds,
            duration_bounds=duration_bounds,
        )
        try:
            yield collector
        finally:
            # Bounded by the child's shutdown grace; shielded so a cancelled block still
            # stops it (before its own runtime, if it has one, closes).
            with trio.CancelScope(shield=True):
                await runtime.stop(collector.ref)
