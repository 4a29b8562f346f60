"""Events of a streamed agent turn.

``agent.stream(history)`` yields, in order: :class:`~kova.TextDelta` and
:class:`~kova.ThinkingDelta` as the provider streams them (the same classes the providers
emit, passed through untouched), :class:`ToolCallStarted` / :class:`ToolCallFinished` around
each tool call, and finally one :class:`TurnCompleted` carrying the whole
:class:`AgentResponse`.
"""

from __future__ import annotations

from typing import TypeAlias

from .._models import (
    Message,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolResult,
    ToolUse,
    Usage,
)
from .._record import Record, set_field

__all__ = [
    "AgentEvent",
    "AgentResponse",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCompleted",
]


class AgentResponse(Record):
    """The outcome of one agent turn."""

    __slots__ = (
        "llm_calls",
        "new_messages",
        "output_retries",
        "stop_reason",
        "text",
        "thinking",
        "usage",
    )

    text: str
    """The final assistant text."""
    new_messages: tuple[Message, ...]
    """Everything the turn produced, in order: persist this (``history.extend(...)``)."""
    stop_reason: StopReason
    usage: Usage
    """Summed over every provider call of the turn."""
    llm_calls: int
    thinking: str | None
    """Reasoning text of the turn's calls, for display."""
    output_retries: int
    """How many times ``run_structured`` re-asked the model after an invalid answer."""

    def __init__(
        self,
        *,
        text: str,
        new_messages: tuple[Message, ...],
        stop_reason: StopReason,
        usage: Usage,
        llm_calls: int,
        thinking: str | None = None,
        output_retries: int = 0,
    ) -> None:
        set_field(self, "text", text)
        set_field(self, "new_messages", new_messages)
        set_field(self, "stop_reason", stop_reason)
        set_field(self, "usage", usage)
        set_field(self, "llm_calls", llm_calls)
        set_field(self, "thinking", thinking)
        set_field(self, "output_retries", output_retries)


class ToolCallStarted(Record):
    """A tool call is about to run (after approval)."""

    __slots__ = ("call",)

    call: ToolUse

    def __init__(self, *, call: ToolUse) -> None:
        set_field(self, "call", call)

    @property
    def name(self) -> str:
        return self.call.name


class ToolCallFinished(Record):
    """A tool call finished (or was denied, or failed in-band)."""

    __slots__ = ("call", "result")

    call: ToolUse
    result: ToolResult

    def __init__(self, *, call: ToolUse, result: ToolResult) -> None:
        set_field(self, "call", call)
        set_field(self, "result", result)

    @property
    def name(self) -> str:
        return self.call.name


class TurnCompleted(Record):
    """The turn is complete."""

    __slots__ = ("response",)

    response: AgentResponse

    def __init__(self, *, response: AgentResponse) -> None:
        set_field(self, "response", response)


AgentEvent: TypeAlias = (
    TextDelta | ThinkingDelta | ToolCallStarted | ToolCallFinished | TurnCompleted
)
