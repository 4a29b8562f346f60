"""Ollama's NDJSON ``/api/chat`` stream → kova stream events. Pure: fed lines, returns events.

Each line is a whole JSON object with *delta* ``message.thinking`` / ``message.content`` and,
on its own line, whole tool calls (name and arguments object):

* ``thinking`` → :class:`~kova.ThinkingDelta`; ``content`` → :class:`~kova.TextDelta`;
* each ``tool_calls`` item → :class:`~kova.providers.ToolUseStart` (kova's stable id, as Ollama
  sends none), one :class:`~kova.providers.ToolUseDelta` with the arguments,
  :class:`~kova.providers.ToolUseEnd`;
* the ``done: true`` line → :class:`~kova.providers.StopEvent` (``stop`` after calls is a tool use)
  and :class:`~kova.providers.UsageEvent` (``prompt_eval_count``, ``eval_count``);
* an ``{"error": "..."}`` line (the status stays 200) sets
  :attr:`OllamaStreamDecoder.error` to the classified error.

A body that ends without a ``done: true`` line sets :class:`~kova.StreamError` in
:meth:`~OllamaStreamDecoder.finish`; a line that is not JSON or has the wrong shape sets
:class:`~kova.InvalidResponse`. Decoding stops at the first error.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    StopEvent,
    StreamEvent,
    ThinkingDelta,
    UsageEvent,
    text_delta,
)
from .._classify import provider_error
from .._codec import bad_shape, ended_early, optional_str
from .._shared import whole_call
from ._convert import PROVIDER, decode_usage, done_reason_to_stop, error_of, tool_use_of

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["OllamaStreamDecoder"]


class OllamaStreamDecoder:
    """Decodes one Ollama chat stream. One decoder per stream; not task-safe."""

    __slots__ = ("_calls", "_done", "error")

    def __init__(self) -> None:
        self.error: KovaError | None = None
        self._calls = 0
        self._done = False

    def feed(self, frames: Sequence[str]) -> list[StreamEvent]:
        """Decode the lines of one network read."""
        out: list[StreamEvent] = []
        if self.error is not None or self._done:
            return out
        parse = loads
        try:
            for line in frames:
                try:
                    chunk = parse(line)
                except ValueError as exc:
                    raise InvalidResponse(
                        f"the stream sent a line that is not JSON ({exc}): {line[:200]!r}",
                        provider=PROVIDER,
                    ) from None
                if type(chunk) is not dict:
                    raise _bad_shape("a stream line", chunk)
                if "error" in chunk:
                    reported = error_of(chunk) or "unknown error"
                    self.error = provider_error(reported, provider=PROVIDER, mid_stream=True)
                    break
                message = chunk.get("message")
                if message:
                    if type(message) is not dict:
                        raise _bad_shape("message", message)
                    thinking = message.get("thinking")
                    if thinking:
                        if type(thinking) is not str:
                            raise _bad_shape("message.thinking", thinking)
                        out.append(ThinkingDelta(text=thinking))
                    content = message.get("content")
                    if content:
                        if type(content) is not str:
                            raise _bad_shape("message.content", content)
                        out.append(text_delta(content))
                    calls = message.get("tool_calls")
                    if calls:
                        if type(calls) is not list:
                            raise _bad_shape("message.tool_calls", calls)
                        created = chunk.get("created_at")
                        self._tool_calls(calls, out, created if type(created) is str else "")
                if chunk.get("done") is True:
                    self._done = True
                    reason = chunk.get("done_reason")
                    stop = done_reason_to_stop(
                        reason if type(reason) is str else None, has_tool_calls=self._calls > 0
                    )
                    out.append(StopEvent(stop_reason=stop, model=optional_str(chunk.get("model"))))
                    out.append(UsageEvent(usage=decode_usage(chunk)))
                    break
        except InvalidResponse as exc:
            self.error = exc
        return out

    def _tool_calls(self, calls: list[object], out: list[StreamEvent], salt: str) -> None:
        for call in calls:
            index = self._calls
            out.extend(whole_call(index, tool_use_of(call, index, salt=salt)))
            self._calls += 1

    def finish(self) -> list[StreamEvent]:
        """The body ended. Sets :attr:`error` when no ``done: true`` line came."""
        if self.error is None and not self._done:
            self.error = ended_early("its done line: the answer is incomplete")
        return []


_bad_shape = partial(bad_shape, provider=PROVIDER)
