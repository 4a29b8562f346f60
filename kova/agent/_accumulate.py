"""Folding a provider's event stream back into one :class:`~kova.providers.ModelResponse`.

Per-event work here is a type check and a list append (a ``match`` for the rarer events), and
every 32 text deltas one join: it runs for every streamed token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import InvalidResponse, StreamError
from .._json import JsonNestingError, loads
from .._models import (
    ContentBlock,
    ErrorEvent,
    JSONObject,
    MediaOutput,
    ModelResponse,
    SignedThinking,
    StopEvent,
    StreamEvent,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolUse,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
    UsageEvent,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["ResponseAccumulator", "parse_tool_arguments"]


def parse_tool_arguments(raw: str) -> tuple[JSONObject, str | None]:
    """``(arguments, None)`` for a JSON object (empty text counts as ``{}``), else
    ``({}, raw)`` so the agent can answer the call with an in-band error.

    Raises:
        InvalidResponse: the arguments nest deeper than kova reads (a server's fault, not a
            model's slip: the turn fails instead of echoing them back).
    """
    if not raw.strip():
        return {}, None
    try:
        value = loads(raw)
    except JsonNestingError as exc:
        raise InvalidResponse(f"tool call arguments: {exc}") from None
    except ValueError:
        return {}, raw
    if not isinstance(value, dict):
        return {}, raw
    return value, None


_JOIN_EVERY = 32
"""Text deltas kept apart in a streamed response before they are joined into one str."""


class _PendingTool:
    __slots__ = ("id", "metadata", "name", "parts")

    def __init__(self, start: ToolUseStart) -> None:
        self.id = start.id
        self.name = start.name
        self.metadata = start.provider_metadata
        self.parts: list[str] = []

    def finish(self) -> ToolUse:
        arguments, raw = parse_tool_arguments("".join(self.parts))
        try:
            return ToolUse(
                id=self.id,
                name=self.name,
                input=arguments,
                provider_metadata=self.metadata,
                raw_arguments=raw,
            )
        except ValueError as exc:  # arguments nested deeper than MAX_JSON_DEPTH
            raise InvalidResponse(f"tool call {self.name!r}: {exc}") from None


def merge_usage(current: Usage | None, update: Usage) -> Usage:
    """Providers report usage cumulatively, sometimes split over several events (input tokens
    at the start, output tokens at the end): keep the largest value seen for each field."""
    if current is None:
        return update
    input_tokens = max(current.input_tokens, update.input_tokens)
    output_tokens = max(current.output_tokens, update.output_tokens)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=max(current.total_tokens, update.total_tokens, input_tokens + output_tokens),
        cache_read_tokens=max(current.cache_read_tokens, update.cache_read_tokens),
        cache_creation_tokens=max(current.cache_creation_tokens, update.cache_creation_tokens),
        reasoning_tokens=max(current.reasoning_tokens, update.reasoning_tokens),
        input_audio_tokens=max(current.input_audio_tokens, update.input_audio_tokens),
        output_audio_tokens=max(current.output_audio_tokens, update.output_audio_tokens),
    )


class ResponseAccumulator:
    """Feed it every event of one stream, then :meth:`finish` for the response.

    Content keeps the order it streamed in: signed thinking, text and tool calls interleave
    exactly as the provider sent them (Anthropic requires thinking blocks to precede the tool
    calls they led to when they are echoed back).

    ``first``, when given, is called once, before the first non-empty batch is folded in: a
    model step's first-token bookkeeping (:meth:`ModelCall.first_token
    <kova.agent._model_call.ModelCall.first_token>`). The agent's streamed model step and the
    Temporal worker's both read their lease batch by batch and hand each batch here, so the
    per-batch work is written once and costs no call beyond :meth:`feed` itself.
    """

    __slots__ = (
        "_first",
        "_items",
        "_pieces",
        "_stop",
        "_thinking",
        "_thoughts",
        "_tools",
        "_usage",
    )

    def __init__(self, first: Callable[[], object] | None = None) -> None:
        self._first = first
        self._items: list[list[str] | ContentBlock | _PendingTool] = []
        self._tools: dict[int, _PendingTool] = {}
        self._thinking: list[str] = []
        self._pieces = 0
        """Deltas appended to the last text run since it was last joined."""
        self._thoughts = 0
        """Thinking deltas appended since the thinking was last joined."""
        self._stop: StopEvent | None = None
        self._usage: Usage | None = None

    def feed(self, events: Sequence[StreamEvent]) -> None:
        """Fold one batch (one network read's events) in."""
        if self._first is not None and events:
            first, self._first = self._first, None
            first()
        items = self._items
        for event in events:
            if type(event) is TextDelta and event.provider_metadata is None:
                # Most events of a stream: skip the match.
                if items and type(run := items[-1]) is list:
                    run.append(event.text)
                    pieces = self._pieces + 1
                    if pieces == _JOIN_EVERY:
                        # A delta is a few characters in a 50-byte str and a list slot:
                        # every _JOIN_EVERY become one str (a long answer of short deltas
                        # held in about a ninth of the memory; the text is never joined
                        # again as a whole before finish).
                        run[-_JOIN_EVERY:] = ("".join(run[-_JOIN_EVERY:]),)
                        pieces = 0
                    self._pieces = pieces
                else:
                    items.append([event.text])
                    self._pieces = 1
                continue
            match event:
                case TextDelta(text=text, provider_metadata=None):
                    if items and isinstance(items[-1], list):
                        items[-1].append(text)
                    else:
                        items.append([text])
                case TextDelta(text=text, provider_metadata=metadata):
                    # The piece that ends a text part with provider data (Gemini's
                    # thoughtSignature): the part becomes one Text that carries it, and
                    # the next piece starts a new one.
                    if items and isinstance(run := items[-1], list):
                        items.pop()
                        text = "".join(run) + text
                    items.append(Text(text=text, provider_metadata=metadata))
                case ThinkingDelta(text=text):
                    thinking = self._thinking
                    thinking.append(text)
                    self._thoughts += 1
                    if self._thoughts == _JOIN_EVERY:
                        thinking[-_JOIN_EVERY:] = ("".join(thinking[-_JOIN_EVERY:]),)
                        self._thoughts = 0
                case ToolUseDelta(index=index, partial_json=fragment):
                    pending = self._tools.get(index)
                    if pending is None:
                        raise StreamError(f"tool call fragment for unknown index {index}")
                    pending.parts.append(fragment)
                case ToolUseStart(index=index):
                    pending = _PendingTool(event)
                    self._tools[index] = pending
                    items.append(pending)
                case ToolUseEnd(index=index, provider_metadata=metadata):
                    if metadata:
                        pending = self._tools.get(index)
                        if pending is not None:
                            pending.metadata = {**(pending.metadata or {}), **metadata}
                case SignedThinking(block=block) | MediaOutput(block=block):
                    items.append(block)
                case StopEvent():
                    self._stop = event
                case UsageEvent(usage=usage):
                    self._usage = merge_usage(self._usage, usage)
                case ErrorEvent(message=message, error_type=error_type):
                    raise StreamError(message, error_type=error_type or None)

    def finish(self) -> ModelResponse:
        """The complete response.

        Raises:
            StreamError: the stream ended without a stop reason (it was cut short).
        """
        stop = self._stop
        if stop is None:
            raise StreamError("the stream ended before the model finished (no stop reason)")
        content: list[ContentBlock] = []
        for item in self._items:
            if isinstance(item, list):
                text = "".join(item)
                if text:
                    content.append(Text(text=text))
            elif isinstance(item, _PendingTool):
                content.append(item.finish())
            else:
                content.append(item)
        return ModelResponse(
            content=tuple(content),
            stop_reason=stop.stop_reason,
            usage=self._usage,
            thinking="".join(self._thinking) or None,
            model=stop.model,
            id=stop.id,
        )
