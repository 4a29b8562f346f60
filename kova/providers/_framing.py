"""Framers: the bytes of one network read in, that read's complete frames out.

A codec names its framer (:attr:`~kova.providers.Codec.framer`); the HTTP provider feeds it
every read of a streamed body and hands the frames, as one batch, to the codec's stream
decoder. Framers keep the batch boundaries (one batch per network read), which is what lets
events cross an actor boundary per read instead of per token.

* :class:`SseFramer` -- server-sent events (OpenAI, Anthropic, Gemini): our own decoder,
  :class:`~kova.providers._sse.SseDecoder` (see its docstring for why not the library's).
* :class:`NdjsonFramer` -- newline-delimited JSON (Ollama): one frame per non-empty line.
* The AWS event-stream framer (Bedrock) lives with the Bedrock provider, on botocore's
  parser, so that ``import kova`` never loads botocore.

Every framer is pure (no I/O, no clock), bounds what it buffers, and raises
:class:`~kova.InvalidResponse` for bytes it cannot frame.
"""

from __future__ import annotations

import codecs
from typing import Generic, Protocol, TypeVar

from .._errors import InvalidResponse
from ._sse import DEFAULT_MAX_EVENT_BYTES, SseDecoder, SseEvent

__all__ = ["Framer", "NdjsonFramer", "SseFramer"]

FrameT_co = TypeVar("FrameT_co")


class Framer(Protocol, Generic[FrameT_co]):
    """Turns a byte stream into frames. One framer per stream; not task-safe."""

    def feed(self, data: bytes) -> list[FrameT_co]:
        """The frames ``data`` completed (often empty), in order."""
        ...

    def finish(self) -> list[FrameT_co]:
        """The body ended: the last, unterminated frame if any."""
        ...


class SseFramer:
    """Server-sent events. Frames are :class:`~kova.providers._sse.SseEvent` tuples."""

    __slots__ = ("_decode", "_sse")

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._sse = SseDecoder(max_event_bytes=max_event_bytes)
        # A character split across two reads is kept for the next one.
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode

    def feed(self, data: bytes) -> list[SseEvent]:
        return self._sse.feed(self._decode(data))

    def feed_text(self, text: str) -> list[SseEvent]:
        """Frames from already decoded text (tests, fakes)."""
        return self._sse.feed(text)

    def finish(self) -> list[SseEvent]:
        tail = self._decode(b"", True)
        events = self._sse.feed(tail) if tail else []
        events.extend(self._sse.finish())
        return events


class NdjsonFramer:
    """Newline-delimited JSON. Frames are the lines' text (not yet parsed: the codec parses
    each, so a bad line becomes the codec's invalid-response error with context)."""

    __slots__ = ("_buffer", "_decode", "_max")

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._buffer = ""
        self._max = max_line_bytes
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode

    def feed(self, data: bytes) -> list[str]:
        text = self._buffer + self._decode(data)
        if "\n" not in text:
            self._buffer = text
            self._check()
            return []
        lines = text.split("\n")
        self._buffer = lines.pop()
        self._check()
        return [line for line in lines if line and not line.isspace()]

    def finish(self) -> list[str]:
        rest = (self._buffer + self._decode(b"", True)).strip()
        self._buffer = ""
        return [rest] if rest else []

    def _check(self) -> None:
        if len(self._buffer) > self._max:
            raise InvalidResponse(
                f"a stream line exceeded {self._max} characters without a newline"
            )
