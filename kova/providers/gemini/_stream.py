"""Gemini ``streamGenerateContent?alt=sse`` → kova stream events. Pure: fed frames, returns
events.

Each SSE event is one whole ``GenerateContentResponse`` whose parts are *new* content:

* a ``text`` part → :class:`~kova.TextDelta`; with ``thought: true`` →
  :class:`~kova.ThinkingDelta` (never text); a ``thoughtSignature`` on a text part goes on
  its delta as provider metadata (even when the text is empty, as the last chunk often is),
  so the accumulated :class:`~kova.Text` carries it; one on a thought part ends that
  thought: a :class:`~kova.SignedThinking` with the thought's text (the pieces since the
  last other part) and the signature in its ``provider_metadata``, for history;
* a ``functionCall`` part (it always arrives whole) → :class:`~kova.providers.ToolUseStart`
  (id, name, and the part's ``thoughtSignature`` as provider metadata), one
  :class:`~kova.providers.ToolUseDelta` with the arguments, :class:`~kova.providers.ToolUseEnd`;
* ``finishReason`` → :class:`~kova.providers.StopEvent` (``STOP`` after calls is a tool use) with a
  :class:`~kova.providers.UsageEvent` of the chunk's ``usageMetadata`` (a running snapshot);
* a chunk with ``error`` sets :attr:`GeminiStreamDecoder.error` to the classified error.

The stream has no terminator: it just ends. A body that ends before any ``finishReason``
(a cut connection) sets :class:`~kova.StreamError` in :meth:`~GeminiStreamDecoder.finish`,
so a cut stream never looks like a short answer. A blocked prompt (``promptFeedback``, no
candidates) stops with ``unknown("blocked:<reason>")``.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    MediaOutput,
    SignedThinking,
    StopEvent,
    StopReason,
    StreamEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    UsageEvent,
    text_delta,
)
from .._codec import bad_shape, ended_early, optional_str
from .._shared import whole_call
from ._convert import (
    PROVIDER,
    answer_media,
    blocked_reason,
    decode_usage,
    finish_reason_to_stop,
    signature_metadata,
    stream_error,
    tool_use_of,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._sse import SseEvent

__all__ = ["GeminiStreamDecoder"]


class GeminiStreamDecoder:
    """Decodes one Gemini stream. One decoder per stream; not task-safe."""

    __slots__ = ("_calls", "_stopped", "_thought", "_usage", "_usage_sent", "error")

    def __init__(self) -> None:
        self.error: KovaError | None = None
        self._calls = 0
        """Function calls seen (their stream indices are 0, 1, ...)."""
        self._stopped = False
        self._usage: object = None
        """The last ``usageMetadata`` snapshot."""
        self._usage_sent: object = None
        self._thought: list[str] = []
        """The pieces of the thought part in progress (a signed piece ends it)."""

    def feed(self, frames: Sequence[SseEvent]) -> list[StreamEvent]:
        """Decode the server-sent events of one network read."""
        out: list[StreamEvent] = []
        if self.error is not None:
            return out
        parse = loads
        append = out.append
        try:
            for sse in frames:
                data = sse.data
                if not data:
                    continue
                try:
                    chunk = parse(data)
                except ValueError as exc:
                    raise InvalidResponse(
                        f"the stream sent a chunk that is not JSON ({exc}): {data[:200]!r}",
                        provider=PROVIDER,
                    ) from None
                # The hot path: one candidate, no finishReason, one part that is plain text.
                # Subscripts instead of type checks: only a dict takes a string subscript, so a
                # chunk of any other shape fails here and the checked path below reports it.
                try:
                    candidate = chunk["candidates"][0]
                    parts = candidate["content"]["parts"]
                    part = parts[0]
                    text = part["text"]
                except (LookupError, TypeError):
                    text = None
                if (
                    type(text) is str
                    and len(parts) == 1
                    and len(part) == 1
                    and "finishReason" not in candidate
                    and "error" not in chunk
                ):
                    if text:
                        append(text_delta(text))
                    if self._thought:
                        self._thought.clear()  # a thought ends where other content begins
                    usage = chunk.get("usageMetadata")
                    if usage is not None:
                        self._usage = usage
                    continue
                if type(chunk) is not dict:
                    raise _bad_shape("a stream chunk", chunk)
                if "error" in chunk:
                    self.error = stream_error(chunk["error"])
                    break
                self._chunk(chunk, out)
        except InvalidResponse as exc:
            self.error = exc
        return out

    def _chunk(self, chunk: Mapping[str, object], out: list[StreamEvent]) -> None:
        usage = chunk.get("usageMetadata")
        if usage is not None:
            self._usage = usage
        candidates = chunk.get("candidates")
        if not candidates:
            reason = blocked_reason(chunk)
            if reason is not None and not self._stopped:
                self._stop(StopReason.unknown(f"blocked:{reason}"), out, chunk)
            return
        if type(candidates) is not list or type(candidate := candidates[0]) is not dict:
            raise _bad_shape("candidates", candidates)
        content = candidate.get("content")
        if content:
            if type(content) is not dict:
                raise _bad_shape("candidate.content", content)
            parts = content.get("parts")
            if parts:
                if type(parts) is not list:
                    raise _bad_shape("content.parts", parts)
                response_id = chunk.get("responseId")
                salt = response_id if type(response_id) is str else ""
                self._decode_parts(parts, out, salt)
        finish = candidate.get("finishReason")
        if finish is not None and not self._stopped:
            reason = finish if type(finish) is str else None
            self._stop(finish_reason_to_stop(reason, has_tool_calls=self._calls > 0), out, chunk)

    def _decode_parts(self, parts: list[object], out: list[StreamEvent], salt: str) -> None:
        for part in parts:
            if type(part) is not dict:
                raise _bad_shape("a part", part)
            text = part.get("text")
            if text is not None:
                if type(text) is not str:
                    raise _bad_shape("a part's text", text)
                if part.get("thought") is True:
                    if text:
                        out.append(ThinkingDelta(text=text))
                        self._thought.append(text)
                    if (metadata := signature_metadata(part)) is not None:
                        thought = Thinking(text="".join(self._thought), provider_metadata=metadata)
                        self._thought.clear()
                        out.append(SignedThinking(block=thought))
                    continue
                self._thought.clear()
                if (metadata := signature_metadata(part)) is not None:
                    # Ends the text part (even an empty one): the Text keeps the signature.
                    out.append(TextDelta(text=text, provider_metadata=metadata))
                elif text:
                    out.append(text_delta(text))
                continue
            self._thought.clear()
            if "functionCall" in part:
                index = self._calls
                out.extend(whole_call(index, tool_use_of(part, index, salt=salt)))
                self._calls += 1
            elif "inlineData" in part:
                out.append(MediaOutput(block=answer_media(part["inlineData"])))

    def _stop(self, stop: StopReason, out: list[StreamEvent], chunk: Mapping[str, object]) -> None:
        """End the answer; ``chunk`` (the one that ended it) names its model and id."""
        self._stopped = True
        out.append(
            StopEvent(
                stop_reason=stop,
                model=optional_str(chunk.get("modelVersion")),
                id=optional_str(chunk.get("responseId")),
            )
        )
        self._flush_usage(out)

    def _flush_usage(self, out: list[StreamEvent]) -> None:
        if self._usage is not None and self._usage is not self._usage_sent:
            usage = decode_usage(self._usage)
            self._usage_sent = self._usage
            if usage is not None:
                out.append(UsageEvent(usage=usage))

    def finish(self) -> list[StreamEvent]:
        """The body ended: a usage snapshot that came after the stop, if any. Sets
        :attr:`error` when no ``finishReason`` arrived (the stream was cut)."""
        if self.error is not None:
            return []
        if not self._stopped:
            self.error = ended_early("a finishReason: the answer is incomplete")
            return []
        out: list[StreamEvent] = []
        self._flush_usage(out)
        return out


_bad_shape = partial(bad_shape, provider=PROVIDER)
