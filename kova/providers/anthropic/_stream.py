"""Anthropic's streaming events (already framed as server-sent events) to kova stream events.

The decoder is pure: it is fed parsed SSE events (an event name and its ``data`` text), one
network read's worth at a time, and returns that read's kova events as one batch.

Event order on the wire (``shared/wire/anthropic.md``, "Streaming")::

    message_start
    (content_block_start, content_block_delta*, content_block_stop)*   # per block index
    message_delta        # stop_reason, cumulative output usage
    message_stop
    # ping anywhere; error instead of the rest when the server fails after HTTP 200

Thinking text reaches the stream exactly once: as :class:`~kova.ThinkingDelta`\\ s while the
block streams. The :class:`~kova.SignedThinking` emitted at the block's stop carries the
complete block for history (text plus signature) and is not display text.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    RedactedThinking,
    SignedThinking,
    StopEvent,
    StopReason,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
    text_delta,
)
from .._classify import provider_error
from .._codec import ended_early, optional_str
from .._sse import SseEvent
from ._convert import (
    PROVIDER,
    SERVER_BLOCKS_KEY,
    compaction_text,
    decode_stop_reason,
    decode_usage,
    is_tool_search,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ..._models import JSONValue

__all__ = ["AnthropicStreamDecoder", "SseLike"]


class SseLike(Protocol):
    """What the decoder needs of a server-sent event (``kova.providers._sse.SseEvent``,
    ``httpx2.ServerSentEvent``)."""

    @property
    def event(self) -> str: ...

    @property
    def data(self) -> str: ...


# Block kinds, per content block index.
_TEXT = 0
_THINKING = 1
_REDACTED = 2
_TOOL = 3
_OTHER = 4  # other server tool blocks and future types: their deltas are skipped
_SERVER = 5  # the provider's own tool search: kept whole for history (SERVER_BLOCKS_KEY)
_COMPACTION = 6  # the server's summary of what came before (context_management compaction)

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens_details",
)


class _Block:
    __slots__ = ("block", "data", "kind", "raw", "signature", "text")

    def __init__(self, kind: int) -> None:
        self.kind = kind
        self.text: list[str] = []
        self.signature = ""
        self.data = ""
        self.raw: dict[str, JSONValue] | None = None
        self.block: dict[str, JSONValue] = {}  # a compaction block as it started


# Nearly every event of a streamed answer is a text (or thinking) delta, and the API writes it
# in exactly one form: ``{"type":"content_block_delta","index":N,"delta":{"type":"text_delta",
# "text":S}}`` with no spaces (``thinking_delta`` / ``"thinking"`` likewise). For data of that
# form the decoder parses only the string ``S`` with the json module's own string scanner
# (parsing the whole object measured ~2.9 us more per event, more than half of what a raw
# client spends on the event). Anything else, and any variation of the form (spacing, key
# order, more keys), takes the general path, which parses the whole object.
_DELTA_HEAD = '{"type":"content_block_delta","index":'
_DELTA_TYPE = ',"delta":{"type":"'
_TEXT_TAIL = 'text_delta","text":"'
_THINKING_TAIL = 'thinking_delta","thinking":"'
_HEAD_LEN = len(_DELTA_HEAD)
_TYPE_LEN = len(_DELTA_TYPE)
_scan_string: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _invalid(message: str) -> InvalidResponse:
    return InvalidResponse(message, provider=PROVIDER)


class AnthropicStreamDecoder:
    """Turns one Messages API event stream into batches of kova stream events.

    One decoder belongs to one stream. It keeps the codec contract
    (:mod:`kova.providers._codec`): an ``error`` event sets :attr:`error` to the classified
    error (``overloaded_error`` is :class:`~kova.ProviderOverloaded`, as HTTP 529 is), a
    malformed event sets :class:`~kova.InvalidResponse`, and :meth:`finish` sets a
    :class:`~kova.StreamError` when the stream stopped before ``message_stop``; decoding stops
    at the first error, and the events before it in the same read are returned.
    """

    __slots__ = ("_blocks", "_finished", "_id", "_model", "_stop_reason", "_usage", "error")

    def __init__(self) -> None:
        self._model: str | None = None
        self._id: str | None = None
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, object] = {}
        self._stop_reason: StopReason | None = None
        self._finished = False
        self.error: KovaError | None = None

    @property
    def finished(self) -> bool:
        """``message_stop`` arrived."""
        return self._finished

    def feed(self, events: Iterable[SseLike]) -> list[StreamEvent]:
        """Decode the SSE events of one network read into one batch of kova events."""
        out: list[StreamEvent] = []
        blocks = self._blocks
        for sse in events:
            if self.error is not None or self._finished:
                break
            data = sse.data
            if data.startswith(_DELTA_HEAD) and data.endswith('"}}') and sse.event != "ping":
                mid = data.find(_DELTA_TYPE, _HEAD_LEN)
                index = data[_HEAD_LEN:mid]
                # A JSON integer: ASCII digits, no leading zero.
                if (
                    mid > 0
                    and index.isdigit()
                    and index.isascii()
                    and (index[0] != "0" or index == "0")
                ):
                    state = blocks.get(int(index))
                    start = mid + _TYPE_LEN
                    if state is None:
                        kind = -1
                    elif data.startswith(_TEXT_TAIL, start):
                        kind, start = _TEXT, start + len(_TEXT_TAIL)
                    elif data.startswith(_THINKING_TAIL, start):
                        kind, start = _THINKING, start + len(_THINKING_TAIL)
                    else:
                        kind = -1
                    if state is not None and kind == state.kind:
                        try:
                            text, end = _scan_string(data, start)
                        except ValueError:
                            end = 0  # not a JSON string: the general path decides
                        if end == len(data) - 2:
                            if text:
                                if kind == _TEXT:
                                    out.append(text_delta(text))
                                else:
                                    state.text.append(text)
                                    out.append(ThinkingDelta(text=text))
                            continue
            try:
                self._decode(sse.event, data, out)
            except InvalidResponse as exc:
                self.error = exc
        return out

    def feed_event(self, event: str, data: str) -> list[StreamEvent]:
        """Decode one SSE event (convenience for tests and single events)."""
        return self.feed([SseEvent(data, event)])

    def finish(self) -> list[StreamEvent]:
        """The byte stream ended: sets :attr:`error` if it stopped before ``message_stop``."""
        if self.error is None and not self._finished:
            self.error = ended_early("message_stop (connection cut?)")
        return []

    def check_complete(self) -> None:
        """Raise the stream's error, if any, once the byte stream ended."""
        self.finish()
        if self.error is not None:
            raise self.error

    def _decode(self, event: str, data: str, out: list[StreamEvent]) -> None:
        if event == "ping" or not data:
            return
        try:
            payload = loads(data)
        except ValueError as exc:
            raise _invalid(
                f"stream event {event!r} carries invalid JSON ({exc}): {data[:200]!r}"
            ) from exc
        if not isinstance(payload, dict):
            raise _invalid(f"stream event {event!r} is not a JSON object: {data[:200]!r}")
        kind = payload.get("type", event)
        if kind == "content_block_delta":
            self._delta(payload, out)
        elif kind == "content_block_start":
            self._start(payload, out)
        elif kind == "content_block_stop":
            self._stop(payload, out)
        elif kind == "message_start":
            message = payload.get("message")
            usage = None
            if isinstance(message, dict):
                usage = message.get("usage")
                self._model = optional_str(message.get("model"))
                self._id = optional_str(message.get("id"))
            if isinstance(usage, dict):
                self._merge_usage(usage)
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict):
                stop = delta.get("stop_reason")
                if isinstance(stop, str):
                    self._stop_reason = decode_stop_reason(stop)
            usage = payload.get("usage")
            if isinstance(usage, dict):
                self._merge_usage(usage)
        elif kind == "message_stop":
            self._finished = True
            out.append(
                StopEvent(
                    stop_reason=self._stop_reason or decode_stop_reason(None),
                    model=self._model,
                    id=self._id,
                )
            )
            out.append(UsageEvent(usage=decode_usage(self._usage)))
        elif kind == "error" or event == "error":
            error = payload.get("error")
            error_type = message = None
            if isinstance(error, dict):
                error_type = error.get("type")
                message = error.get("message")
            self.error = provider_error(
                message if isinstance(message, str) else data,
                provider=PROVIDER,
                error_type=error_type if isinstance(error_type, str) else None,
                mid_stream=True,
            )
        # "ping" with a JSON body, and event types newer than this decoder, are skipped.

    def _merge_usage(self, usage: Mapping[str, object]) -> None:
        # message_start carries the input counts; message_delta the *cumulative* output count
        # and, on newer API versions, the input and cache counts again. A later non-null value
        # replaces an earlier one; nothing is summed.
        for name in _USAGE_FIELDS:
            value = usage.get(name)
            if value is not None:
                self._usage[name] = value

    def _start(self, payload: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = payload.get("index")
        block = payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise _invalid(f"malformed content_block_start: {payload!r}")
        block_type = block.get("type")
        if block_type == "text":
            state = _Block(_TEXT)
            text = block.get("text")
            if isinstance(text, str) and text:
                out.append(TextDelta(text=text))
        elif block_type == "thinking":
            state = _Block(_THINKING)
            text = block.get("thinking")
            if isinstance(text, str) and text:
                state.text.append(text)
                out.append(ThinkingDelta(text=text))
            signature = block.get("signature")
            if isinstance(signature, str):
                state.signature = signature
        elif block_type == "redacted_thinking":
            state = _Block(_REDACTED)
            data = block.get("data")
            state.data = data if isinstance(data, str) else ""
        elif block_type == "compaction":  # the server compacted the context (kept, sent back)
            state = _Block(_COMPACTION)
            state.block = dict(block)
            content = block.get("content")
            if isinstance(content, str):
                state.text.append(content)
        elif block_type == "tool_use":
            state = _Block(_TOOL)
            tool_id = block.get("id")
            name = block.get("name")
            if not isinstance(tool_id, str) or not tool_id or not isinstance(name, str) or not name:
                raise _invalid(f"tool_use block without id or name: {block!r}")
            out.append(ToolUseStart(index=index, id=tool_id, name=name))
            arguments = block.get("input")
            if isinstance(arguments, dict) and arguments:
                # Deltas normally carry the input; a block that arrives with it filled in
                # (some proxies do this) streams it as one fragment.
                out.append(ToolUseDelta(index=index, partial_json=json.dumps(arguments)))
        elif block_type in ("server_tool_use", "tool_search_tool_result") and is_tool_search(block):
            state = _Block(_SERVER)
            state.raw = dict(block)
        else:
            state = _Block(_OTHER)
        self._blocks[index] = state

    def _delta(self, payload: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = payload.get("index")
        delta = payload.get("delta")
        if not isinstance(delta, dict):
            raise _invalid(f"malformed content_block_delta: {payload!r}")
        state = self._blocks.get(index) if isinstance(index, int) else None
        if state is None:
            raise _invalid(f"content_block_delta for a block that never started: {payload!r}")
        delta_type = delta.get("type")
        if delta_type == "text_delta":
            text = delta.get("text")
            if isinstance(text, str) and text and state.kind == _TEXT:
                out.append(TextDelta(text=text))
        elif delta_type == "input_json_delta":
            fragment = delta.get("partial_json")
            if isinstance(fragment, str) and fragment and state.kind == _TOOL:
                out.append(ToolUseDelta(index=index, partial_json=fragment))  # type: ignore[arg-type]
            elif isinstance(fragment, str) and state.kind == _SERVER:
                state.text.append(fragment)
        elif delta_type == "thinking_delta":
            text = delta.get("thinking")
            if isinstance(text, str) and text and state.kind == _THINKING:
                state.text.append(text)
                out.append(ThinkingDelta(text=text))
        elif delta_type == "signature_delta":
            signature = delta.get("signature")
            if isinstance(signature, str):
                state.signature = signature
        elif delta_type == "compaction_delta" and state.kind == _COMPACTION:
            content = delta.get("content")
            if isinstance(content, str):
                state.text.append(content)
            for key in ("encrypted_content", "signature"):
                value = delta.get(key)
                if isinstance(value, str):
                    state.block[key] = value
        # citations_delta and newer delta types carry nothing kova models.

    def _stop(self, payload: Mapping[str, object], out: list[StreamEvent]) -> None:
        index = payload.get("index")
        state = self._blocks.pop(index, None) if isinstance(index, int) else None
        if state is None:
            return
        if state.kind == _TOOL:
            out.append(ToolUseEnd(index=index))  # type: ignore[arg-type]
        elif state.kind == _THINKING:
            if state.signature:
                block = Thinking(text="".join(state.text), signature=state.signature)
                out.append(SignedThinking(block=block))
        elif state.kind == _REDACTED:
            out.append(SignedThinking(block=RedactedThinking(data=state.data)))
        elif state.kind == _SERVER and state.raw is not None:
            raw = state.raw
            if state.text:  # the search's input, streamed as JSON fragments
                try:
                    raw["input"] = loads("".join(state.text))
                except ValueError as exc:
                    raise _invalid(f"server_tool_use input is not JSON: {exc}") from exc
            out.append(TextDelta(text="", provider_metadata={SERVER_BLOCKS_KEY: [raw]}))
        elif state.kind == _COMPACTION:
            started = state.block
            started["content"] = "".join(state.text) if state.text else started.get("content")
            kept = compaction_text(started)
            out.append(TextDelta(text="", provider_metadata=kept.provider_metadata))
