"""Scripts: what a scripted model answers, shared by the scripted provider and the fake servers.

A :class:`Script` is a list of replies handed out in order, or a function of the request that
returns the next reply. The same script drives :class:`~kova.testing.ScriptedProvider` (no
network) and kova's wire-level fake servers (real HTTP on loopback), so a test can move from
one to the other without rewriting its model.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from .._models import (
    Audio,
    ChatRequest,
    Image,
    InferenceConfig,
    MediaOutput,
    Message,
    ModelResponse,
    RedactedThinking,
    SignedThinking,
    StopEvent,
    StopReason,
    StreamEvent,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolDefinition,
    ToolUse,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
    UsageEvent,
)
from .._record import Record, evolve

__all__ = [
    "ErrorReply",
    "Reply",
    "Script",
    "ScriptExhaustedError",
    "ScriptRequest",
    "ScriptLike",
    "StreamReply",
    "as_script",
    "reply_text",
    "reply_tool_calls",
    "response_to_events",
    "stream_events",
    "with_thinking",
]


class ErrorReply(Record):
    """Answer with an HTTP error (the scripted provider raises the matching ProviderError)."""

    status_code: int
    message: str = "scripted error"
    error_type: str | None = None
    retry_after: float | None = None


class StreamReply(Record):
    """A response with streaming details: how it is chunked and whether the stream is cut."""

    response: ModelResponse
    chunk_chars: int = 8
    """Answer text is streamed in pieces of this many characters."""
    cut_after: int | None = None
    """Cut the stream (connection drop, no stop event) after this many events."""
    hold_after: int | None = None
    """Fake servers only: send this many events, then stall (send nothing, keep the connection
    open) until the client goes away. For testing a cancel in the middle of a stream."""
    events: tuple[StreamEvent, ...] | None = None
    """Exact events to stream instead of deriving them from ``response``."""


Reply = ModelResponse | ErrorReply | StreamReply


class ScriptRequest(Record):
    """What the scripted model was asked: the :class:`~kova.providers.ChatRequest` and whether
    it was streamed. ``messages``, ``tools`` and ``config`` read through to the request."""

    request: ChatRequest
    stream: bool

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.request.messages

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        return self.request.tools

    @property
    def config(self) -> InferenceConfig:
        return self.request.config


ScriptFunction = Callable[[ScriptRequest], Reply | Awaitable[Reply]]


class ScriptExhaustedError(AssertionError):
    """The model was asked more often than the script has replies."""


class Script:
    """Replies in order, or a function computing each reply.

    ``requests`` records every request in order, so tests can assert on what the model saw.
    A script belongs to one provider or fake server at a time (it is test scaffolding: the
    cursor is plain state of whoever serves it).
    """

    def __init__(self, replies: Iterable[Reply] | ScriptFunction) -> None:
        """Args:
            replies: the replies in order, or a function of a :class:`ScriptRequest` that
                returns each reply (sync or async).

        Raises:
            TypeError: ``replies`` is neither, or one of the replies is not a reply.
        """
        self._function: ScriptFunction | None
        self._replies: list[Reply]
        if callable(replies):
            self._function = replies
            self._replies = []
        else:
            self._function = None
            self._replies = _replies_from(replies)
        self._cursor = 0
        self._numbered = _Numbering()
        self.requests: list[ScriptRequest] = []

    @property
    def remaining(self) -> int:
        """Replies not yet handed out (0 for a function script)."""
        return len(self._replies) - self._cursor

    async def next_reply(self, request: ScriptRequest) -> Reply:
        """Record the request and return the reply to it."""
        self.requests.append(request)
        if self._function is not None:
            reply = self._function(request)
            if inspect.isawaitable(reply):
                reply = await reply
            return self._numbered.reply(reply)
        if self._cursor >= len(self._replies):
            raise ScriptExhaustedError(
                f"the script has {len(self._replies)} replies but request "
                f"{len(self.requests)} arrived"
            )
        reply = self._replies[self._cursor]
        self._cursor += 1
        return self._numbered.reply(reply)


class _Numbering:
    """Numbers the ``call_N`` ids of a script's replies on across its replies: a reply whose
    call repeats a ``call_N`` id the script already handed out gets the next free number (the
    second ``reply_tool_calls`` of a script serves ``call_3`` where it says ``call_1``, after
    a first that served ``call_1`` and ``call_2``), as a real model keeps its ids unique. Other
    ids are served as written, repeated or not (to test what a provider repeating ids does)."""

    __slots__ = ("_last", "_served")

    def __init__(self) -> None:
        self._served: set[str] = set()
        self._last = 0

    def reply(self, reply: Reply) -> Reply:
        if isinstance(reply, StreamReply):
            if reply.events is not None:
                return reply
            response = self._response(reply.response)
            return reply if response is reply.response else evolve(reply, response=response)
        if isinstance(reply, ModelResponse):
            return self._response(reply)
        return reply

    def _response(self, response: ModelResponse) -> ModelResponse:
        if not response.tool_uses:
            return response
        content = []
        changed = False
        for block in response.content:
            if isinstance(block, ToolUse) and (number := _numbered(block.id)) is not None:
                if block.id in self._served:
                    number = self._last + 1
                    block = evolve(block, id=f"call_{number}")
                    changed = True
                self._served.add(block.id)
                self._last = max(self._last, number)
            content.append(block)
        return evolve(response, content=tuple(content)) if changed else response


def _numbered(call_id: str) -> int | None:
    """N for an id ``call_N`` (what reply_tool_calls makes), else ``None``."""
    prefix, _, digits = call_id.partition("_")
    if prefix != "call" or not digits.isdigit() or not digits.isascii():
        return None
    return int(digits)


ScriptLike = Script | Iterable[Reply] | ScriptFunction
"""What every scripted double takes: a :class:`Script`, a list of replies, or a function."""

_REPLY_TYPES = (ModelResponse, ErrorReply, StreamReply)
_WHAT = (
    "a Script, a list of replies (ModelResponse, ErrorReply, StreamReply) "
    "or a function of a ScriptRequest"
)


def _replies_from(replies: object) -> list[Reply]:
    if isinstance(replies, _REPLY_TYPES):
        raise TypeError(
            f"expected {_WHAT}, got a single {type(replies).__name__}; wrap it in a list"
        )
    if isinstance(replies, str | bytes | Mapping) or not isinstance(replies, Iterable):
        raise TypeError(f"expected {_WHAT}, got {type(replies).__name__}: {replies!r:.80}")
    items = list(replies)
    for number, item in enumerate(items):
        if not isinstance(item, _REPLY_TYPES):
            raise TypeError(
                f"reply {number} of the script is a {type(item).__name__} ({item!r:.60}), "
                "not a ModelResponse, ErrorReply or StreamReply"
            )
    return items


def as_script(script: ScriptLike) -> Script:
    """The :class:`Script` for whatever a scripted double was given: a ``Script`` itself, a
    list of replies, or a function of a :class:`ScriptRequest`.

    Every constructor that takes a script (``ScriptedProvider``, the fake servers and their
    ``open_*`` functions) calls this, so a mistake fails where it is made, not at the first
    request.

    Raises:
        TypeError: ``script`` is none of those; the message names what was passed.
    """
    if isinstance(script, Script):
        return script
    return Script(script)


def reply_text(
    text: str, *, usage: Usage | None = None, thinking: str | None = None
) -> ModelResponse:
    """A final answer (``end_turn``)."""
    return ModelResponse(
        content=(Text(text=text),),
        stop_reason=StopReason.END_TURN,
        usage=usage if usage is not None else Usage(input_tokens=10, output_tokens=5),
        thinking=thinking,
    )


def with_thinking(
    response: ModelResponse, thinking: str, *, signature: str | None = None
) -> ModelResponse:
    """``response`` as a thinking model sends it: a :class:`~kova.Thinking` block first (signed
    when ``signature`` is given, as Anthropic signs them), and ``thinking`` as its display text.

    Works on any reply: ``with_thinking(reply_text("4"), "2 + 2 is 4")``. Streamed, the thinking
    arrives as ``ThinkingDelta`` events before the answer (then ``SignedThinking`` if signed).
    """
    block = Thinking(text=thinking, signature=signature)
    return evolve(response, content=(block, *response.content), thinking=thinking)


def reply_tool_calls(
    *calls: tuple[str, dict[str, object]] | ToolUse,
    text: str = "",
    usage: Usage | None = None,
    thinking: str | None = None,
    thinking_signature: str | None = None,
) -> ModelResponse:
    """An answer asking for tool calls: ``reply_tool_calls(("get_weather", {"city": "Oslo"}))``.

    Calls given as ``(name, arguments)`` get ids ``call_1``, ``call_2``, ... A script numbers
    them on across its replies: when a script (or a scripted provider, or a fake server) has
    already handed out ``call_1`` and ``call_2``, its next reply's ``call_1`` is served as
    ``call_3``, so every call a script makes has its own id, as a model's do.

    Args:
        calls: ``(name, arguments)`` pairs or ready :class:`~kova.ToolUse` blocks.
        text: text the model says before its calls.
        usage: the reported usage (default 10 in, 5 out).
        thinking: reasoning before the calls, as a :class:`~kova.Thinking` block
            (see :func:`with_thinking`).
        thinking_signature: sign that block (Anthropic-style thinking).
    """
    blocks: list[Text | ToolUse] = [Text(text=text)] if text else []
    for number, call in enumerate(calls, start=1):
        if isinstance(call, ToolUse):
            blocks.append(call)
        else:
            name, arguments = call
            # dict[str, object] from callers is JSON by contract; ToolUse validates nothing more.
            blocks.append(ToolUse(id=f"call_{number}", name=name, input=dict(arguments)))  # type: ignore[arg-type]
    response = ModelResponse(
        content=tuple(blocks),
        stop_reason=StopReason.TOOL_USE,
        usage=usage if usage is not None else Usage(input_tokens=10, output_tokens=5),
    )
    if thinking is not None:
        return with_thinking(response, thinking, signature=thinking_signature)
    if thinking_signature is not None:
        raise ValueError("thinking_signature needs thinking")
    return response


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def response_to_events(response: ModelResponse, *, chunk_chars: int = 8) -> list[StreamEvent]:
    """The stream a provider would send for ``response``: text in pieces, thinking, tool calls
    with their arguments split into fragments, then stop and usage.

    Thinking blocks stream in their place: their text as ``ThinkingDelta``s, then a signed or
    redacted block (or one with provider data, Gemini's signed thought) as
    ``SignedThinking``. ``response.thinking`` (display text) streams up front only when the
    response has no ``Thinking`` block it could come from.
    """
    size = max(1, chunk_chars)
    events: list[StreamEvent] = []
    if response.thinking and not any(isinstance(b, Thinking) for b in response.content):
        events.extend(ThinkingDelta(text=piece) for piece in _pieces(response.thinking, size))
    for index, block in enumerate(response.content):
        match block:
            case Text(text=text, provider_metadata=metadata):
                pieces = _pieces(text, size)
                # The last piece carries the block's provider data (as Gemini sends it).
                last = (pieces.pop() if pieces else "") if metadata is not None else None
                events.extend(TextDelta(text=piece) for piece in pieces)
                if last is not None:
                    events.append(TextDelta(text=last, provider_metadata=metadata))
            case Thinking(text=text, signature=signature, provider_metadata=metadata):
                events.extend(ThinkingDelta(text=piece) for piece in _pieces(text, size))
                if signature is not None or metadata is not None:
                    events.append(SignedThinking(block=block))
            case RedactedThinking():
                events.append(SignedThinking(block=block))
            case Image() | Audio():
                events.append(MediaOutput(block=block))
            case ToolUse(id=id_, name=name, input=arguments, provider_metadata=metadata):
                events.append(
                    ToolUseStart(index=index, id=id_, name=name, provider_metadata=metadata)
                )
                encoded = json.dumps(arguments, separators=(",", ":"))
                events.extend(
                    ToolUseDelta(index=index, partial_json=piece)
                    for piece in _pieces(encoded, size)
                )
                events.append(ToolUseEnd(index=index))
            case _:
                pass
    events.append(StopEvent(stop_reason=response.stop_reason))
    if response.usage is not None:
        events.append(UsageEvent(usage=response.usage))
    return events


def stream_events(reply: ModelResponse | StreamReply) -> Sequence[StreamEvent]:
    """The events a reply streams (before any cut)."""
    if isinstance(reply, StreamReply):
        if reply.events is not None:
            return reply.events
        return response_to_events(reply.response, chunk_chars=reply.chunk_chars)
    return response_to_events(reply)
