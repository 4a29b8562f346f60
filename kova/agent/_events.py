"""Events of a streamed agent turn.

``agent.stream(history)`` yields, in order: :class:`~kova.TextDelta` and
:class:`~kova.ThinkingDelta` as the provider streams them (the same classes the providers
emit, passed through untouched), :class:`ToolCallStarted` / :class:`ToolCallFinished` around
each tool call (:class:`ToolCallStarted` / :class:`ToolCallDeferred` for a call left to a
person's decision; a ``search_tools`` call brackets :class:`ToolsFound` and
:class:`ToolsAdded`), and finally one :class:`TurnCompleted` carrying the whole
:class:`AgentResponse`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from .._models import (
    Message,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    Usage,
)
from .._record import Record

if TYPE_CHECKING:
    from collections.abc import Mapping
    from decimal import Decimal

    from .._messages import JSONValue
    from ._approvals import PendingApprovals

__all__ = [
    "AgentEvent",
    "AgentResponse",
    "Compaction",
    "ContextCompacted",
    "GuardPassed",
    "GuardTripped",
    "ToolCallDeferred",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolsAdded",
    "ToolsFound",
    "TurnCompleted",
]


class Compaction(Record):
    """What compaction did in a turn (``AgentResponse.compaction``)."""

    strategy: str
    """The strategies that ran, in order, joined by ``+`` (``"clear_tool_results+summarize"``)."""
    tokens_before: int
    """The estimated prompt tokens before the first compaction of the turn."""
    tokens_after: int
    """The estimated prompt tokens after the last."""
    removed: int
    """Messages removed or replaced (a summary replaces several; a cleared result counts)."""
    history: tuple[Message, ...]
    """The compacted history the next turn should start from, in place of what the caller
    passed plus this turn's new messages (the system prompt is not part of it)."""


class AgentResponse(Record):
    """The outcome of one agent turn."""

    text: str
    """The final assistant text."""
    new_messages: tuple[Message, ...]
    """Everything the turn produced, in order: persist this (``history.extend(...)``)."""
    stop_reason: StopReason
    usage: Usage
    """Summed over every provider call of the turn, those of agents its tools ran
    (``agent.as_tool()``) included (:attr:`usage_by_agent` splits it)."""
    llm_calls: int
    """This agent's own model calls (an inner agent's are in its usage only)."""
    thinking: str | None = None
    """Reasoning text of the turn's calls, for display."""
    output_retries: int = 0
    """How many times ``run_structured`` re-asked the model after an invalid answer."""
    pending: PendingApprovals | None = None
    """Tool calls waiting for a person's decision (deferred approvals), or ``None``. When
    set, the turn paused: ``new_messages`` end with the assistant message that made the
    calls; store them and ``pending.to_json()``, then ``agent.resume(history, pending)``."""
    usage_by_agent: Mapping[str, Usage] = MappingProxyType({})
    """``usage`` by agent name (``AgentBuilder.name``): this agent's own calls and those of
    the agents its tools ran (``agent.as_tool()``), at every depth; an inner agent left with
    the default name counts under the name of the tool that ran it."""
    compaction: Compaction | None = None
    """What the context policy compacted in this turn (``AgentBuilder.context``), with the
    compacted history the next turn should start from; ``None`` if nothing was."""

    @property
    def cost(self) -> Decimal | None:
        """What the turn cost in USD (``usage.cost``): every model call of it, those of agents
        its tools ran included; ``None`` if a call's model has no known price (docs/cost.md).
        """
        return self.usage.cost


class ToolCallStarted(Record):
    """The tool pool took a tool call, before any check: lookup, argument validation and
    approval come after it, so a call that is then denied, deferred or invalid has one too
    (its :class:`ToolCallFinished` or :class:`ToolCallDeferred` says how it went)."""

    call: ToolUse
    path: ClassVar[tuple[str, ...]] = ()
    """The tool-call ids that led to this call (empty for the streaming agent's own; see
    :attr:`kova.TextDelta.path`)."""

    @property
    def name(self) -> str:
        return self.call.name


class ToolCallDelta(Record):
    """A tool call's arguments as the model writes them, in a streamed turn: one event per
    piece the provider streamed (formats that send a call whole give one).

    ``call_id`` is the id the provider gave the call (the id of its
    :class:`ToolCallStarted`, unless the provider repeated an id within the turn and kova
    renamed the later call); ``arguments_text`` is all the arguments' JSON text so far; the
    last delta's text is the complete arguments.
    """

    call_id: str
    name: str
    arguments_text: str
    path: ClassVar[tuple[str, ...]] = ()
    """As :attr:`ToolCallStarted.path`."""

    @property
    def partial(self) -> JSONValue | None:
        """The best-effort value of ``arguments_text`` (open strings, arrays and objects
        closed where the text ends), or ``None`` before anything usable arrived. Parsed when
        read."""
        from ._partial_json import parse_partial_json

        return parse_partial_json(self.arguments_text)


class ToolCallFinished(Record):
    """A tool call finished (or was denied, or failed in-band)."""

    call: ToolUse
    result: ToolResult
    path: ClassVar[tuple[str, ...]] = ()
    """As :attr:`ToolCallStarted.path`."""

    @property
    def name(self) -> str:
        return self.call.name


class ToolCallDeferred(Record):
    """A tool call was left to a person's decision (it pairs with the ToolCallStarted before
    it): the turn ends with ``response.pending`` once the step's other calls finished."""

    call: ToolUse
    path: ClassVar[tuple[str, ...]] = ()
    """The tool-call ids that led to this call (empty for the streaming agent's own; see
    :attr:`kova.TextDelta.path`)."""

    @property
    def name(self) -> str:
        return self.call.name


class TurnCompleted(Record):
    """The turn is complete (the streaming agent's own turn: an inner agent's turn ends with
    the ToolCallFinished of the call that ran it)."""

    response: AgentResponse
    path: ClassVar[tuple[str, ...]] = ()
    """Always empty (see :attr:`kova.TextDelta.path`)."""


class ToolsFound(Record):
    """The model searched the deferred tools (``search_tools``): what it asked and what it
    found, best first (tools already offered are not found again)."""

    query: str
    names: tuple[str, ...]
    call_id: str = ""
    """The id of the ``search_tools`` call that searched."""
    path: ClassVar[tuple[str, ...]] = ()
    """As :attr:`kova.agent.ToolCallStarted.path` (empty for the streaming agent's own)."""


class ToolsAdded(Record):
    """Deferred tools the model found are offered from its next call on, for the rest of the
    turn."""

    names: tuple[str, ...]
    path: ClassVar[tuple[str, ...]] = ()
    """As :attr:`kova.agent.ToolCallStarted.path`."""


class ContextCompacted(Record):
    """The turn compacted its context before a model call (in ``agent.stream``)."""

    strategy: str
    tokens_before: int
    tokens_after: int
    removed: int
    path: ClassVar[tuple[str, ...]] = ()
    """As :attr:`kova.agent.ToolCallStarted.path`."""


class GuardPassed(Record):
    """A guard passed (an input guard once; an output guard for the final answer; a tool
    guard per call)."""

    guard: str
    kind: str
    call_id: str = ""
    """The tool call a tool guard checked."""
    path: ClassVar[tuple[str, ...]] = ()


class GuardTripped(Record):
    """A guard tripped (the turn stops with ``GuardrailTripped``) or, for a tool guard,
    denied a call (``denied`` true: the model gets the reason and the turn goes on)."""

    guard: str
    kind: str
    reason: str
    call_id: str = ""
    denied: bool = False
    path: ClassVar[tuple[str, ...]] = ()


AgentEvent: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCallStarted
    | ToolCallDelta
    | ToolCallFinished
    | ToolCallDeferred
    | ToolsFound
    | ToolsAdded
    | ContextCompacted
    | GuardPassed
    | GuardTripped
    | TurnCompleted
)
