"""The guards of one turn at work (:class:`GuardGate`), for the in-process driver.

Input guards that are not ``blocking`` run as tasks beside the turn, in a nursery of the frame
that iterates the driver (``run_turn``, or the producer task of a streamed turn with guards):
the driver itself is an async generator and holds no nursery across a ``yield``. The driver
enters :meth:`GuardGate.guarding` around each await of a model call (no ``yield`` inside), so
a guard that trips cancels the call in flight at once through that scope; it waits for the
input guards (:meth:`GuardGate.passed`) before any tool runs and before it answers.

Without a nursery (an agent used as a tool, pulled by its caller's loop) the concurrent input
guards run before the first model call instead: slower, never less safe.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import trio

from .._errors import GuardrailTripped
from .._messages import Message, Role, ToolResult
from .._stream_events import TextDelta
from ._guards import (
    Deny,
    GuardPassed,
    GuardTripped,
    InputGuard,
    OutputGuard,
    ToolGuard,
    Trip,
    check_outcome,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from .._messages import ToolUse
    from .._models import StreamEvent
    from ._events import AgentEvent
    from ._guards import Guard
    from ._turn import Turn

__all__ = ["GuardGate", "concurrent", "input_text"]

_SENTENCE_ENDS = frozenset(".!?\n")


def concurrent(guards: Sequence[Guard]) -> bool:
    """Whether ``guards`` has an input guard that runs beside the model call (a nursery)."""
    return any(isinstance(guard, InputGuard) and not guard.blocking for guard in guards)


def input_text(history: Sequence[Message]) -> str:
    """What an input guard checks: the text of the last user message of the turn's input."""
    for message in reversed(history):
        if message.role is Role.USER and not any(
            isinstance(block, ToolResult) for block in message.content
        ):
            return message.text
    return ""


class GuardGate:
    """One turn's guards: the input guards' tasks and verdicts, the output guards' progress
    through the streamed text, and the tool guards. Its state changes only between
    checkpoints (plain attributes, read and written by the turn's task and its guard
    tasks)."""

    __slots__ = (
        "_checked",
        "_done",
        "_events",
        "_failure",
        "_inputs",
        "_left",
        "_length",
        "_nursery",
        "_outputs",
        "_pieces",
        "_scope",
        "_text",
        "_tools",
        "started",
    )

    @classmethod
    def of(
        cls, guards: Sequence[Guard], turn: Turn, nursery: trio.Nursery | None
    ) -> GuardGate | None:
        """The gate of ``turn`` with ``guards`` (``None`` without any), its concurrent input
        guards to run in ``nursery``."""
        if not guards:
            return None
        return cls(guards, input_text(turn.history), nursery)

    def __init__(
        self, guards: Sequence[Guard], text: str, nursery: trio.Nursery | None = None
    ) -> None:
        self._nursery = nursery
        self._inputs = tuple(guard for guard in guards if isinstance(guard, InputGuard))
        self._outputs = tuple(guard for guard in guards if isinstance(guard, OutputGuard))
        self._tools = tuple(guard for guard in guards if isinstance(guard, ToolGuard))
        self._text = text
        self._events: list[AgentEvent] = []
        self._failure: BaseException | None = None  # a trip, or a check that raised
        self._scope: trio.CancelScope | None = None
        self._left = sum(1 for guard in self._inputs if not guard.blocking)
        self._done = trio.Event()
        if not self._left:
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
            outcome = await check_outcome(guard, self._text)
        except Exception as exc:  # a broken check fails the turn, as itself
            self._fail(exc)
            return
        if isinstance(outcome, Trip):
            self._trip(guard, outcome.reason)
        else:
            self._events.append(GuardPassed(guard=guard.name, kind="input"))

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

    def _trip(self, guard: Guard, reason: str, call_id: str = "") -> None:
        self._events.append(
            GuardTripped(guard=guard.name, kind=guard.kind, reason=reason, call_id=call_id)
        )
        self._fail(GuardrailTripped(guard=guard.name, reason=reason))

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            self._failure = exc
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
        for guard in self._outputs:
            await self._output(guard, text, final=True)
        self._raise()

    async def _output(self, guard: OutputGuard, text: str, *, final: bool) -> None:
        if self._failure is not None:
            return
        try:
            outcome = await check_outcome(guard, text)
        except Exception as exc:
            self._fail(exc)
            return
        if isinstance(outcome, Trip):
            self._trip(guard, outcome.reason)
        elif final:
            self._events.append(GuardPassed(guard=guard.name, kind="output"))

    @property
    def watches_output(self) -> bool:
        return bool(self._outputs)

    # -- tool guards ----------------------------------------------------------------------

    async def tool_calls(self, calls: Sequence[ToolUse]) -> dict[str, ToolResult]:
        """Check each call: the results of the calls a guard denied, by call id.

        Raises:
            GuardrailTripped: a guard tripped on a call.
        """
        denied: dict[str, ToolResult] = {}
        for call in calls:
            for guard in self._tools:
                try:
                    outcome = await check_outcome(guard, call)
                except Exception as exc:
                    self._fail(exc)
                    self._raise()
                if isinstance(outcome, Trip):
                    self._trip(guard, outcome.reason, call.id)
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
                    denied[call.id] = ToolResult.error(
                        f"denied by the guard {guard.name!r}: {outcome.reason}",
                        tool_use_id=call.id,
                    )
                    break
                self._events.append(GuardPassed(guard=guard.name, kind="tool", call_id=call.id))
        return denied
