"""What a provider call returns: the response, why the model stopped, token usage, and the
models a provider offers."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from ._messages import ContentBlock, HasContent
from ._record import Record, set_field

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ModelInfo", "ModelResponse", "StopKind", "StopReason", "Usage"]


class StopKind(enum.StrEnum):
    """Why the model stopped, normalized across providers."""

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    UNKNOWN = "unknown"


class StopReason(Record):
    """A :class:`StopKind`, plus the provider's raw value when kova does not know it."""

    kind: StopKind
    raw: str = ""
    """The provider's own value; set for ``UNKNOWN`` (e.g. ``content_filter``, ``refusal``)."""

    END_TURN: ClassVar[StopReason]
    TOOL_USE: ClassVar[StopReason]
    MAX_TOKENS: ClassVar[StopReason]
    STOP_SEQUENCE: ClassVar[StopReason]

    @classmethod
    def unknown(cls, raw: str) -> StopReason:
        return cls(kind=StopKind.UNKNOWN, raw=raw)

    def __str__(self) -> str:
        return f"unknown({self.raw})" if self.kind is StopKind.UNKNOWN else self.kind.value


StopReason.END_TURN = StopReason(kind=StopKind.END_TURN)
StopReason.TOOL_USE = StopReason(kind=StopKind.TOOL_USE)
StopReason.MAX_TOKENS = StopReason(kind=StopKind.MAX_TOKENS)
StopReason.STOP_SEQUENCE = StopReason(kind=StopKind.STOP_SEQUENCE)


class Usage(Record, eq_exclude=("cost",)):
    """Token counts of one call, or summed over several with ``+``, and what they cost."""

    input_tokens: int
    """Prompt tokens, including any served from or written to the cache."""
    output_tokens: int
    total_tokens: int
    """Defaults to ``input_tokens + output_tokens``."""
    cache_read_tokens: int
    """Prompt tokens served from the provider's prompt cache."""
    cache_creation_tokens: int
    """Prompt tokens written to the provider's prompt cache."""
    reasoning_tokens: int
    """Output tokens spent on reasoning, where the provider reports them."""
    input_audio_tokens: int
    """Prompt tokens that were audio, where the provider reports them."""
    output_audio_tokens: int
    """Output tokens that were audio, where the provider reports them."""
    cost: Decimal | None
    """What the calls cost, in USD (see docs/cost.md); ``None`` when a call's model has no
    known price. Set by the agent from its prices, not by providers. A sum has a cost only
    if every part with tokens has one. Not part of equality: two usages with the same
    counts are equal whatever they were priced at."""

    def __init__(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        total_tokens: int | None = None,
        cache_read_tokens: int = 0,
        cache_creation_tokens: int = 0,
        reasoning_tokens: int = 0,
        input_audio_tokens: int = 0,
        output_audio_tokens: int = 0,
        cost: Decimal | None = None,
    ) -> None:
        set_field(self, "input_tokens", input_tokens)
        set_field(self, "output_tokens", output_tokens)
        set_field(
            self,
            "total_tokens",
            input_tokens + output_tokens if total_tokens is None else total_tokens,
        )
        set_field(self, "cache_read_tokens", cache_read_tokens)
        set_field(self, "cache_creation_tokens", cache_creation_tokens)
        set_field(self, "reasoning_tokens", reasoning_tokens)
        set_field(self, "input_audio_tokens", input_audio_tokens)
        set_field(self, "output_audio_tokens", output_audio_tokens)
        if cost is not None and type(cost) is not Decimal:
            raise TypeError(f"Usage.cost must be a decimal.Decimal or None, got {cost!r}")
        set_field(self, "cost", cost)

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = self.cost
        other_cost = other.cost
        if cost is None:
            # Nothing with no tokens costs nothing (the empty usage a sum starts from).
            if self.total_tokens or self.input_tokens or self.output_tokens:
                other_cost = None
            cost = other_cost
        elif other_cost is not None:
            cost = cost + other_cost
        elif other.total_tokens or other.input_tokens or other.output_tokens:
            cost = None
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            input_audio_tokens=self.input_audio_tokens + other.input_audio_tokens,
            output_audio_tokens=self.output_audio_tokens + other.output_audio_tokens,
            cost=cost,
        )


class ModelResponse(Record, HasContent, eq_exclude=("model", "id")):
    """One provider call's answer.

    ``model`` and ``id`` say who answered (useful behind a
    :class:`~kova.providers.FallbackProvider`); they are not part of equality: two answers with
    the same content are equal whichever model wrote them.
    """

    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage | None
    thinking: str | None
    """Reasoning text for display; never sent back (signed blocks live in ``content``)."""
    model: str | None
    """The model that answered, as the provider named it on the wire (OpenAI's, the
    Responses API's and Anthropic's ``model``, Gemini's ``modelVersion``, Ollama's
    ``model``); ``None`` where the provider sends none (Bedrock)."""
    id: str | None
    """The provider's id of this answer (OpenAI's ``chatcmpl-...``, the Responses API's
    ``resp_...``, Anthropic's ``msg_...``, Gemini's ``responseId``); ``None`` where the
    provider sends none (Ollama, Bedrock)."""

    def __init__(
        self,
        *,
        content: Iterable[ContentBlock],
        stop_reason: StopReason,
        usage: Usage | None = None,
        thinking: str | None = None,
        model: str | None = None,
        id: str | None = None,
    ) -> None:
        set_field(self, "content", tuple(content))
        set_field(self, "stop_reason", stop_reason)
        set_field(self, "usage", usage)
        set_field(self, "thinking", thinking)
        set_field(self, "model", model)
        set_field(self, "id", id)


class ModelInfo(Record):
    """A model a provider offers."""

    id: str
    object: str = "model"
    created: int | None = None
    owned_by: str | None = None
    display_name: str | None = None
