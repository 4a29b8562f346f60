"""What a turn hands the agents its tools run (``agent.as_tool()``), and their events' paths.

A turn's tool step hands the tool pool its :class:`ToolCalls`: besides the calls, the turn's
path (the tool-call ids that led to it, empty for the outermost turn), the turn cores it
belongs to (its own and every enclosing one: an inner turn's model calls and tool calls count
against each of their usage limits, and its usage is added to each), the approval policy an
inner agent without one of its own follows, and whether the outer turn is streamed. Around
each call the pool sets :func:`outer_call` (the step, the call and where its events go),
which is how an agent tool finds the turn it serves: the pool hands the step to each call,
never through trio's context as the turn's task had it (a call may run in a task of its
own).

An inner turn's events reach the outer stream as copies that carry a path
(:func:`nested`): ``TextDelta`` and the other stream events keep ``path`` as a class
attribute (``()``), so the outer agent's own per-token events are built exactly as before.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Protocol

from .._models import TextDelta, ThinkingDelta
from .._record import Record, set_field
from ._events import (
    ContextCompacted,
    GuardPassed,
    GuardTripped,
    ToolCallDeferred,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolsAdded,
    ToolsFound,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._models import ToolUse, Usage
    from .._observe import TurnEmitter
    from ..tools import Tool
    from ._approvals import Deferred, InnerPause

__all__ = [
    "ApprovalPolicy",
    "CallSite",
    "EnclosingTurn",
    "ToolCalls",
    "nested",
    "outer_call",
    "serving_agent_call",
]


class ApprovalPolicy(Protocol):
    """An agent's approval policy as its agent tools' calls follow it (the tool pool's
    ``Approver``)."""

    @property
    def active(self) -> bool:
        """Whether there is a handler or a defer predicate at all."""

    async def decide(
        self, call: ToolUse, tool: Tool, path: tuple[str, ...] = ()
    ) -> str | Deferred | None:
        """``None`` when approved, ``DEFER`` when left to a person, else the denial."""


class EnclosingTurn(Protocol):
    """A turn an inner turn (``agent.as_tool()``) counts in: a :class:`~kova.agent.Turn`, or
    what stands in for one elsewhere (a Temporal tool activity's outer figures). Each may
    raise the limit it would go over."""

    def inner_request(self) -> None:
        """An inner turn is about to call its model."""

    def inner_replied(self, agent: str, usage: Usage | None) -> None:
        """That call's reply, made by ``agent``, used ``usage``."""

    def inner_tools(self, count: int) -> None:
        """An inner turn starts a step of ``count`` tool calls."""


class ToolCalls:
    """One tool step's calls as the tool runner takes them: what each call's
    :class:`~kova.tools.ToolContext` carries, where its events go, and the side of the turn
    its agent tools see. Built by the step that runs them (``ToolStep.request``) and passed
    down in the caller's task: nothing crosses a mailbox."""

    __slots__ = (
        "agent",
        "approved",
        "approver",
        "calls",
        "deps",
        "on_event",
        "path",
        "paused",
        "resumes",
        "streamed",
        "telemetry",
        "turn_id",
        "turns",
    )

    def __init__(
        self,
        calls: tuple[ToolUse, ...],
        *,
        on_event: Callable[[object], Awaitable[None]] | None = None,
        telemetry: tuple[TurnEmitter, int] | None = None,
        approved: frozenset[str] = frozenset(),
        turn_id: str = "",
        agent: str = "",
        deps: object = None,
        path: tuple[str, ...] = (),
        turns: tuple[EnclosingTurn, ...] = (),
        approver: ApprovalPolicy | None = None,
        streamed: bool = False,
        resumes: dict[str, InnerPause] | None = None,
    ) -> None:
        self.calls = calls
        self.on_event = on_event
        """Receives ToolCallStarted / ToolCallFinished events (and an agent tool's nested
        ones, when ``streamed``)."""
        self.telemetry = telemetry
        """The turn's telemetry emitter and span id (the parent of each tool call's span),
        or ``None`` when nobody listens."""
        self.approved = approved
        """Ids of calls already approved: neither the defer predicate nor the handler is
        asked."""
        self.turn_id = turn_id
        """The turn core's id of the turn (with a call's id, it names the call in the turn)."""
        self.agent = agent
        """The agent's name (each call's ToolContext carries it)."""
        self.deps = deps
        """The caller's ``deps`` (``ToolContext.deps``)."""
        self.path = path
        """The turn's own path (empty for the outermost turn)."""
        self.turns = turns
        """The turn's core and those of the turns enclosing it, innermost first."""
        self.approver = approver
        """The approval policy the calls follow (the turn's own, or the one it inherited),
        or ``None``."""
        self.streamed = streamed
        self.resumes: dict[str, InnerPause] = resumes if resumes is not None else {}
        """Calls of this step that continue a paused inner turn, by call id."""
        self.paused: dict[str, InnerPause] = {}
        """Filled by agent tools whose inner turn paused for approvals, by call id."""


class CallSite:
    """The tool call an agent tool serves: the step's :class:`ToolCalls`, the call, and where
    the inner turn's events go (``None`` when the outer turn is not streamed)."""

    __slots__ = ("call", "emit", "step")

    def __init__(
        self,
        step: ToolCalls,
        call: ToolUse,
        emit: Callable[[object], Awaitable[None]] | None,
    ) -> None:
        self.step = step
        self.call = call
        self.emit = emit

    @property
    def path(self) -> tuple[str, ...]:
        """The inner turn's path: the outer turn's, then this call's id."""
        return (*self.step.path, self.call.id)


_CALL: contextvars.ContextVar[CallSite | None] = contextvars.ContextVar(
    "kova_agent_call", default=None
)


def outer_call() -> CallSite | None:
    """The agent-tool call this task serves (``None`` outside a tool call of an agent)."""
    return _CALL.get()


def serving_agent_call(site: CallSite) -> contextvars.Token[CallSite | None]:
    """Set :func:`outer_call` for the tool call about to run; reset with the token."""
    return _CALL.set(site)


# -- events with a path -------------------------------------------------------------------

_NESTABLE = (
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallDeferred,
    ToolsFound,
    ToolsAdded,
    ContextCompacted,
    GuardPassed,
    GuardTripped,
)


def _nested_class(base: type[Record]) -> type[Record]:
    """A subclass of the event class ``base`` whose instances carry ``path`` in a slot."""

    def __repr__(self: Record) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_repr__)
        return f"{base.__name__}({fields})"

    def __reduce__(self: Record) -> tuple[Any, ...]:
        values = tuple(getattr(self, name) for name in base.__record_fields__)
        return (_rebuild, (base.__name__, values, self.path))  # type: ignore[attr-defined]

    namespace: dict[str, Any] = {
        "__annotations__": {"path": "tuple[str, ...]"},
        "__module__": __name__,  # how nested() tells a copy from an original
        "__qualname__": base.__qualname__,  # type(event).__name__ reads as the base's
        "__repr__": __repr__,
        "__reduce__": __reduce__,
        "__doc__": base.__doc__,
    }
    # The metaclass makes the slot; every field (the base's and path) is set by nested().
    metaclass: Any = type(base)
    made: type[Record] = metaclass(base.__name__, (base,), namespace, init=False)
    return made


_NESTED: dict[type, type[Record]] = {base: _nested_class(base) for base in _NESTABLE}
_BY_NAME: dict[str, type[Record]] = {base.__name__: base for base in _NESTABLE}
_new = object.__new__


def _rebuild(name: str, values: tuple[Any, ...], path: tuple[str, ...]) -> Record:
    base = _BY_NAME[name]
    event = _new(_NESTED[base])
    for field, value in zip(base.__record_fields__, values, strict=True):
        set_field(event, field, value)
    set_field(event, "path", path)
    return event


def nested(event: Any, prefix: tuple[str, ...]) -> Any:
    """``event`` as an outer stream sees it: a copy whose ``path`` is ``prefix`` followed by
    the event's own path (an event of a deeper agent already has one)."""
    kind = type(event)
    base: type[Record] = kind.__mro__[1] if kind.__module__ == __name__ else kind
    copy = _new(_NESTED[base])
    for field in base.__record_fields__:
        set_field(copy, field, getattr(event, field))
    set_field(copy, "path", (*prefix, *event.path))
    return copy
