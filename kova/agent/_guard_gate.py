"""The guards of one turn at work (:class:`GuardGate`), for the in-process driver.

Input guards that are not ``blocking`` run as tasks beside the turn, in a nursery of the frame
that iterates the driver (``run_turn``, or the producer task of a streamed turn with guards):
the driver itself is an async generator and holds no nursery across a ``yield``. The driver
enters :meth:`GuardGate.guarding` around each await of a model call (no ``yield`` inside), so
a guard that trips cancels the call in flight at once through that scope; it waits for the
input guards (:meth:`GuardGate.passed`) before any tool runs and before it answers.

Without a nursery the concurrent input guards run before the first model call instead:
slower, never less safe (every in-process driver gives one: ``run_turn``, a streamed turn's
producer task, the tool call that runs an agent used as a tool).

Each decision is recorded in the turn core the moment it is made (``_guard_record``) and the
turn saved through the step observer (the journal), so a turn run again from its record
runs no guard that already decided, and a tripped turn stays tripped. Each check is a span
(``GuardStarted`` / ``GuardFinished``) when somebody listens.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import trio

from .._errors import GuardrailTripped
from .._messages import ToolResult
from .._observe import GuardFinished, GuardStarted, new_span_id
from .._stream_events import TextDelta
from ._guard_record import GuardRecord, GuardVerdict
from ._guards import (
    Deny,
    GuardPassed,
    GuardTripped,
    InputGuard,
    OutputGuard,
    ToolGuard,
    Trip,
    check_outcome,
    input_text,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Sequence

    from .._messages import ToolUse
    from .._models import StreamEvent
    from .._observe import TurnEmitter
    from ._events import AgentEvent
    from ._guards import Guard
    from ._turn import Turn

__all__ = ["GuardGate", "concurrent", "input_text"]

_SENTENCE_ENDS = frozenset(".!?\n")


def concurrent(guards: Sequence[Guard]) -> bool:
    """Whether ``guards`` has an input guard that runs beside the model call (a nursery)."""
    return any(isinstance(guard, InputGuard) and not guard.blocking for guard in guards)


class GuardGate:
    """One turn's guards: the input guards' tasks and verdicts, the output guards' progress
    through the streamed text, and the tool guards. Its state changes only between
    checkpoints (plain attributes, read and written by the turn's task and its guard
    tasks)."""

    __slots__ = (
        "_checked",
        "_done",
        "_emitter",
        "_events",
        "_failure",
        "_inputs",
        "_left",
        "_length",
        "_nursery",
        "_on_trip",
        "_outputs",
        "_pieces",
        "_save",
        "_scope",
        "_text",
        "_tools",
        "_turn",
        "started",
    )

    @classmethod
    def of(
        cls,
        guards: Sequence[Guard],
        turn: Turn,
        nursery: trio.Nursery | None,
        *,
        save: Callable[[Turn], Awaitable[None]] | None = None,
        emitter: TurnEmitter | None = None,
        on_trip: Callable[[BaseException], None] | None = None,
    ) -> GuardGate | None:
        """The gate of ``turn`` with ``guards`` (``None`` without any, unless the turn
        recorded a trip), its concurrent input guards to run in ``nursery``; ``save``
        records the turn after a decision (the step observer's), ``emitter`` reports each
        check as a span, ``on_trip`` is told of a trip the moment it happens (a streamed
        turn's consumer drops the events it holds)."""
        if not guards and turn.guard_tripped() is None:
            return None
        gate = cls(guards, input_text(turn.history), nursery, turn, save, emitter)
        gate._on_trip = on_trip
        return gate

    def __init__(
        self,
        guards: Sequence[Guard],
        text: str,
        nursery: trio.Nursery | None = None,
        turn: Turn | None = None,
        save: Callable[[Turn], Awaitable[None]] | None = None,
        emitter: TurnEmitter | None = None,
    ) -> None:
        self._nursery = nursery
        self._on_trip: Callable[[BaseException], None] | None = None
        self._turn = turn
        self._save = save
        self._emitter = emitter
        # An input guard whose decision the turn recorded is not run again.
        self._inputs = tuple(
            guard
            for guard in guards
            if isinstance(guard, InputGuard)
            and (turn is None or turn.guard_record("input", guard.name) is None)
        )
        self._outputs = tuple(guard for guard in guards if isinstance(guard, OutputGuard))
        self._tools = tuple(guard for guard in guards if isinstance(guard, ToolGuard))
        self._text = text
        self._events: list[AgentEvent] = []
        self._failure: BaseException | None = None  # a trip, or a check that raised
        tripped = None if turn is None else turn.guard_tripped()
        if tripped is not None:  # recorded: the turn stays tripped, nothing is sent
            self._failure = GuardrailTripped(guard=tripped.guard, reason=tripped.reason)
        self._scope: trio.CancelScope | None = None
        self._left = sum(1 for guard in self._inputs if not guard.blocking)
        self._done = trio.Event()
        if not self._left or tripped is not None:
            self._done.set()
        self._checked: dict[OutputGuard, int] = {guard: 0 for guard in self._outputs}
        self._pieces: list[str] = []  # the streamed answer's text so far
        self._length = 0
        self.started = False

    @property
    def concurrent(self) -> bool:
        """Whether input guards should run beside the first model call (in a nursery)."""
        return self._left > 0

    def check(self) -> None:
        """Raise what stopped the turn, if anything did.

        Raises:
            GuardrailTripped: a guard tripped.
        """
        self._raise()

    def take_events(self) -> list[AgentEvent]:
        """The guard events since the last call, for a streamed turn to yield."""
        events, self._events = self._events, []
        return events

    # -- input guards ---------------------------------------------------------------------

    async def before_first_call(self) -> None:
        """Once, before the turn's first model call: run the blocking input guards (and,
        without a nursery, the others); start the others in the nursery.

        Raises:
            GuardrailTripped: a blocking guard tripped.
        """
        self._raise()  # a trip the turn recorded
        if self.started:
            return
        self.started = True
        nursery = self._nursery
        for guard in self._inputs:
            if guard.blocking or nursery is None:
                await self._input(guard)
                self._raise()
        if nursery is not None:
            for guard in self._inputs:
                if not guard.blocking:
                    nursery.start_soon(self._beside, guard)

    async def _beside(self, guard: InputGuard) -> None:
        try:
            await self._input(guard)
        finally:
            self._left -= 1
            if self._left == 0 or self._failure is not None:
                self._done.set()

    async def _input(self, guard: InputGuard) -> None:
        try:
            outcome = await self._decide(guard, self._text)
        except Exception as exc:  # a broken check fails the turn, as itself
            self._fail(exc)
            return
        if isinstance(outcome, Trip):
            await self._trip(guard, outcome.reason)
        else:
            self._events.append(GuardPassed(guard=guard.name, kind="input"))
            await self._keep(GuardRecord(guard=guard.name, kind="input", verdict="pass"))

    async def _decide(self, guard: Guard, value: object, call_id: str = "") -> Trip | Deny | None:
        """``guard``'s check of ``value``, a span when somebody listens."""
        emitter = self._emitter
        if emitter is None:
            return await check_outcome(guard, value)
        span = new_span_id()
        turn_id = emitter.turn_id
        emitter.emit(
            GuardStarted(
                turn_id=turn_id,
                span_id=span,
                parent_id=turn_id,
                time=trio.current_time(),
                guard=guard.name,
                kind=guard.kind,
                call_id=call_id,
            )
        )
        try:
            outcome = await check_outcome(guard, value)
        except BaseException as exc:
            cancelled = isinstance(exc, trio.Cancelled | GeneratorExit)
            emitter.emit(
                GuardFinished(
                    turn_id=turn_id,
                    span_id=span,
                    time=trio.current_time(),
                    outcome="cancelled" if cancelled else "error",
                    error_type=None if cancelled else type(exc).__name__,
                )
            )
            raise
        emitter.emit(
            GuardFinished(
                turn_id=turn_id,
                span_id=span,
                time=trio.current_time(),
                outcome="trip"
                if isinstance(outcome, Trip)
                else "deny"
                if isinstance(outcome, Deny)
                else "pass",
                reason=None if outcome is None else outcome.reason,
            )
        )
        return outcome

    async def _keep(self, record: GuardRecord) -> None:
        """Record a decision in the turn and save the turn (a trip shielded: the turn is
        being torn down, and its trip must stand)."""
        turn = self._turn
        if turn is None:
            return
        turn.guard_decided(record)
        save = self._save
        if save is not None:
            with trio.CancelScope(shield=record.verdict == "trip"):
                await save(turn)

    @contextmanager
    def guarding(self) -> Iterator[None]:
        """Around one await of a model call (no ``yield`` inside): a trip cancels it.

        Raises:
            GuardrailTripped: a guard tripped before or during the await.
        """
        self._raise()
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                yield
            finally:
                self._scope = None
        self._raise()

    async def passed(self) -> None:
        """Wait until every input guard passed (before tools run and before the answer).

        Raises:
            GuardrailTripped: one tripped.
        """
        await self.before_first_call()
        self._raise()
        await self._done.wait()
        self._raise()

    async def _trip(self, guard: Guard, reason: str, call_id: str = "") -> None:
        """Stop the turn at once, then record the trip."""
        self._events.append(
            GuardTripped(guard=guard.name, kind=guard.kind, reason=reason, call_id=call_id)
        )
        self._fail(GuardrailTripped(guard=guard.name, reason=reason))
        await self._keep(
            GuardRecord(
                guard=guard.name, kind=guard.kind, verdict="trip", reason=reason, call_id=call_id
            )
        )

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
            on_trip = self._on_trip
            if on_trip is not None and isinstance(exc, GuardrailTripped):
                on_trip(exc)
        scope = self._scope
        if scope is not None:
            scope.cancel(reason="a guard tripped")
        self._done.set()

    def _raise(self) -> None:
        failure = self._failure
        if failure is not None:
            raise failure

    # -- output guards --------------------------------------------------------------------

    async def screen(self, batch: Sequence[StreamEvent]) -> None:
        """One network read of the answer: its text goes through the output guards that
        are due (before any of it is handed on).

        Raises:
            GuardrailTripped: one tripped.
        """
        if self._outputs:
            for event in batch:
                if type(event) is TextDelta:
                    await self.feed(event.text)

    async def feed(self, piece: str) -> None:
        """The next piece of the answer's text: run the output guards that are due.

        Raises:
            GuardrailTripped: one tripped.
        """
        if not self._outputs:
            return
        self._pieces.append(piece)
        self._length += len(piece)
        due = False
        for guard in self._outputs:
            every = guard.every_chars
            if (every is not None and self._length - self._checked[guard] >= every) or (
                every is None and any(char in _SENTENCE_ENDS for char in piece)
            ):
                due = True
        if due:
            await self._streamed("".join(self._pieces))

    async def _streamed(self, text: str) -> None:
        for guard in self._outputs:
            checked = self._checked[guard]
            every = guard.every_chars
            if every is not None:
                due = len(text) - checked >= every
            else:
                due = any(char in _SENTENCE_ENDS for char in text[checked:])
            if due:
                self._checked[guard] = len(text)
                await self._output(guard, text, final=False)
        self._raise()

    async def answered(self, text: str) -> None:
        """The whole answer: every output guard checks it once more.

        Raises:
            GuardrailTripped: one tripped.
        """
        turn = self._turn
        for guard in self._outputs:
            if turn is None or turn.guard_record("output", guard.name) is None:
                await self._output(guard, text, final=True)
        self._raise()

    async def _output(self, guard: OutputGuard, text: str, *, final: bool) -> None:
        if self._failure is not None:
            return
        try:
            outcome = await self._decide(guard, text)
        except Exception as exc:
            self._fail(exc)
            return
        if isinstance(outcome, Trip):
            await self._trip(guard, outcome.reason)
        elif final:
            self._events.append(GuardPassed(guard=guard.name, kind="output"))
            await self._keep(GuardRecord(guard=guard.name, kind="output", verdict="pass"))

    # -- tool guards ----------------------------------------------------------------------

    async def tool_calls(self, calls: Sequence[ToolUse]) -> dict[str, ToolResult]:
        """Check each call: the results of the calls a guard denied, by call id.

        Raises:
            GuardrailTripped: a guard tripped on a call.
        """
        denied: dict[str, ToolResult] = {}
        turn = self._turn
        for call in calls:
            for guard in self._tools:
                recorded = None if turn is None else turn.guard_record("tool", guard.name, call.id)
                if recorded is not None:  # decided before the turn was run again
                    if recorded.verdict == "deny":
                        denied[call.id] = _denial(guard, call, recorded.reason)
                        break
                    continue
                try:
                    outcome = await self._decide(guard, call, call.id)
                except Exception as exc:
                    self._fail(exc)
                    self._raise()
                if isinstance(outcome, Trip):
                    await self._trip(guard, outcome.reason, call.id)
                    self._raise()
                if isinstance(outcome, Deny):
                    self._events.append(
                        GuardTripped(
                            guard=guard.name,
                            kind="tool",
                            reason=outcome.reason,
                            call_id=call.id,
                            denied=True,
                        )
                    )
                    denied[call.id] = _denial(guard, call, outcome.reason)
                    self._record(guard, "deny", outcome.reason, call.id)
                    break
                self._events.append(GuardPassed(guard=guard.name, kind="tool", call_id=call.id))
                self._record(guard, "pass", "", call.id)
        if turn is not None and self._save is not None and self._tools:
            await self._save(turn)  # the step's decisions, saved once
        return denied

    def _record(self, guard: Guard, verdict: GuardVerdict, reason: str, call_id: str) -> None:
        if self._turn is not None:
            self._turn.guard_decided(
                GuardRecord(
                    guard=guard.name,
                    kind=guard.kind,
                    verdict=verdict,
                    reason=reason,
                    call_id=call_id,
                )
            )


def _denial(guard: Guard, call: ToolUse, reason: str) -> ToolResult:
    """A denied call's in-band answer."""
    return ToolResult.error(f"denied by the guard {guard.name!r}: {reason}", tool_use_id=call.id)
