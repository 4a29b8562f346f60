"""Chat Completions SSE stream → kova stream events. Pure: fed text, returns events.

::

    decoder = OpenAiStreamDecoder()
    for frames in reads:               # SSE frames of one network read (SseFramer)
        batch = decoder.feed(frames)   # list[StreamEvent], possibly empty
    tail = decoder.finish()            # sets decoder.error if the stream was cut short

Events, in wire order:

* ``delta.content`` → :class:`TextDelta`; ``delta.reasoning_content`` / ``delta.reasoning``
  (DeepSeek, vLLM, Ollama ``/v1``, OpenRouter) → :class:`ThinkingDelta`; ``delta.refusal`` →
  :class:`TextDelta` (and the stop reason becomes ``unknown("refusal")``).
* ``delta.tool_calls[]``: the first fragment of an ``index`` → :class:`ToolUseStart` (id and
  name), every non-empty ``arguments`` piece → :class:`ToolUseDelta`. Calls may interleave.
  Fragments without ``index`` fall back to "same id, same call", else the last call (some
  compatible servers omit it).
* ``finish_reason`` → :class:`ToolUseEnd` for each open call, then :class:`StopEvent`.
* the ``choices: []`` chunk with ``usage`` → :class:`UsageEvent`.
* ``data: [DONE]`` ends the stream; if it comes without a ``finish_reason`` the decoder closes
  open calls and stops as if one had arrived.

A ``data:`` object with an ``error`` key sets :attr:`OpenAiStreamDecoder.error` to the
classified error (a ``rate_limit_exceeded`` chunk is :class:`~kova.RateLimited`, as HTTP 429
would be); a chunk that is not JSON, or of the wrong shape, sets
:class:`~kova.InvalidResponse`; a stream that ends with neither ``[DONE]`` nor a
``finish_reason`` sets :class:`~kova.StreamError`: never a silently short answer. Decoding
stops at the first error (the codec contract in :mod:`kova.providers._codec`).

The hot path per chunk is one ``json.loads`` and a few dict lookups.
"""

from __future__ import annotations

import base64
from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    Audio,
    MediaOutput,
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
from .._codec import bad_shape, ended_early, optional_str
from ._convert import (
    PROVIDER,
    canonical_arguments,
    decode_usage,
    error_object,
    finish_reason_to_stop,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .._sse import SseEvent

__all__ = ["OpenAiStreamDecoder"]


class OpenAiStreamDecoder:
    """Decodes one Chat Completions stream. One decoder per stream; not task-safe."""

    __slots__ = (
        "_arguments",
        "_audio",
        "_audio_format",
        "_done",
        "_ids",
        "_last_index",
        "_open_calls",
        "_reasoning",
        "_refused",
        "_saw_text",
        "_stopped",
        "error",
    )

    def __init__(self, *, keep_reasoning: bool = False, audio_format: str = "wav") -> None:
        self.error: KovaError | None = None
        self._audio: list[bytes] = []
        """A spoken answer's speech so far (each chunk's ``audio.data`` is base64 of its own)."""
        self._audio_format = audio_format
        self._reasoning: list[str] | None = [] if keep_reasoning else None
        """With ``keep_reasoning``: reasoning text not yet emitted as a ``SignedThinking``."""
        self._open_calls: list[int] = []
        """Indices of tool calls started and not yet ended, in start order."""
        self._ids: dict[str, int] = {}
        self._arguments: dict[int, list[str]] = {}
        """The model's argument text per call, kept to echo it back byte for byte."""
        self._last_index = 0
        self._stopped = False
        self._done = False
        self._refused = False
        self._saw_text = False

    def finish(self) -> list[StreamEvent]:
        """The body ended. Returns the last events; sets :attr:`error` if the stream ended
        before ``[DONE]`` or a ``finish_reason``."""
        if self.error is not None:
            return []
        if not self._done and not self._stopped:
            self.error = ended_early("[DONE] or a finish_reason: the answer is incomplete")
            return []
        return [] if self._stopped else self._stop(None)

    def feed(self, frames: Sequence[SseEvent]) -> list[StreamEvent]:
        """Decode the server-sent events of one network read."""
        out: list[StreamEvent] = []
        if self._done or self.error is not None:
            return out
        append = out.append
        parse = loads
        for sse in frames:
            data = sse.data
            if data == "[DONE]":
                self._done = True
                if not self._stopped:
                    out.extend(self._stop(None))
                break
            try:
                chunk = parse(data)
            except ValueError as exc:
                self.error = InvalidResponse(
                    f"the stream sent a chunk that is not JSON ({exc}): {data[:200]!r}",
                    provider=PROVIDER,
                )
                break
            if type(chunk) is not dict:
                self.error = _bad_shape("a stream chunk", chunk)
                break
            if chunk.get("error") is not None:
                self.error = error_object(chunk["error"], mid_stream=True)
                break
            choices = chunk.get("choices")
            if choices:
                if type(choices) is not list or type(choice := choices[0]) is not dict:
                    self.error = _bad_shape("choices", choices)
                    break
                delta = choice.get("delta")
                if delta:
                    if type(delta) is not dict:
                        self.error = _bad_shape("delta", delta)
                        break
                    content = delta.get("content")
                    if content:
                        if type(content) is not str:
                            self.error = _bad_shape("delta.content", content)
                            break
                        self._saw_text = True
                        if self._reasoning:
                            self._flush_reasoning(out)
                        append(text_delta(content))
                    # The common text chunk is {"content": "..."}: nothing else to look at.
                    if content is None or len(delta) > 1:
                        self._other_delta(delta, out)
                finish = choice.get("finish_reason")
                if finish and not self._stopped:
                    out.extend(self._stop(finish if type(finish) is str else None, chunk))
            usage = chunk.get("usage")
            if usage:
                decoded = decode_usage(usage)
                if decoded is not None:
                    append(UsageEvent(usage=decoded))
        return out

    def _other_delta(self, delta: Mapping[str, object], out: list[StreamEvent]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            out.append(ThinkingDelta(text=reasoning))
            if self._reasoning is not None:
                self._reasoning.append(reasoning)
        calls = delta.get("tool_calls")
        if calls and isinstance(calls, list):
            if self._reasoning:
                self._flush_reasoning(out)
            self._tool_calls(calls, out)
        refusal = delta.get("refusal")
        if refusal and isinstance(refusal, str):
            self._refused = True
            out.append(TextDelta(text=refusal))
        audio = delta.get("audio")
        if audio and isinstance(audio, dict):
            # A spoken answer streams its transcript here (content stays empty); the speech
            # itself (audio.data) has no stream event yet and is not kept.
            transcript = audio.get("transcript")
            if transcript and isinstance(transcript, str):
                self._saw_text = True
                out.append(TextDelta(text=transcript))
            data = audio.get("data")
            if data and isinstance(data, str):
                try:
                    self._audio.append(base64.b64decode(data, validate=True))
                except ValueError as exc:
                    raise InvalidResponse(
                        f"a spoken answer's audio.data is not base64: {exc}", provider=PROVIDER
                    ) from exc

    def _tool_calls(self, calls: list[Mapping[str, object]], out: list[StreamEvent]) -> None:
        for call in calls:
            index = call.get("index")
            call_id = call.get("id")
            if not isinstance(index, int):
                if isinstance(call_id, str) and call_id in self._ids:
                    index = self._ids[call_id]
                elif isinstance(call_id, str) and call_id:
                    index = len(self._ids)
                else:
                    index = self._last_index
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            if index not in self._open_calls and (
                not isinstance(call_id, str) or call_id not in self._ids
            ):
                name = function.get("name")
                if not isinstance(name, str) or not name:
                    # A call starts with its name (the SDK's accumulator takes it from the
                    # first delta too); one without is not a call kova can answer.
                    raise InvalidResponse(
                        f"the stream started tool call {index} without a function name",
                        provider=PROVIDER,
                    )
                identifier = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
                self._ids[identifier] = index
                self._open_calls.append(index)
                out.append(ToolUseStart(index=index, id=identifier, name=name))
            self._last_index = index
            arguments = function.get("arguments")
            if arguments and isinstance(arguments, str):
                self._arguments.setdefault(index, []).append(arguments)
                out.append(ToolUseDelta(index=index, partial_json=arguments))

    def _flush_reasoning(self, out: list[StreamEvent]) -> None:
        """Reasoning ended (an answer or a tool call began): hand it over as one block that
        enters history (``keep_reasoning``); its text already streamed as ThinkingDeltas."""
        assert self._reasoning is not None
        out.append(SignedThinking(block=Thinking(text="".join(self._reasoning))))
        self._reasoning.clear()

    def _stop(
        self, finish_reason: str | None, chunk: Mapping[str, object] | None = None
    ) -> list[StreamEvent]:
        """The events that end the answer; ``chunk`` is the one with the finish reason
        (every chunk carries the answer's ``id`` and ``model``)."""
        self._stopped = True
        has_calls = bool(self._ids)
        events: list[StreamEvent] = []
        if self._reasoning:
            self._flush_reasoning(events)
        if self._audio:
            speech = Audio(data=b"".join(self._audio), format=self._audio_format)
            self._audio = []
            events.append(MediaOutput(block=speech))
        for index in self._open_calls:
            raw = "".join(self._arguments.get(index, ()))
            metadata = canonical_arguments(raw)
            events.append(ToolUseEnd(index=index, provider_metadata=metadata))
        self._open_calls = []
        stop = finish_reason_to_stop(finish_reason, has_tool_calls=has_calls)
        if self._refused and not self._saw_text:
            stop = StopReason.unknown("refusal")
        if chunk is None:
            events.append(StopEvent(stop_reason=stop))
        else:
            events.append(
                StopEvent(
                    stop_reason=stop,
                    model=optional_str(chunk.get("model")),
                    id=optional_str(chunk.get("id")),
                )
            )
        return events


_bad_shape = partial(bad_shape, provider=PROVIDER)
