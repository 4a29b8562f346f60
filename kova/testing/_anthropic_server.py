"""A fake Anthropic Messages API on loopback, driven by a :class:`~kova.testing.Script`.

It speaks the real wire format, so the real :class:`~kova.providers.anthropic.AnthropicProvider`
(or the official ``anthropic`` SDK) can be pointed at it::

    server = FakeAnthropicServer(Script([reply_text("Hi")]))
    async with trio.open_nursery() as nursery:
        base_url = await nursery.start(server.serve)
        provider = AnthropicProvider(AnthropicConfig(model="claude-x", api_key="k",
                                                     base_url=base_url))
        ...
        nursery.cancel_scope.cancel()

Endpoints: ``POST /v1/messages`` (JSON, or SSE with every event type: ``message_start``,
``content_block_start/delta/stop`` for text, thinking with ``signature_delta``,
``redacted_thinking`` and ``tool_use`` with ``input_json_delta`` fragments, ``message_delta``,
``message_stop``, ``ping``, and ``error`` mid-stream), ``POST /v1/messages/count_tokens`` and
``GET /v1/models`` (paged with ``after_id``/``limit``, ``has_more``/``last_id``).

Scripted replies map to the wire like this:

* a :class:`~kova.providers.ModelResponse` is the message; its signed ``Thinking`` and
  ``RedactedThinking`` blocks become thinking blocks with their signatures;
* an :class:`~kova.testing.ErrorReply` is an HTTP error with Anthropic's error body
  (``{"type": "error", "error": {"type": ..., "message": ...}}``) and ``retry-after``;
* a :class:`~kova.testing.StreamReply` chunks the text, may stream exact ``events`` (an
  :class:`~kova.providers.ErrorEvent` among them becomes a mid-stream ``error`` event) and may
  cut the connection after ``cut_after`` kova events (no ``message_stop``, body left unfinished).

Every request is recorded in :attr:`FakeAnthropicServer.requests` (path, headers, JSON body).
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

from .._errors import InvalidResponse
from .._models import (
    ChatRequest,
    ErrorEvent,
    Message,
    ModelInfo,
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
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    Usage,
    UsageEvent,
)
from ..providers._base import heuristic_count_tokens
from ..providers.anthropic._convert import compaction_block
from ._fake_server import FakeServer, opener, script_request, scripted_stream
from ._http_server import FakeResponse, FakeStream, RecordedRequest, json_response
from ._script import ErrorReply, ScriptLike, StreamReply, stream_events
from ._wire.anthropic import (
    config_from_wire,
    message_json,
    messages_from_wire,
    stop_to_wire,
    tools_from_wire,
    usage_json,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from .._models import JSONValue

__all__ = ["DEFAULT_ANTHROPIC_MODELS", "FakeAnthropicServer", "open_anthropic_server"]

DEFAULT_ANTHROPIC_MODELS: tuple[ModelInfo, ...] = (
    ModelInfo(id="claude-opus-4-8", display_name="Claude Opus 4.8", owned_by="anthropic"),
    ModelInfo(id="claude-sonnet-4-6", display_name="Claude Sonnet 4.6", owned_by="anthropic"),
    ModelInfo(id="claude-haiku-4-5", display_name="Claude Haiku 4.5", owned_by="anthropic"),
)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def _error(
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> FakeResponse:
    body: JSONValue = {
        "type": "error",
        "error": {"type": error_type or _ERROR_TYPES.get(status, "api_error"), "message": message},
        "request_id": "req_fake",
    }
    return json_response(body, status=status, headers=headers)


_THINKING_START: dict[str, JSONValue] = {"type": "thinking", "thinking": "", "signature": ""}


def _sse(event: str, data: Mapping[str, JSONValue]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _SseWriter:
    """Turns kova stream events into Anthropic SSE events, one kova event at a time."""

    def __init__(self, model: str, message_id: str, usage: Usage | None) -> None:
        self.model = model
        self.message_id = message_id
        self.usage = usage
        self.index = -1
        self.open_kind: str | None = None
        self.tool_indexes: dict[int, int] = {}
        self.stop: StopReason | None = None

    def start(self) -> bytes:
        start_usage = usage_json(self.usage)
        start_usage["output_tokens"] = 1
        start_usage.pop("output_tokens_details", None)
        message: dict[str, JSONValue] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        return _sse("message_start", {"type": "message_start", "message": message}) + _sse(
            "ping", {"type": "ping"}
        )

    def _close(self) -> bytes:
        if self.open_kind is None:
            return b""
        self.open_kind = None
        return _sse("content_block_stop", {"type": "content_block_stop", "index": self.index})

    def _open(self, kind: str, block: dict[str, JSONValue]) -> bytes:
        out = self._close()
        self.index += 1
        self.open_kind = kind
        return out + _sse(
            "content_block_start",
            {"type": "content_block_start", "index": self.index, "content_block": block},
        )

    def _delta(self, delta: dict[str, JSONValue]) -> bytes:
        return _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": self.index, "delta": delta},
        )

    def encode(self, event: StreamEvent) -> bytes:
        out = b""
        match event:
            case TextDelta(provider_metadata=metadata) if metadata is not None and (
                compacted := compaction_block(Text(text="", provider_metadata=metadata))
            ):
                # The server's compaction block: opened bare, its summary in one delta.
                moved = ("content", "encrypted_content")
                delta: dict[str, JSONValue] = {"type": "compaction_delta"}
                delta.update({k: compacted[k] for k in moved if k in compacted})
                bare = {k: v for k, v in compacted.items() if k not in moved}
                out += self._open("compaction", {**bare, "content": None})
                out += self._delta(delta)
                out += self._close()
            case TextDelta(text=text):
                if self.open_kind != "text":
                    out += self._open("text", {"type": "text", "text": ""})
                out += self._delta({"type": "text_delta", "text": text})
            case ThinkingDelta(text=text):
                if self.open_kind != "thinking":
                    out += self._open("thinking", _THINKING_START)
                out += self._delta({"type": "thinking_delta", "thinking": text})
            case SignedThinking(block=Thinking(text=text, signature=signature)):
                if self.open_kind != "thinking":
                    out += self._open("thinking", _THINKING_START)
                    if text:
                        out += self._delta({"type": "thinking_delta", "thinking": text})
                if signature:
                    out += self._delta({"type": "signature_delta", "signature": signature})
                out += self._close()
            case SignedThinking(block=RedactedThinking(data=data)):
                out += self._open("redacted", {"type": "redacted_thinking", "data": data})
                out += self._close()
            case ToolUseStart(index=index, id=id_, name=name):
                out += self._open(
                    "tool", {"type": "tool_use", "id": id_, "name": name, "input": {}}
                )
                self.tool_indexes[index] = self.index
                out += self._delta({"type": "input_json_delta", "partial_json": ""})
            case ToolUseDelta(partial_json=fragment):
                out += self._delta({"type": "input_json_delta", "partial_json": fragment})
            case ToolUseEnd():
                out += self._close()
            case StopEvent(stop_reason=stop):
                out += self._close()
                self.stop = stop
                out += _sse("ping", {"type": "ping"})
            case UsageEvent(usage=usage):
                self.usage = usage
            case ErrorEvent(message=message, error_type=error_type):
                out += _sse(
                    "error",
                    {
                        "type": "error",
                        "error": {"type": error_type or "api_error", "message": message},
                    },
                )
        return out

    def finish(self) -> bytes:
        out = self._close()
        delta_usage: dict[str, JSONValue] = {"output_tokens": (self.usage or Usage()).output_tokens}
        full = usage_json(self.usage)
        if "output_tokens_details" in full:
            delta_usage["output_tokens_details"] = full["output_tokens_details"]
        out += _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_to_wire(self.stop or StopReason.END_TURN),
                    "stop_sequence": None,
                },
                "usage": delta_usage,
            },
        )
        return out + _sse("message_stop", {"type": "message_stop"})


# ---------------------------------------------------------------------------------------------
# The server


def _model_json(model: ModelInfo) -> dict[str, JSONValue]:
    created = model.created if model.created is not None else 1_759_104_000
    from datetime import UTC, datetime

    return {
        "type": "model",
        "id": model.id,
        "display_name": model.display_name or model.id,
        "created_at": datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class FakeAnthropicServer(FakeServer):
    """A fake Anthropic API: :meth:`serve` it in a nursery and point a client at the URL.

    Args:
        script: the replies to ``POST /v1/messages``, in order.
        models: what ``GET /v1/models`` lists.
        count_tokens: computes ``/v1/messages/count_tokens`` answers from the request's kova
            messages and tools; defaults to :func:`~kova.providers.heuristic_count_tokens`.
        api_key: when set, requests must carry it (``x-api-key`` or ``Authorization:
            Bearer``); others get a 401 ``authentication_error``.
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = ("_ids", "api_key", "count_tokens", "models")

    def __init__(
        self,
        script: ScriptLike,
        models: Sequence[ModelInfo] = DEFAULT_ANTHROPIC_MODELS,
        count_tokens: Callable[[list[Message], list[ToolDefinition]], int] | None = None,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.models = models
        self.count_tokens = count_tokens
        self.api_key = api_key
        self._ids: Iterator[int] = itertools.count(1)

    def messages_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests received."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    def _check_headers(self, request: RecordedRequest) -> FakeResponse | None:
        if "anthropic-version" not in request.headers:
            return _error(400, "anthropic-version header is required")
        if self.api_key is not None:
            offered = request.headers.get("x-api-key") or request.headers.get(
                "authorization", ""
            ).removeprefix("Bearer ")
            if offered != self.api_key:
                return _error(401, "invalid x-api-key")
        return None

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        rejected = self._check_headers(request)
        if rejected is not None:
            return rejected
        if request.method == "POST" and request.path == "/v1/messages":
            return await self._messages(request)
        if request.method == "POST" and request.path == "/v1/messages/count_tokens":
            return self._count_tokens(request)
        if request.method == "GET" and request.path == "/v1/models":
            return self._list_models(request)
        return _error(404, f"no route {request.method} {request.path}")

    def _body(self, request: RecordedRequest) -> Mapping[str, object] | FakeResponse:
        try:
            body = request.json()
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be an object")
        return body

    async def _messages(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        body = self._body(request)
        if isinstance(body, FakeResponse):
            return body
        for field in ("model", "max_tokens", "messages"):
            if field not in body:
                return _error(400, f"{field}: Field required")
        stream = body.get("stream") is True
        try:
            messages, tools = messages_from_wire(body), tools_from_wire(body)
            decoded = ChatRequest(messages=messages, tools=tools, config=config_from_wire(body))
        except (ValueError, TypeError, InvalidResponse) as exc:  # the client's fault
            return _error(400, f"invalid request: {exc}")
        reply = await self._reply(script_request(decoded, stream=stream, recorded=request))
        if isinstance(reply, ErrorReply):
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            return _error(
                reply.status_code, reply.message, error_type=reply.error_type, headers=headers
            )
        model = str(body.get("model"))
        message_id = f"msg_fake_{next(self._ids):04d}"
        response = reply.response if isinstance(reply, StreamReply) else reply
        if not stream:
            return json_response(message_json(response, model, message_id))
        events = stream_events(reply)
        usage = next((e.usage for e in events if isinstance(e, UsageEvent)), response.usage)
        return scripted_stream(
            reply,
            _SseWriter(model, message_id, usage),
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
            hold=True,
            events=events,
        )

    def _count_tokens(self, request: RecordedRequest) -> FakeResponse:
        body = self._body(request)
        if isinstance(body, FakeResponse):
            return body
        for field in ("max_tokens", "stream", "stop_sequences", "temperature", "top_p"):
            if field in body:
                return _error(400, f"{field}: Extra inputs are not permitted")
        try:
            messages = messages_from_wire(body)
            tools = tools_from_wire(body)
        except (ValueError, TypeError, InvalidResponse) as exc:
            return _error(400, f"invalid request: {exc}")
        counter = self.count_tokens or heuristic_count_tokens
        return json_response({"input_tokens": counter(messages, tools)})

    def _list_models(self, request: RecordedRequest) -> FakeResponse:
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            return _error(400, "limit must be 1..1000")
        ids = [model.id for model in self.models]
        start = 0
        after = request.query.get("after_id")
        if after is not None:
            if after not in ids:
                return _error(400, f"unknown after_id {after}")
            start = ids.index(after) + 1
        page = list(self.models[start : start + limit])
        return json_response(
            {
                "data": [_model_json(model) for model in page],
                "has_more": start + limit < len(ids),
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )


open_anthropic_server = opener(FakeAnthropicServer, "open_anthropic_server", "Anthropic")
