"""Responses API SSE stream -> kova stream events. Pure: fed frames, returns events.

Every event's ``data`` is a JSON object whose ``type`` names it (the ``event:`` line is not
needed: some proxies drop it). There is no ``[DONE]``: the stream ends after one terminal
event (``response.completed`` / ``response.incomplete`` / ``response.failed``) or an ``error``
event; a trailing ``[DONE]`` from a proxy is ignored.

* ``response.output_text.delta`` / ``response.refusal.delta`` -> :class:`TextDelta`;
* ``response.reasoning_summary_text.delta`` (and a compatible server's
  ``response.reasoning_text.delta``) -> :class:`ThinkingDelta`, with ``"\\n\\n"`` between
  summary paragraphs (the non-streamed ``thinking`` joins them the same way);
* ``response.output_item.added`` of a ``function_call`` -> :class:`ToolUseStart` (``index`` is
  the ``output_index``, ``id`` the ``call_id``); ``response.function_call_arguments.delta``
  -> :class:`ToolUseDelta`;
* ``response.output_item.done`` is authoritative: a reasoning item is kept (with its
  ``encrypted_content``) for the item that follows it; a ``function_call`` ends with a
  :class:`ToolUseEnd` whose ``provider_metadata`` carries its id and that reasoning; a
  ``message`` ends with an empty :class:`TextDelta` carrying the same (see
  :mod:`._responses_convert`). Text or arguments a server sent only in the ``done`` item
  are emitted there;
* the terminal event -> :class:`StopEvent` and :class:`UsageEvent`.

``response.failed`` and ``error`` events (either shape: the documented flat ``code`` /
``message``, or the nested ``error`` object production sends, which wins) set
:attr:`ResponsesStreamDecoder.error` to the error classified like its HTTP status (a
``rate_limit_exceeded`` before any content is retried like a 429). A frame that is not JSON
or has the wrong shape, or a delta for an item that was never added, sets
:class:`~kova.InvalidResponse`; a stream that ends before its terminal event sets
:class:`~kova.StreamError`. Decoding stops at the first error.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse, KovaError
from ..._json import loads
from ..._models import (
    StopEvent,
    StreamEvent,
    Text,
    TextDelta,
    ThinkingDelta,
    ToolUse,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
    text_delta,
)
from .._codec import bad_shape, ended_early, optional_str
from ._convert import canonical_arguments, encode_arguments
from ._responses_convert import (
    PROVIDER,
    Origin,
    compaction_item,
    decode_response,
    decode_usage,
    item_metadata,
    message_text,
    reasoning_item,
    response_error,
    searched_item,
    stop_reason_of,
    summary_text,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..._models import JSONValue
    from .._sse import SseEvent

__all__ = ["ResponsesStreamDecoder"]

_TEXT_DELTA = "response.output_text.delta"
_TERMINAL = frozenset({"response.completed", "response.incomplete"})


class ResponsesStreamDecoder:
    """Decodes one Responses stream. One decoder per stream; not task-safe."""

    __slots__ = (
        "_arguments",
        "_calls",
        "_done",
        "_endpoint",
        "_has_calls",
        "_model",
        "_reasoning",
        "_refused",
        "_saw_items",
        "_saw_text",
        "_streamed_text",
        "_streamed_thinking",
        "error",
    )

    def __init__(self, *, endpoint: str) -> None:
        self.error: KovaError | None = None
        self._endpoint = endpoint
        self._model: str | None = None
        self._calls: dict[int, bool] = {}
        """Open function calls by output_index -> whether argument deltas arrived."""
        self._arguments: dict[int, list[str]] = {}
        self._reasoning: list[JSONValue] = []
        """Reasoning items (``done`` versions) waiting for the item that follows them."""
        self._streamed_text = False
        """Text deltas arrived for the message item being streamed."""
        self._streamed_thinking = False
        self._saw_items = False
        self._has_calls = False
        self._saw_text = False
        self._refused = False
        self._done = False

    def finish(self) -> list[StreamEvent]:
        """The body ended: sets :attr:`error` unless a terminal event came first."""
        if self.error is None and not self._done:
            self.error = ended_early("response.completed: the answer is incomplete")
        return []

    def feed(self, frames: Sequence[SseEvent]) -> list[StreamEvent]:
        """Decode the server-sent events of one network read."""
        out: list[StreamEvent] = []
        if self._done or self.error is not None:
            return out
        for sse in frames:
            data = sse.data
            try:
                event = loads(data)
            except ValueError:
                if data.strip() == "[DONE]":
                    continue
                self.error = InvalidResponse(
                    f"the stream sent an event that is not JSON: {data[:200]!r}",
                    provider=PROVIDER,
                )
                break
            if type(event) is not dict:
                self.error = _bad_shape("an event", event)
                break
            kind = event.get("type")
            if kind == _TEXT_DELTA:
                delta = event.get("delta")
                if type(delta) is not str:
                    self.error = _bad_shape("an output_text delta", delta)
                    break
                self._streamed_text = True
                if delta:
                    out.append(text_delta(delta))
                continue
            try:
                self._other(kind, event, out)
            except KovaError as exc:
                self.error = exc
                break
            if self._ended():
                break
        return out

    def _ended(self) -> bool:
        return self._done or self.error is not None

    def _other(self, kind: object, event: Mapping[str, JSONValue], out: list[StreamEvent]) -> None:
        match kind:
            case "response.function_call_arguments.delta":
                index = event.get("output_index")
                delta = event.get("delta")
                if type(index) is not int or index not in self._calls:
                    raise InvalidResponse(
                        f"function call arguments for output item {index!r}, which was never added",
                        provider=PROVIDER,
                    )
                if type(delta) is not str:
                    raise _bad_shape("a function_call_arguments delta", delta)
                if delta:
                    self._calls[index] = True
                    self._arguments.setdefault(index, []).append(delta)
                    out.append(ToolUseDelta(index=index, partial_json=delta))
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                delta = event.get("delta")
                if type(delta) is not str:
                    raise _bad_shape("a reasoning delta", delta)
                if delta:
                    self._streamed_thinking = True
                    out.append(ThinkingDelta(text=delta))
            case "response.reasoning_summary_part.added":
                index = event.get("summary_index")
                if type(index) is int and index > 0 and self._streamed_thinking:
                    out.append(ThinkingDelta(text="\n\n"))
            case "response.refusal.delta":
                delta = event.get("delta")
                if type(delta) is not str:
                    raise _bad_shape("a refusal delta", delta)
                self._streamed_text = True
                self._refused = True
                if delta:
                    out.append(TextDelta(text=delta))
            case "response.output_item.added":
                self._added(event, out)
            case "response.output_item.done":
                self._item_done(event, out)
            case "response.created" | "response.in_progress":
                response = event.get("response")
                model = response.get("model") if isinstance(response, dict) else None
                if isinstance(model, str):
                    self._model = model
            case "response.completed" | "response.incomplete":
                self._terminal(event, out)
            case "response.failed":
                response = event.get("response")
                error = response.get("error") if isinstance(response, dict) else None
                self.error = response_error(error, mid_stream=True)
            case "error":
                nested = event.get("error")
                self.error = response_error(
                    nested if isinstance(nested, dict) else event, mid_stream=True
                )
            case _:
                pass  # hosted-tool progress, annotations, part markers, future events

    def _added(self, event: Mapping[str, JSONValue], out: list[StreamEvent]) -> None:
        index = event.get("output_index")
        item = event.get("item")
        if type(index) is not int or not isinstance(item, dict):
            raise _bad_shape("an output_item.added event", event)
        self._saw_items = True
        kind = item.get("type")
        if kind == "function_call":
            self._start_call(index, item, out)
        elif kind == "message":
            self._streamed_text = False
        elif kind == "reasoning":
            self._streamed_thinking = False

    def _start_call(
        self, index: int, item: Mapping[str, JSONValue], out: list[StreamEvent]
    ) -> None:
        call_id = item.get("call_id")
        name = item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise _bad_shape("a function_call item", item)
        self._calls[index] = False
        self._has_calls = True
        out.append(ToolUseStart(index=index, id=call_id or f"call_{index}", name=name))

    def _item_done(self, event: Mapping[str, JSONValue], out: list[StreamEvent]) -> None:
        index = event.get("output_index")
        item = event.get("item")
        if type(index) is not int or not isinstance(item, dict):
            raise _bad_shape("an output_item.done event", event)
        self._saw_items = True
        kind = item.get("type")
        origin = Origin(self._endpoint, self._model)
        if kind == "reasoning":
            if not self._streamed_thinking:
                text = summary_text(item)
                if text:
                    out.append(ThinkingDelta(text=text))
            self._reasoning.append(reasoning_item(item))
        elif kind in ("tool_search_call", "tool_search_output"):
            self._reasoning.append(searched_item(item))
        elif kind == "compaction":  # the server compacted: goes back before what follows
            self._reasoning.append(compaction_item(item))
        elif kind == "message":
            text, refused = message_text(item)
            if not self._streamed_text:
                if text:
                    out.append(TextDelta(text=text))
                self._refused = self._refused or refused
            self._saw_text = self._saw_text or (bool(text) and not refused)
            metadata = item_metadata(item, self._reasoning, origin, refusal=refused)
            self._reasoning = []
            if metadata is not None:
                out.append(TextDelta(text="", provider_metadata=metadata))
        elif kind == "function_call":
            if index not in self._calls:
                self._start_call(index, item, out)
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                arguments = "".join(self._arguments.get(index, ()))
            elif not self._calls[index] and arguments:
                out.append(ToolUseDelta(index=index, partial_json=arguments))
            del self._calls[index]
            self._arguments.pop(index, None)
            metadata = item_metadata(item, self._reasoning, origin, canonical_arguments(arguments))
            self._reasoning = []
            out.append(ToolUseEnd(index=index, provider_metadata=metadata))

    def _terminal(self, event: Mapping[str, JSONValue], out: list[StreamEvent]) -> None:
        response = event.get("response")
        if not isinstance(response, dict):
            raise _bad_shape("a terminal event's response", response)
        self._done = True
        model = response.get("model")
        if isinstance(model, str) and self._model is None:
            self._model = model
        if not self._saw_items:
            # A server that sent only the final response: take its output whole.
            decoded = decode_response(response, endpoint=self._endpoint)
            _emit_blocks(decoded.content, decoded.thinking, out)
            self._has_calls = bool(decoded.tool_uses)
        for index in self._calls:
            out.append(ToolUseEnd(index=index))
        self._calls = {}
        out.append(
            StopEvent(
                stop_reason=stop_reason_of(
                    response.get("status"),
                    response.get("incomplete_details"),
                    has_calls=self._has_calls,
                    refused=self._refused and not self._saw_text,
                ),
                model=optional_str(response.get("model")),
                id=optional_str(response.get("id")),
            )
        )
        usage = decode_usage(response.get("usage"))
        if usage is not None:
            out.append(UsageEvent(usage=usage))


def _emit_blocks(content: Sequence[object], thinking: str | None, out: list[StreamEvent]) -> None:
    if thinking:
        out.append(ThinkingDelta(text=thinking))
    for index, block in enumerate(content):
        if isinstance(block, Text):
            out.append(TextDelta(text=block.text, provider_metadata=block.provider_metadata))
        elif isinstance(block, ToolUse):
            out.append(ToolUseStart(index=index, id=block.id, name=block.name))
            out.append(ToolUseDelta(index=index, partial_json=encode_arguments(block)))
            out.append(ToolUseEnd(index=index, provider_metadata=block.provider_metadata))


_bad_shape = partial(bad_shape, provider=PROVIDER)
