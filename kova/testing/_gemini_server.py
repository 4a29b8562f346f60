"""A fake Gemini API server on loopback, driven by a :class:`~kova.testing.Script`.

It speaks the real wire format over real HTTP/1.1 (kova.testing's h11-over-trio server), so
any Gemini client can talk to it: kova's :class:`~kova.providers.gemini.GeminiProvider`, the
official ``google-genai`` package, or your own::

    async with open_gemini_server(Script([reply_text("Hello!")])) as server:
        provider = GeminiProvider(
            GeminiConfig(model="gemini-fake", base_url=server.base_url, api_key="test")
        )
        ...
        assert server.requests[0].headers["x-goog-api-key"] == "test"

Routes (``{version}`` is any API version, e.g. ``v1beta``):

* ``POST /{version}/models/{model}:generateContent``: the next scripted reply as a
  ``GenerateContentResponse``.
* ``POST /{version}/models/{model}:streamGenerateContent?alt=sse``: the reply as SSE, one
  ``data:`` chunk per text / thinking piece and per whole function call, the last chunk with
  ``finishReason`` and ``usageMetadata``; no terminator. A
  :class:`~kova.testing.StreamReply` with ``cut_after`` drops the connection after that many
  events (no ``finishReason``), one with ``hold_after`` stalls after that many with the
  connection open; an ``ErrorEvent`` becomes a ``data: {"error": ...}`` chunk
  that ends the stream.
* :class:`~kova.testing.ErrorReply` answers with its status and Google's error body
  (``error.status`` from ``error_type`` or the status, a ``RetryInfo`` ``retryDelay`` from
  ``retry_after``).
* ``POST …:countTokens``: a deterministic count (kova's heuristic over the decoded request).
* ``GET /{version}/models``: :attr:`FakeGeminiServer.models`, ``page_size`` per page with
  ``nextPageToken``.
* ``POST …:batchEmbedContents``: deterministic unit vectors (a function of the text and the
  ``outputDimensionality``), at most 100 requests per call as the API allows.

With :attr:`FakeGeminiServer.api_key` set, a request without that ``x-goog-api-key`` gets
Google's 400 ``API_KEY_INVALID``. Every request is recorded in
:attr:`FakeGeminiServer.requests`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, assert_never

from .._json import dumps_bytes
from .._models import (
    ErrorEvent,
    MediaOutput,
    SignedThinking,
    StopEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from ..providers._base import heuristic_count_tokens
from ._fake_server import (
    FakeServer,
    StreamEncoder,
    WholeToolCalls,
    opener,
    script_request,
    scripted_stream,
)
from ._http_server import FakeResponse, FakeStream, RecordedRequest, fake_vector, json_response
from ._script import ErrorReply, ScriptLike, StreamReply
from ._wire.gemini import (
    decode_request,
    function_call_part,
    media_part,
    response_json,
    status_name,
    stop_to_finish_reason,
    text_part,
    thought_part,
    usage_json,
)

if TYPE_CHECKING:
    from .._models import JSONValue, StreamEvent

__all__ = ["FakeGeminiServer", "open_gemini_server"]


class FakeGeminiServer(FakeServer):
    """A scripted Gemini API server. :meth:`serve` it in a nursery (or use
    :func:`open_gemini_server`) and point a Gemini client at :attr:`base_url`.

    Args:
        script: the replies to ``generateContent`` requests, in order.
        models: ids listed by ``GET /models`` (without ``models/``).
        page_size: models per page when the request asks for more (or none).
        api_key: when set, the ``x-goog-api-key`` every request must carry.
        embedding_dimensions: vector size when a request sets no ``outputDimensionality``.
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = ("_answers", "api_key", "embedding_dimensions", "models", "page_size")

    def __init__(
        self,
        script: ScriptLike,
        models: Sequence[str] = ("gemini-fake", "gemini-embedding-fake"),
        page_size: int = 50,
        api_key: str | None = None,
        embedding_dimensions: int = 8,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.models = models
        self.page_size = page_size
        self.api_key = api_key
        self.embedding_dimensions = embedding_dimensions
        self._answers = 0

    def _next_id(self) -> str:
        # Each answer has its own responseId, as the API's do.
        self._answers += 1
        return f"kova-fake-{self._answers}"

    def chat_requests(self) -> list[RecordedRequest]:
        """The ``generateContent`` / ``streamGenerateContent`` requests, in order."""
        return [r for r in self.requests if r.path.endswith("enerateContent")]

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        if self.api_key is not None and request.headers.get("x-goog-api-key") != self.api_key:
            return _error(
                400, "API key not valid. Please pass a valid API key.", reason="API_KEY_INVALID"
            )
        path = request.path
        model, _, method = path.rpartition("/models/")[2].partition(":")
        if request.method == "POST" and method == "generateContent":
            return await self._generate(request, model, stream=False)
        if request.method == "POST" and method == "streamGenerateContent":
            return await self._generate(request, model, stream=True)
        if request.method == "POST" and method == "countTokens":
            return self._count_tokens(request)
        if request.method == "POST" and method == "batchEmbedContents":
            return self._embeddings(request)
        if request.method == "GET" and path.rstrip("/").endswith("/models"):
            return self._list_models(request)
        return _error(404, f"no route for {request.method} {request.path}")

    async def _generate(
        self, request: RecordedRequest, model: str, *, stream: bool
    ) -> FakeResponse | FakeStream:
        try:
            decoded = decode_request(request.json())
        except ValueError as exc:
            return _error(400, f"Invalid JSON payload received. {exc}")
        if stream and request.query.get("alt") != "sse":
            return _error(400, "the fake server streams only with alt=sse")
        reply = await self._reply(script_request(decoded, stream=stream, recorded=request))
        if isinstance(reply, ErrorReply):
            return _error(
                reply.status_code,
                reply.message,
                status_text=reply.error_type,
                retry_after=reply.retry_after,
            )
        if not stream:
            response = reply.response if isinstance(reply, StreamReply) else reply
            return _json(200, response_json(response, model, response_id=self._next_id()))
        return scripted_stream(
            reply,
            _ChunkEncoder(model, self._next_id()),
            headers={"content-type": "text/event-stream", "x-content-type-options": "nosniff"},
            hold=True,
        )

    def _count_tokens(self, request: RecordedRequest) -> FakeResponse:
        body = request.json()
        inner = body.get("generateContentRequest") if isinstance(body, Mapping) else None
        try:
            decoded = decode_request(inner if isinstance(inner, Mapping) else body)
        except ValueError as exc:
            return _error(400, str(exc))
        total = heuristic_count_tokens(decoded.messages, decoded.tools)
        return _json(200, {"totalTokens": total, "promptTokensDetails": []})

    def _list_models(self, request: RecordedRequest) -> FakeResponse:
        size = self.page_size
        asked = request.query.get("pageSize")
        if asked is not None and asked.isdigit() and 0 < int(asked) < size:
            size = int(asked)
        token = request.query.get("pageToken")
        start = int(token) if token is not None and token.isdigit() else 0
        page = self.models[start : start + size]
        body: dict[str, JSONValue] = {
            "models": [
                {
                    "name": f"models/{model}",
                    "version": "001",
                    "displayName": model.replace("-", " ").title(),
                    "supportedGenerationMethods": ["embedContent"]
                    if "embedding" in model
                    else ["generateContent", "countTokens"],
                }
                for model in page
            ]
        }
        if start + size < len(self.models):
            body["nextPageToken"] = str(start + size)
        return _json(200, body)

    def _embeddings(self, request: RecordedRequest) -> FakeResponse:
        try:
            body = request.json()
        except ValueError:
            body = None
        requests = body.get("requests") if isinstance(body, Mapping) else None
        if not isinstance(requests, Sequence) or not requests:
            return _error(400, "'requests' must be a non-empty list")
        if len(requests) > 100:
            return _error(400, "at most 100 requests can be in one batch")
        embeddings: list[JSONValue] = []
        for item in requests:
            content = item.get("content") if isinstance(item, Mapping) else None
            parts = content.get("parts") if isinstance(content, Mapping) else None
            if not isinstance(parts, Sequence):
                return _error(400, "each request needs content.parts")
            text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))
            size = item.get("outputDimensionality") if isinstance(item, Mapping) else None
            dimensions = size if isinstance(size, int) else self.embedding_dimensions
            embeddings.append({"values": fake_vector(text, dimensions)})
        return _json(200, {"embeddings": embeddings})


def _json(status: int, body: JSONValue) -> FakeResponse:
    return json_response(body, status=status, content_type="application/json; charset=UTF-8")


def _error(
    status: int,
    message: str,
    *,
    status_text: str | None = None,
    retry_after: float | None = None,
    reason: str | None = None,
) -> FakeResponse:
    details: list[JSONValue] = []
    if reason is not None:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            }
        )
    if retry_after is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}
        )
    error: dict[str, JSONValue] = {
        "code": status,
        "message": message,
        "status": status_text or status_name(status),
    }
    if details:
        error["details"] = details
    return _json(status, {"error": error})


def _chunk(body: JSONValue) -> bytes:
    return b"data: " + dumps_bytes(body) + b"\r\n\r\n"


class _ChunkEncoder(StreamEncoder):
    """kova stream events → Gemini SSE chunks (one per piece; function calls whole)."""

    def __init__(self, model: str, response_id: str) -> None:
        self._model = model
        self._response_id = response_id
        self._calls = WholeToolCalls()
        self._finish: str | None = None
        self._usage: JSONValue = None

    def _candidate(self, parts: list[JSONValue], *, finish: str | None = None) -> bytes:
        candidate: dict[str, JSONValue] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        body: dict[str, JSONValue] = {"candidates": [candidate]}
        if self._usage is not None:
            body["usageMetadata"] = self._usage
        body["modelVersion"] = self._model
        body["responseId"] = self._response_id
        return _chunk(body)

    def encode(self, event: StreamEvent) -> bytes:
        match event:
            case TextDelta(text=text, provider_metadata=metadata):
                return self._candidate([text_part(text, metadata) or {"text": text}])
            case ThinkingDelta(text=text):
                return self._candidate([{"text": text, "thought": True}])
            case ToolUseStart() | ToolUseDelta() | ToolUseEnd():
                call = self._calls.take(event)
                return b"" if call is None else self._candidate([function_call_part(call)])
            case StopEvent(stop_reason=stop_reason):
                self._finish = stop_to_finish_reason(stop_reason)
                return b""
            case UsageEvent(usage=usage):
                self._usage = usage_json(usage)
                return b""
            case ErrorEvent(message=message, error_type=error_type):
                # Google's error body, as a chunk (its bytes are what _chunk would write).
                error = _error(500, message, status_text=error_type or "INTERNAL").body
                return b"data: " + error + b"\r\n\r\n"
            case SignedThinking(block=Thinking(provider_metadata=metadata)) if metadata:
                # Its text went out as thought pieces; the signature ends the thought, on an
                # empty thought part as Gemini sends it.
                return self._candidate([thought_part("", metadata)])
            case SignedThinking():
                return b""
            case MediaOutput(block=block):
                return self._candidate([media_part(block)])
            case _:
                assert_never(event)

    def finish(self) -> bytes:
        """The final chunk: the finish reason and the usage snapshot."""
        if self._finish is None:
            return b""
        return self._candidate([], finish=self._finish)


open_gemini_server = opener(FakeGeminiServer, "open_gemini_server", "Gemini")
