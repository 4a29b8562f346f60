"""The codec seam: what a provider is, apart from I/O.

A provider is **config + codec** (+ an auth flow), run by the one
:class:`~kova.providers.HttpProvider` over the shared transport. A codec is pure -- no I/O,
no clock -- so it is tested against recorded wire payloads and fuzzed without a network:

* :meth:`Codec.encode` -- a :class:`~kova.providers.ChatRequest` into a :class:`WireRequest`
  (method, path, query, headers, JSON body);
* :meth:`Codec.decode` -- a whole (non-streaming) response body into a
  :class:`~kova.providers.ModelResponse`;
* :meth:`Codec.stream_decoder` -- a :class:`StreamDecoder` for one stream, fed the frames
  that one network read completed (framed by :attr:`Codec.framer`);
* :meth:`Codec.error_details` -- what an error body says, for the one classifier
  (:mod:`kova.providers._classify`).

**The contract every codec keeps** (the contract suite in ``tests/providers/test_contract.py``
runs it against each one): anything malformed or mistyped -- bad JSON, a frame of an
unexpected shape, a field of the wrong type -- becomes :class:`~kova.InvalidResponse`, never
an ``AttributeError``/``TypeError`` and never an event whose fields have other types than
declared (a :class:`~kova.TextDelta` always carries a ``str``). The HTTP provider converts
stray ``ValueError``/``TypeError``/``KeyError``/``AttributeError``/``IndexError`` from a codec
into that error too, as a safety net; codecs check types so the net is rarely needed.

A stream decoder never raises for what the *server* said: an error event, or a stream that
ended before its terminator, sets :attr:`StreamDecoder.error` (a classified
:class:`~kova.ProviderError` or a :class:`~kova.StreamError`) and decoding stops there. The
events decoded before it in the same read are returned, and reach the consumer before the
error is raised. That gives every provider the same behaviour for "text and an error in one
read".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar

from .._errors import InvalidResponse, StreamError
from .._models import StopKind, StopReason, Thinking
from .._record import Record, set_field, slot_setters
from .._secret import SecretHeaders
from ._base import heuristic_count_tokens
from ._http import ErrorDetails, default_error_details

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._errors import KovaError
    from .._models import (
        ChatRequest,
        ContentBlock,
        Image,
        JSONObject,
        JSONValue,
        ModelInfo,
        ModelResponse,
        StreamEvent,
        ToolDefinition,
    )
    from ._framing import Framer

__all__ = [
    "Codec",
    "CodecBase",
    "MESSAGES_STOP_REASONS",
    "ModelPage",
    "StreamDecoder",
    "WireRequest",
    "bad_shape",
    "call_id",
    "count_of",
    "ended_early",
    "expect_list",
    "expect_object",
    "expect_str",
    "function_tools",
    "inline_image",
    "json_object",
    "known_stop",
    "split_thinking",
]

FrameT = TypeVar("FrameT")
FrameT_contra = TypeVar("FrameT_contra", contravariant=True)


class WireRequest(Record):
    """An HTTP request description: what a codec asks the HTTP provider to send."""

    method: str
    path: str
    """Appended to the provider's base URL (or an absolute URL)."""
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Headers of this request. Credentials come from the auth flow; headers that may hold
    one (a config's ``extra_headers``) stay a :class:`~kova.SecretHeaders`, which masks them
    in this request's ``repr`` and in errors a server echoes them in."""
    body: JSONValue | None
    """The JSON body (sent compact, UTF-8, ``content-type: application/json``)."""

    def __init__(
        self,
        *,
        method: str = "POST",
        path: str,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: JSONValue | None = None,
    ) -> None:
        if not isinstance(headers, SecretHeaders):  # a codec's own (protocol) headers
            headers = {} if headers is None else dict(headers)
        methods, paths, queries, headed, bodies = _WIRE  # one a call: see slot_setters
        methods(self, method)
        paths(self, path)
        queries(self, dict(query) if query else {})
        headed(self, headers)
        bodies(self, body)


_WIRE = slot_setters(WireRequest, *WireRequest.__record_fields__)


class ModelPage(Record):
    """One page of a model listing and the cursor of the next (``None`` on the last)."""

    models: tuple[ModelInfo, ...]
    next_cursor: str | None

    def __init__(self, *, models: Iterable[ModelInfo], next_cursor: str | None = None) -> None:
        set_field(self, "models", tuple(models))
        set_field(self, "next_cursor", next_cursor)


class StreamDecoder(Protocol[FrameT_contra]):
    """Decodes one stream. Made fresh per stream by :meth:`Codec.stream_decoder`."""

    error: KovaError | None
    """Set (and decoding stopped) when the server reported an error inside the stream, or
    when :meth:`finish` found that the stream did not end properly."""

    def feed(self, frames: Sequence[FrameT_contra]) -> list[StreamEvent]:
        """The events that one network read's frames completed, in order."""
        ...

    def finish(self) -> list[StreamEvent]:
        """The body ended: the last events. Sets :attr:`error` if the stream ended before
        its terminator (a cut stream must never look like a short answer)."""
        ...


class Codec(Protocol[FrameT]):
    """A provider's wire format. See the module docstring for the contract."""

    @property
    def name(self) -> str:
        """The provider label for errors, logs and metrics (``"openai"``)."""
        ...

    @property
    def framer(self) -> Callable[[], Framer[FrameT]]:
        """Makes the framer of a streamed body (``SseFramer``, ``NdjsonFramer``, ...)."""
        ...

    @property
    def stream_content_types(self) -> tuple[str, ...]:
        """Content types a streamed answer may have (checked before any byte is decoded)."""
        ...

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        """The HTTP request for ``request``."""
        ...

    def decode(self, body: JSONValue) -> ModelResponse:
        """A whole response body. Raises :class:`~kova.InvalidResponse` on bad shapes."""
        ...

    def stream_decoder(self) -> StreamDecoder[FrameT]:
        """A fresh decoder for one stream."""
        ...

    def error_details(self, body: JSONValue) -> ErrorDetails:
        """What an error body (HTTP error status) says; must not raise."""
        ...

    def header_error_type(self, headers: Mapping[str, str]) -> str | None:
        """The error type an error response's headers name, used when its body names none
        (AWS's ``x-amzn-ErrorType``); ``None`` for most providers."""
        ...

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        """The exact token-counting request, or ``None`` to use the offline heuristic."""
        ...

    def decode_count_tokens(self, body: JSONValue) -> int: ...

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        """The request for one page of models (``cursor`` from the previous page), or
        ``None`` when the provider cannot list models."""
        ...

    def decode_list_models(self, body: JSONValue) -> ModelPage: ...


class CodecBase(Generic[FrameT]):
    """Defaults for the optional parts of :class:`Codec`: the common error body shape, the
    heuristic token count and no model listing. Subclass it and fill in the rest."""

    name: ClassVar[str] = "provider"
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)

    def error_details(self, body: JSONValue) -> ErrorDetails:
        return default_error_details(body)

    def header_error_type(self, headers: Mapping[str, str]) -> str | None:
        return None

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest | None:
        return None

    def decode_count_tokens(self, body: JSONValue) -> int:
        raise NotImplementedError

    def encode_list_models(self, cursor: str | None) -> WireRequest | None:
        return None

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        raise NotImplementedError


def heuristic_tokens(request: ChatRequest) -> int:
    """The offline estimate for ``request`` (see :func:`heuristic_count_tokens`)."""
    return heuristic_count_tokens(request.messages, request.tools)


def function_tools(tools: Sequence[ToolDefinition]) -> list[JSONValue]:
    """Tool definitions as ``function`` tools, the JSON Schema as is: OpenAI's Chat
    Completions shape, which Ollama's chat API takes too."""
    encoded: list[JSONValue] = []
    for tool in tools:
        function: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters
        encoded.append({"type": "function", "function": function})
    return encoded


def inline_image(image: Image) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of an image that carries its bytes: inline data, or a
    ``data:<type>;base64,<data>`` URL (the form OpenAI users write, which providers that
    take only inline bytes or only fetchable URLs, such as Gemini and Ollama, can send inline).
    ``None`` for an image by a URL to fetch."""
    if image.data is not None:
        return image.media_type or "", image.data
    url = image.url or ""
    if url.startswith("data:"):
        header, comma, data = url.partition(",")
        media_type, _, encoding = header[len("data:") :].partition(";")
        if comma and encoding == "base64" and data:
            return media_type, data
    return None


# -- small checked readers for codecs: a wrong shape is InvalidResponse, never a TypeError --


def expect_object(value: object, what: str, *, provider: str | None = None) -> Mapping[str, object]:
    """``value`` if it is a JSON object, else :class:`~kova.InvalidResponse` naming ``what``."""
    if isinstance(value, Mapping):
        return value
    raise InvalidResponse(
        f"{what} should be a JSON object, got {type(value).__name__}", provider=provider
    )


def expect_list(value: object, what: str, *, provider: str | None = None) -> list[object]:
    """``value`` if it is a JSON array, else :class:`~kova.InvalidResponse`."""
    if isinstance(value, list):
        return value
    raise InvalidResponse(
        f"{what} should be a JSON array, got {type(value).__name__}", provider=provider
    )


def expect_str(value: object, what: str, *, provider: str | None = None) -> str:
    """``value`` if it is a string, else :class:`~kova.InvalidResponse`."""
    if isinstance(value, str):
        return value
    raise InvalidResponse(
        f"{what} should be a string, got {type(value).__name__}", provider=provider
    )


def count_of(value: object) -> int:
    """A token count read from a response: the value when it is an integer (not a bool),
    else 0 (absent, or of another type)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def json_object(value: Mapping[str, object]) -> JSONObject:
    """An object of a parsed response body, typed as the JSON it is (``json.loads`` output:
    every value is JSON by construction)."""
    return value  # type: ignore[return-value]


def optional_str(value: object) -> str | None:
    """An informational wire string (a response's ``model`` or ``id``): ``None`` when it is
    missing, empty or not a string, which is never worth failing an answer over."""
    return value if isinstance(value, str) and value else None


def bad_shape(what: str, value: object, *, provider: str) -> InvalidResponse:
    """What a stream decoder keeps as its error when ``what`` (a chunk, a field of one) came
    as a value of another JSON type than the format has there."""
    return InvalidResponse(
        f"the stream sent {what} of an unexpected type ({type(value).__name__})",
        provider=provider,
    )


def ended_early(terminator: str) -> StreamError:
    """What a stream decoder keeps as its error when the body ended before ``terminator`` (what
    ends an answer in its format): a cut stream, never a short answer."""
    return StreamError(f"the stream ended before {terminator}", error_type="incomplete_stream")


def call_id(name: str, arguments: JSONValue, position: int, salt: str = "") -> str:
    """A stable id for a tool call the model sent without one (Gemini's may come without,
    Ollama's always do): the same call in the same place of the same answer gets the same id,
    so a replayed response matches its results. ``salt`` tells answers apart (Gemini's
    ``responseId``, Ollama's ``created_at``), so the same call made in two steps of a loop
    gets two ids."""
    key: list[JSONValue] = [name, arguments, position]
    if salt:
        key.append(salt)
    digest = hashlib.sha256(
        json.dumps(key, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    return f"call_{digest[:16]}"


MESSAGES_STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.MAX_TOKENS,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    # The context window filled up: the same remedy as max_tokens, raw value kept.
    "model_context_window_exceeded": StopReason(
        kind=StopKind.MAX_TOKENS, raw="model_context_window_exceeded"
    ),
}
"""The stop reasons of Anthropic's Messages API that kova knows, which Bedrock's Converse API
sends by the same names."""


def known_stop(raw: str | None, known: Mapping[str, StopReason]) -> StopReason:
    """``raw`` as the stop reason ``known`` maps it to; a value it does not know becomes
    ``UNKNOWN`` with the raw value kept (``""`` for none), so the agent loop stops and the
    host can see why."""
    if raw is None:
        return StopReason.unknown("")
    stop = known.get(raw)
    return stop if stop is not None else StopReason.unknown(raw)


def split_thinking(
    raw_blocks: Iterable[object], decode: Callable[[object], ContentBlock | None]
) -> tuple[tuple[ContentBlock, ...], str | None]:
    """A whole answer's blocks, each read by ``decode`` (``None``: a block kova does not
    model), as what the history keeps and the display thinking: every
    :class:`~kova.Thinking`'s text joins the display text, and an unsigned one is display
    text only, never history."""
    content: list[ContentBlock] = []
    thinking: list[str] = []
    for raw in raw_blocks:
        block = decode(raw)
        if block is None:
            continue
        if isinstance(block, Thinking):
            if block.text:
                thinking.append(block.text)
            if block.signature is None:
                continue
        content.append(block)
    return tuple(content), "".join(thinking) or None
