"""What a provider call returns: the response, why the model stopped, token usage, and the
models a provider offers."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from ._messages import ContentBlock, HasContent
from ._record import Record, set_field, slot_setters

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

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


class Usage(Record, eq_exclude=("cost",), private=("_price",)):
    """Token counts of one call, or summed over several with ``+``, and what they cost.

    An agent prices its calls when their cost is first read, not when they are made (the
    price sheet is a large import, and most programs never read a cost): until then a
    usage keeps how to price it (``_price``: a :data:`Quote` for one call, the two parts of
    a sum) and ``cost`` is worked out, once, on the first read: the same value as if it
    had been priced at the call (dated prices are looked up at the call's time).
    """

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
        if cost is not None and type(cost) is not Decimal:
            raise TypeError(f"Usage.cost must be a decimal.Decimal or None, got {cost!r}")
        # Made per call: each field stored through its slot (see slot_setters).
        inputs, outputs, total, read, created, reasoning, heard, spoken, costs, price = _USAGE
        inputs(self, input_tokens)
        outputs(self, output_tokens)
        total(self, input_tokens + output_tokens if total_tokens is None else total_tokens)
        read(self, cache_read_tokens)
        created(self, cache_creation_tokens)
        reasoning(self, reasoning_tokens)
        heard(self, input_audio_tokens)
        spoken(self, output_audio_tokens)
        costs(self, cost)
        price(self, None)

    if TYPE_CHECKING:
        _price: Quote | tuple[Usage, Usage] | None  # a private slot, not a field

    if not TYPE_CHECKING:  # to type checkers, a usage has its fields and nothing else

        def __getattr__(self, name: str) -> Any:
            # Only for a slot not set: ``cost`` until a priced-later usage is first read,
            # and ``_price`` on a usage made without __init__ (unpickled, copied).
            if name == "cost":
                return _settle(self)
            if name == "_price":
                return None
            raise AttributeError(f"'Usage' object has no attribute {name!r}", name=name, obj=self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        set_field(self, "_price", None)

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        later = self._price is not None or other._price is not None
        total = Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            input_audio_tokens=self.input_audio_tokens + other.input_audio_tokens,
            output_audio_tokens=self.output_audio_tokens + other.output_audio_tokens,
            cost=None if later else _sum_cost(self, other),
        )
        if later:  # a part is priced when read: so is the sum (its cost slot left unset)
            object.__delattr__(total, "cost")
            set_field(total, "_price", (self, other))
        return total

    def priced_later(self, quote: Quote) -> Usage:
        """These counts, their cost worked out by ``quote`` when first read (an agent's
        pricing of the call that reported them)."""
        later = Usage.__new__(Usage)  # per call: the fields by name, not a loop of getattr
        set_field(later, "input_tokens", self.input_tokens)
        set_field(later, "output_tokens", self.output_tokens)
        set_field(later, "total_tokens", self.total_tokens)
        set_field(later, "cache_read_tokens", self.cache_read_tokens)
        set_field(later, "cache_creation_tokens", self.cache_creation_tokens)
        set_field(later, "reasoning_tokens", self.reasoning_tokens)
        set_field(later, "input_audio_tokens", self.input_audio_tokens)
        set_field(later, "output_audio_tokens", self.output_audio_tokens)
        set_field(later, "_price", quote)
        return later


_USAGE = slot_setters(Usage, *Usage.__record_fields__, "_price")

Quote = tuple[
    "Callable[[Usage, str | None, str | None, float], Decimal | None]",
    "str | None",
    "str | None",
    float,
]
"""How one call's usage is priced when first read: ``(price, answered, asked, time)``,
``price(usage, answered, asked, time)`` giving its cost (the agent's pricer: the model that
answered, else the one asked for, at the call's time)."""


def _sum_cost(left: Usage, right: Usage) -> Decimal | None:
    """The cost of ``left + right`` (both priced): a sum has a cost only if every part with
    tokens has one."""
    cost = left.cost
    other_cost = right.cost
    if cost is None:
        # Nothing with no tokens costs nothing (the empty usage a sum starts from).
        if left.total_tokens or left.input_tokens or left.output_tokens:
            other_cost = None
        return other_cost
    if other_cost is not None:
        return cost + other_cost
    if right.total_tokens or right.input_tokens or right.output_tokens:
        return None
    return cost


def _settle(usage: Usage) -> Decimal | None:
    """Work out the cost of a usage priced later (and of every unread part of it), store
    it and drop what it took. Without recursion: a long conversation's sum is a deep tree."""
    todo = [usage]
    while todo:
        top = todo[-1]
        price: Any = top._price
        if price is None:  # a part shared by two sums, already worked out
            todo.pop()
            continue
        if len(price) == 2:
            left, right = price
            waiting = [part for part in (left, right) if part._price is not None]
            if waiting:
                todo.extend(waiting)
                continue
            cost = _sum_cost(left, right)
        else:
            quote, answered, asked, when = price
            cost = quote(top, answered, asked, when)
        set_field(top, "cost", cost)
        set_field(top, "_price", None)
        todo.pop()
    cost = usage.cost
    return cost


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
        blocks, stop, usages, thoughts, models, ids = _RESPONSE  # made per call: see Usage
        blocks(self, tuple(content))
        stop(self, stop_reason)
        usages(self, usage)
        thoughts(self, thinking)
        models(self, model)
        ids(self, id)


_RESPONSE = slot_setters(ModelResponse, *ModelResponse.__record_fields__)


class ModelInfo(Record):
    """A model a provider offers."""

    id: str
    object: str = "model"
    created: int | None = None
    owned_by: str | None = None
    display_name: str | None = None
