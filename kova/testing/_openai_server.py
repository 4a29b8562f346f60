"""A fake OpenAI-compatible server on loopback, driven by a :class:`~kova.testing.Script`.

It speaks the real wire format over real HTTP/1.1 (kova.testing's small h11-over-trio
server; ``h11`` already comes with httpx2), so any OpenAI client can talk to it: kova's own
provider, the official ``openai`` package, or whatever your application uses::

    async with open_openai_server(Script([reply_text("Hello!")])) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="gpt-fake", api_key="test")
        )
        ...
        assert server.requests[0].json()["model"] == "gpt-fake"

or, in a nursery you own::

    server = FakeOpenAiServer(script=script)
    base_url = await nursery.start(server.serve)

Routes (matched by path suffix, so Azure-style prefixes work too):

* ``POST …/chat/completions``: the next scripted reply. Non-streaming requests get a
  ``chat.completion`` JSON body. With ``"stream": true`` the reply streams as SSE in the shape
  OpenAI sends: a role chunk, ``content`` / ``reasoning_content`` chunks, tool-call deltas
  (``index``, ``id``, ``name`` first, then ``arguments`` fragments), the ``finish_reason``
  chunk, a ``choices: []`` usage chunk when ``stream_options.include_usage`` is set, then
  ``data: [DONE]``. An :class:`~kova.testing.ErrorReply` answers with its status, an
  OpenAI-shaped error body and ``retry-after`` / ``retry-after-ms`` headers. A
  :class:`~kova.testing.StreamReply` with ``cut_after`` drops the connection after that many
  events, mid-body, without ``[DONE]``. An ``ErrorEvent`` in ``StreamReply.events`` becomes an
  ``{"error": …}`` chunk that ends the stream.
* ``GET …/models``: the configured model ids.
* ``POST …/embeddings``: deterministic unit vectors (a function of the text and the
  dimensions), as floats or base64, as requested.

Every request is recorded in :attr:`FakeOpenAiServer.requests` (method, path, headers, body).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, assert_never

from .._json import dumps_bytes
from .._models import (
    Audio,
    ErrorEvent,
    MediaOutput,
    ModelResponse,
    SignedThinking,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
from ..providers.openai._convert import encode_arguments, encode_usage
from ._fake_server import FakeServer, opener, script_request, scripted_stream
from ._http_server import FakeResponse, FakeStream, RecordedRequest, fake_vector, json_response
from ._script import ErrorReply, ScriptLike, StreamReply
from ._wire.openai import (
    SSE_HEADERS,
    decode_request,
    error_code,
    error_response,
    model_list,
    stop_to_finish_reason,
)

if TYPE_CHECKING:
    from .._models import JSONValue, StreamEvent

__all__ = ["FakeOpenAiServer", "open_openai_server"]

_CREATED = 1_700_000_000


class FakeOpenAiServer(FakeServer):
    """A scripted OpenAI-compatible HTTP server. :meth:`serve` it in a nursery (or use
    :func:`open_openai_server`) and point any OpenAI client at :attr:`base_url` (the
    official SDK wants ``base_url + "/v1"``).

    Args:
        script: the replies to chat completion requests, in order.
        model: the ``model`` reported in responses when the request names none.
        models: ids listed by ``GET /v1/models``.
        embedding_dimensions: vector size when a request sets no ``dimensions``.
        embedding_input_limit: more inputs in one request get a 400 (OpenAI allows 2048).
        reverse_embeddings: return embedding ``data`` in reverse order (clients must sort by
            ``index``; this checks that they do).
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = (
        "_completions",
        "embedding_dimensions",
        "embedding_input_limit",
        "model",
        "models",
        "reverse_embeddings",
    )

    def __init__(
        self,
        script: ScriptLike,
        model: str = "gpt-fake",
        models: Sequence[str] = ("gpt-fake", "text-embedding-fake"),
        embedding_dimensions: int = 8,
        embedding_input_limit: int = 2048,
        reverse_embeddings: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.model = model
        self.models = models
        self.embedding_dimensions = embedding_dimensions
        self.embedding_input_limit = embedding_input_limit
        self.reverse_embeddings = reverse_embeddings
        self._completions = 0

    def chat_requests(self) -> list[RecordedRequest]:
        """The chat completion requests received, in order."""
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/chat/completions"):
            return await self._chat(request)
        if request.method == "GET" and path.endswith("/models"):
            return model_list(self.models, created=_CREATED)
        if request.method == "POST" and path.endswith("/embeddings"):
            return self._embeddings(request)
        return _error(404, f"no route for {request.method} {request.path}")

    async def _chat(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        try:
            decoded = decode_request(request.json())
        except ValueError as exc:
            return _error(400, f"invalid request body: {exc}")
        model = decoded.config.model or self.model
        reply = await self._reply(script_request(decoded, stream=decoded.stream, recorded=request))
        self._completions += 1
        completion_id = f"chatcmpl-kova{self._completions}"
        if isinstance(reply, ErrorReply):
            return _error(
                reply.status_code,
                reply.message,
                error_type=reply.error_type,
                retry_after=reply.retry_after,
            )
        if not decoded.stream:
            response = reply.response if isinstance(reply, StreamReply) else reply
            return json_response(_completion_json(response, completion_id, model))
        return scripted_stream(
            reply,
            _ChunkEncoder(completion_id, model, include_usage=decoded.include_usage),
            headers=SSE_HEADERS,
            hold=True,
        )

    def _embeddings(self, request: RecordedRequest) -> FakeResponse:
        try:
            body = request.json()
        except ValueError:
            body = None
        if not isinstance(body, Mapping):
            return _error(400, "the body must be a JSON object")
        raw = body.get("input")
        inputs: list[str]
        if isinstance(raw, str):
            inputs = [raw]
        elif isinstance(raw, Sequence):
            # Token arrays are hashed by their JSON form.
            inputs = [item if isinstance(item, str) else json.dumps(item) for item in raw]
        else:
            inputs = []
        if not inputs:
            return _error(400, "'input' must not be empty")
        if len(inputs) > self.embedding_input_limit:
            return _error(
                400,
                f"'input' has {len(inputs)} items; at most {self.embedding_input_limit} allowed",
            )
        dimensions = body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) else self.embedding_dimensions
        as_base64 = body.get("encoding_format") == "base64"
        data: list[JSONValue] = []
        for index, text in enumerate(inputs):
            vector = fake_vector(text, size)
            embedding: JSONValue
            if as_base64:
                # Little-endian float32, as the OpenAI API (and its official SDK) use.
                embedding = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode("ascii")
            else:
                embedding = vector
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        if self.reverse_embeddings:
            data.reverse()
        tokens = sum(max(1, len(text) // 4) for text in inputs)
        model = body.get("model")
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": model if isinstance(model, str) else "text-embedding-fake",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _error(
    status: int, message: str, *, error_type: str | None = None, retry_after: float | None = None
) -> FakeResponse:
    # Chat Completions' code is the status's, whatever the type.
    return error_response(
        status, message, error_type=error_type, code=error_code(status), retry_after=retry_after
    )


def _completion_json(response: ModelResponse, completion_id: str, model: str) -> JSONValue:
    message: dict[str, JSONValue] = {
        "role": "assistant",
        "content": response.text or None,
        "refusal": None,
    }
    if response.thinking:
        message["reasoning_content"] = response.thinking
    speech = [block for block in response.content if isinstance(block, Audio)]
    if speech and speech[0].data is not None:
        # A spoken answer: the text is the transcript, and content is null.
        message["content"] = None
        message["audio"] = {
            "id": f"audio_{completion_id}",
            "data": speech[0].data,
            "expires_at": _CREATED + 3600,
            "transcript": response.text,
        }
    calls = response.tool_uses
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": encode_arguments(call)},
            }
            for call in calls
        ]
    body: dict[str, JSONValue] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": stop_to_finish_reason(response.stop_reason),
            }
        ],
    }
    if response.usage is not None:
        body["usage"] = encode_usage(response.usage)
    return body


class _ChunkEncoder:
    """kova stream events → ``chat.completion.chunk`` SSE bytes."""

    def __init__(self, completion_id: str, model: str, *, include_usage: bool) -> None:
        self._id = completion_id
        self._model = model
        self._include_usage = include_usage
        self._tool_index: dict[int, int] = {}
        """kova event index (a content-block position) → OpenAI tool-call index (0, 1, ...)."""

    def _chunk(
        self,
        delta: JSONValue,
        *,
        finish_reason: str | None = None,
        usage: JSONValue = None,
        choices: bool = True,
    ) -> bytes:
        body: dict[str, JSONValue] = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": self._model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ]
            if choices
            else [],
        }
        if self._include_usage:
            body["usage"] = usage
        return b"data: " + dumps_bytes(body) + b"\n\n"

    def start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": "", "refusal": None})

    def finish(self) -> bytes:
        return b"data: [DONE]\n\n"

    def encode(self, event: StreamEvent) -> bytes:
        match event:
            case TextDelta(text=text):
                return self._chunk({"content": text})
            case ThinkingDelta(text=text):
                return self._chunk({"reasoning_content": text})
            case ToolUseStart(index=index, id=call_id, name=name):
                number = self._tool_index.setdefault(index, len(self._tool_index))
                call: JSONValue = {
                    "index": number,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
                return self._chunk({"tool_calls": [call]})
            case ToolUseDelta(index=index, partial_json=piece):
                number = self._tool_index.setdefault(index, len(self._tool_index))
                fragment: JSONValue = {"index": number, "function": {"arguments": piece}}
                return self._chunk({"tool_calls": [fragment]})
            case StopEvent(stop_reason=stop_reason):
                return self._chunk({}, finish_reason=stop_to_finish_reason(stop_reason))
            case UsageEvent(usage=usage):
                if not self._include_usage:
                    return b""
                return self._chunk(None, usage=encode_usage(usage), choices=False)
            case ErrorEvent(message=message, error_type=error_type):
                error: JSONValue = {
                    "error": {"message": message, "type": error_type or "server_error"}
                }
                return b"data: " + json.dumps(error, separators=(",", ":")).encode() + b"\n\n"
            case ToolUseEnd() | SignedThinking():
                return b""
            case MediaOutput(block=Audio(data=data)) if data is not None:
                # A spoken answer streams its speech in audio.data pieces (here one).
                return self._chunk({"audio": {"id": "audio_fake", "data": data}})
            case MediaOutput():
                return b""
            case _:
                assert_never(event)


open_openai_server = opener(FakeOpenAiServer, "open_openai_server", "OpenAI")
