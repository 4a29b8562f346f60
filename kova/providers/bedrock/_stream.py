"""ConverseStream events (already framed by :class:`~._framing.EventStreamFramer`) to kova
stream events.

The decoder is pure: it is fed the event-stream messages of one network read and returns that
read's kova events as one batch.

Event order on the wire (``shared/wire/bedrock.md``, "ConverseStream: events")::

    messageStart
    ([contentBlockStart] contentBlockDelta* contentBlockStop)*   # per contentBlockIndex
    messageStop          # stopReason
    metadata             # usage (incl. cache reads/writes) and metrics, after messageStop

Text and reasoning blocks have no ``contentBlockStart``: their first delta opens them. Only
tool calls start explicitly; a block opened by another ``start`` member (an image, a server
tool result, a member newer than this decoder) has its deltas skipped, except text, which is
always surfaced. An empty ``start`` is :class:`~kova.InvalidResponse`, as boto3 refuses it.
Reasoning text reaches the stream once, as
:class:`~kova.ThinkingDelta`\\ s; a *signed* reasoning block (Claude) is emitted again at its
stop as :class:`~kova.SignedThinking` for history, and a redacted one likewise.

Errors inside the stream (HTTP status already 200) are messages of ``:message-type``
``exception`` (``:exception-type`` ``throttlingException``, ``modelStreamErrorException``,
..., a ``{"message"}`` payload) or ``error`` (``:error-code``/``:error-message`` headers):
both set :attr:`BedrockStreamDecoder.error` to the classified error, through the one classifier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    RedactedThinking,
    SignedThinking,
    StopEvent,
    StreamEvent,
    Thinking,
    ThinkingDelta,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
    text_delta,
)
from .._classify import provider_error
from .._codec import ended_early
from ._convert import PROVIDER, decode_stop_reason, decode_usage

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ._framing import EventFrame

__all__ = ["BedrockStreamDecoder"]

# Block kinds, per contentBlockIndex.
_TEXT = 0
_REASONING = 1
_TOOL = 2
_OTHER = 3  # server tool results, images, future kinds: their non-text deltas are skipped

_loads = loads  # json.loads with too-deep nesting as a ValueError


class _Block:
    __slots__ = ("kind", "redacted", "signature", "text")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.text: list[str] = []
        self.signature = ""
        self.redacted = ""


def _invalid(message: str) -> InvalidResponse:
    return InvalidResponse(message, provider=PROVIDER)


def _exception_name(name: str) -> str:
    # Stream exceptions are named as union members (``throttlingException``); the classifier
    # knows the shape names (``ThrottlingException``), as HTTP errors carry them.
    return name[:1].upper() + name[1:]


class BedrockStreamDecoder:
    """Turns one ConverseStream into batches of kova stream events.

    One decoder belongs to one stream. It keeps the codec contract
    (:mod:`kova.providers._codec`): an exception or error message sets :attr:`error` to the
    classified error (``throttlingException`` is :class:`~kova.RateLimited`, as HTTP 429
    ``ThrottlingException`` is), a malformed event sets :class:`~kova.InvalidResponse`, and
    :meth:`finish` sets a :class:`~kova.StreamError` when the stream ended before
    ``messageStop``. Decoding stops at the first error; the events before it in the same read
    are returned.
    """

    __slots__ = ("_blocks", "_stopped", "_usage_seen", "error")

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._stopped = False
        self._usage_seen = False
        self.error: KovaError | None = None

    @property
    def finished(self) -> bool:
        """``messageStop`` arrived."""
        return self._stopped

    def feed(self, frames: Iterable[EventFrame]) -> list[StreamEvent]:
        """Decode the event-stream messages of one network read into one batch of events."""
        out: list[StreamEvent] = []
        for frame in frames:
            if self.error is not None:
                break
            headers = frame.headers
            try:
                message_type = headers.get(":message-type")
                if message_type == "event":
                    self._event(headers.get(":event-type"), frame.payload, out)
                elif message_type == "exception":
                    self._exception(headers, frame.payload)
                elif message_type == "error":
                    self._error(headers)
                else:
                    raise _invalid(f"an event-stream message of type {message_type!r}")
            except InvalidResponse as exc:
                self.error = exc
        return out

    def finish(self) -> list[StreamEvent]:
        """The body ended: sets :attr:`error` if it stopped before ``messageStop``."""
        if self.error is None and not self._stopped:
            self.error = ended_early("messageStop (connection cut?)")
        return []

    # -- events --------------------------------------------------------------------------------

    def _payload(self, event_type: object, payload: bytes) -> Mapping[str, object]:
        try:
            data = _loads(payload)
        except ValueError as exc:
            raise _invalid(
                f"stream event {event_type!r} carries invalid JSON ({exc}): {payload[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise _invalid(f"stream event {event_type!r} is not a JSON object: {payload[:200]!r}")
        return data

    def _event(self, event_type: object, payload: bytes, out: list[StreamEvent]) -> None:
        data = self._payload(event_type, payload)
        if event_type == "contentBlockDelta":
            self._delta(data, out)
        elif event_type == "contentBlockStart":
            self._start(data, out)
        elif event_type == "contentBlockStop":
            self._stop(data, out)
        elif event_type == "messageStop":
            stop = data.get("stopReason")
            if not isinstance(stop, str):
                raise _invalid(f"messageStop without a stopReason: {payload[:200]!r}")
            self._stopped = True
            out.append(StopEvent(stop_reason=decode_stop_reason(stop)))
        elif event_type == "metadata":
            usage = data.get("usage")
            if isinstance(usage, dict) and not self._usage_seen:
                self._usage_seen = True
                out.append(UsageEvent(usage=decode_usage(usage)))
        # messageStart carries only the role; event types newer than this decoder are skipped.

    def _index(self, data: Mapping[str, object], event: str) -> int:
        index = data.get("contentBlockIndex")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise _invalid(f"{event} without a contentBlockIndex: {data!r}")
        return index

    def _start(self, data: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = self._index(data, "contentBlockStart")
        start = data.get("start")
        if not isinstance(start, dict):
            raise _invalid(f"contentBlockStart without a start: {data!r}")
        if not start:
            # ContentBlockStart is a union: exactly one member is set (boto3 refuses an empty
            # one too). Skipping it would drop whatever the block holds without a word.
            raise _invalid(f"contentBlockStart with an empty start (no member set): {data!r}")
        tool = start.get("toolUse")
        if tool is None:
            # A server tool result, an image or a member newer than this decoder: its own
            # deltas are skipped, but a text delta still reaches the consumer (see _delta).
            self._blocks[index] = _Block(_OTHER)
            return
        if not isinstance(tool, dict):
            raise _invalid(f"contentBlockStart toolUse must be an object: {data!r}")
        tool_id = tool.get("toolUseId")
        name = tool.get("name")
        if not isinstance(tool_id, str) or not tool_id or not isinstance(name, str) or not name:
            raise _invalid(f"toolUse start without toolUseId or name: {tool!r}")
        self._blocks[index] = _Block(_TOOL)
        out.append(ToolUseStart(index=index, id=tool_id, name=name))

    def _delta(self, data: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = self._index(data, "contentBlockDelta")
        delta = data.get("delta")
        if not isinstance(delta, dict):
            raise _invalid(f"contentBlockDelta without a delta: {data!r}")
        block = self._blocks.get(index)
        text = delta.get("text")
        if text is not None:
            if not isinstance(text, str):
                raise _invalid(f"a text delta must be a string: {data!r}")
            if block is None:
                block = self._blocks[index] = _Block(_TEXT)
            elif block.kind == _OTHER:
                # A text delta is text whatever start opened its block (boto3 reads it too):
                # dropping it would end the answer short without an error.
                block.kind = _TEXT
            elif block.kind != _TEXT:
                raise _invalid(f"a text delta inside a tool or reasoning block: {data!r}")
            if text:
                out.append(text_delta(text))
            return
        tool = delta.get("toolUse")
        if tool is not None:
            fragment = tool.get("input") if isinstance(tool, dict) else None
            if not isinstance(fragment, str):
                raise _invalid(f"a toolUse delta must carry an input string: {data!r}")
            if block is None or block.kind != _TOOL:
                raise _invalid(f"a toolUse delta for a block that is not a started tool: {data!r}")
            if fragment:
                out.append(ToolUseDelta(index=index, partial_json=fragment))
            return
        reasoning = delta.get("reasoningContent")
        if reasoning is not None:
            if not isinstance(reasoning, dict):
                raise _invalid(f"a reasoningContent delta must be an object: {data!r}")
            if block is None:
                block = self._blocks[index] = _Block(_REASONING)
            if block.kind != _REASONING:
                raise _invalid(f"a reasoning delta inside another kind of block: {data!r}")
            self._reasoning(block, reasoning, data, out)
        # citation, toolResult, image and newer delta kinds carry nothing kova models.

    def _reasoning(
        self,
        block: _Block,
        reasoning: Mapping[str, object],
        data: Mapping[str, object],
        out: list[StreamEvent],
    ) -> None:
        text = reasoning.get("text")
        if text is not None:
            if not isinstance(text, str):
                raise _invalid(f"reasoning text must be a string: {data!r}")
            if text:
                block.text.append(text)
                out.append(ThinkingDelta(text=text))
        signature = reasoning.get("signature")
        if signature is not None:
            if not isinstance(signature, str):
                raise _invalid(f"a reasoning signature must be a string: {data!r}")
            block.signature += signature
        redacted = reasoning.get("redactedContent")
        if redacted is not None:
            if not isinstance(redacted, str):
                raise _invalid(f"redactedContent must be a base64 string: {data!r}")
            block.redacted += redacted

    def _stop(self, data: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = self._index(data, "contentBlockStop")
        block = self._blocks.pop(index, None)
        if block is None:
            return
        if block.kind == _TOOL:
            out.append(ToolUseEnd(index=index))
        elif block.kind == _REASONING:
            if block.redacted:
                out.append(SignedThinking(block=RedactedThinking(data=block.redacted)))
            elif block.signature:
                out.append(
                    SignedThinking(
                        block=Thinking(text="".join(block.text), signature=block.signature)
                    )
                )

    # -- errors --------------------------------------------------------------------------------

    def _exception(self, headers: Mapping[str, object], payload: bytes) -> None:
        name = headers.get(":exception-type")
        message = None
        try:
            data = _loads(payload) if payload else None
        except ValueError:
            data = None
        if isinstance(data, dict):
            found = data.get("message") or data.get("Message")
            message = found if isinstance(found, str) else None
            original = data.get("originalMessage")
            if isinstance(original, str) and original and original != message:
                message = f"{message}: {original}" if message else original
        error_type = _exception_name(name) if isinstance(name, str) and name else None
        self.error = provider_error(
            message or payload.decode("utf-8", "replace")[:500] or f"{error_type} in the stream",
            provider=PROVIDER,
            error_type=error_type,
            mid_stream=True,
        )

    def _error(self, headers: Mapping[str, object]) -> None:
        code = headers.get(":error-code")
        message = headers.get(":error-message")
        error_type = _exception_name(code) if isinstance(code, str) and code else None
        self.error = provider_error(
            message if isinstance(message, str) and message else f"stream error {code!r}",
            provider=PROVIDER,
            error_type=error_type,
            mid_stream=True,
        )
