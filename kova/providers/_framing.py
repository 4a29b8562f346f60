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


def _utf8_decoder() -> codecs.IncrementalDecoder:
    """Incremental UTF-8, bad bytes replaced (U+FFFD): a character split across two reads is
    held back for the next one.

    The framers call it only when they must: a read that ends with an ASCII byte while the
    decoder holds nothing decodes with plain ``bytes.decode``, which gives the same text at
    a third of the cost (0.1 µs against 0.35 µs a read); stream reads nearly always end with
    a newline.
    """
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


class SseFramer:
    """Server-sent events. Frames are :class:`~kova.providers._sse.SseEvent` tuples."""

    __slots__ = ("_decoder", "_held", "_sse")

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._sse = SseDecoder(max_event_bytes=max_event_bytes)
        self._decoder = _utf8_decoder()
        self._held = False
        """The UTF-8 decoder holds the start of a character split across reads."""

    def feed(self, data: bytes) -> list[SseEvent]:
        if not self._held:
            events = self._sse.feed_whole_event(data)
            if events is not None:
                return events
        if self._held or data[-1:] >= b"\x80":
            text: str = self._decoder.decode(data)
            self._held = bool(self._decoder.getstate()[0])
            return self._sse.feed(text)
        return self._sse.feed(data.decode("utf-8", "replace"))

    def feed_text(self, text: str) -> list[SseEvent]:
        """Frames from already decoded text (tests, fakes)."""
        return self._sse.feed(text)

    def finish(self) -> list[SseEvent]:
        self._held = False
        tail: str = self._decoder.decode(b"", True)
        events = self._sse.feed(tail) if tail else []
        events.extend(self._sse.finish())
        return events


class NdjsonFramer:
    """Newline-delimited JSON. Frames are the lines' text (not yet parsed: the codec parses
    each, so a bad line becomes the codec's invalid-response error with context).

    Linear in the line length: a line that spans many reads is kept as a list of its pieces
    and joined once, when its newline arrives (joining the buffer at every read cost 6.5 s of
    CPU for one 10 MB line in 4 KB reads). A line past ``max_line_bytes`` (16 MiB) without a
    newline is an :class:`~kova.InvalidResponse` naming that limit.
    """

    __slots__ = ("_decoder", "_held", "_max", "_parts", "_size")

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._parts: list[str] = []
        """The pieces of the line not yet ended by a newline."""
        self._size = 0
        self._max = max_line_bytes
        self._decoder = _utf8_decoder()
        self._held = False
        """The UTF-8 decoder holds the start of a character split across reads."""

    def feed(self, data: bytes) -> list[str]:
        if not self._parts and not self._held and data.endswith(b"\n") and data.count(b"\n") == 1:
            # The hot path: a read that is exactly one line (one NDJSON object per HTTP chunk).
            line = data[:-1].decode("utf-8", "replace")
            return [line] if line and not line.isspace() else []
        if self._held or data[-1:] >= b"\x80":
            text: str = self._decoder.decode(data)
            self._held = bool(self._decoder.getstate()[0])
        else:
            text = data.decode("utf-8", "replace")
        if "\n" not in text:
            if text:
                self._parts.append(text)
                self._size += len(text)
                self._check()
            return []
        if self._parts:
            self._parts.append(text)
            text = "".join(self._parts)
            self._parts.clear()
        lines = text.split("\n")
        rest = lines.pop()
        self._size = len(rest)
        if rest:
            self._parts.append(rest)
            self._check()
        for line in lines:
            if not line or line.isspace():
                return [line for line in lines if line and not line.isspace()]
        return lines

    def finish(self) -> list[str]:
        self._held = False
        rest = ("".join(self._parts) + self._decoder.decode(b"", True)).strip()
        self._parts.clear()
        self._size = 0
        return [rest] if rest else []

    def _check(self) -> None:
        if self._size > self._max:
            raise InvalidResponse(
                f"a stream line exceeded {self._max} characters without a newline "
                "(the line size limit, max_line_bytes)"
            )
