"""A fake Ollama server on loopback, driven by a :class:`~kova.testing.Script`.

It speaks Ollama's native API over real HTTP/1.1 (kova.testing's h11-over-trio server), so any
Ollama client can talk to it: kova's :class:`~kova.providers.ollama.OllamaProvider`, the
official ``ollama`` package, or your own::

    async with open_ollama_server(Script([reply_text("Hello!")])) as server:
        provider = OllamaProvider(OllamaConfig(model="llama3.2", base_url=server.base_url))
        ...

Routes:

* ``POST /api/chat``: the next scripted reply. Streaming is Ollama's default (``"stream"``
  absent or true): NDJSON lines (``application/x-ndjson``), thinking pieces, then content
  pieces, each tool call whole on its own line, then the ``done: true`` line with
  ``done_reason`` and the counts. ``"stream": false`` gets one JSON object. A
  :class:`~kova.testing.StreamReply` with ``cut_after`` drops the connection after that many
  events (no done line), one with ``hold_after`` stalls after that many with the connection
  open; an ``ErrorEvent`` becomes an ``{"error": "..."}`` line with the
  status still 200. An :class:`~kova.testing.ErrorReply` answers with its status and
  ``{"error": "<message>"}``.
* ``GET /api/tags``: :attr:`FakeOllamaServer.models`; ``GET /api/version``.
* ``POST /api/embed``: deterministic unit vectors (a function of the text and the
  ``dimensions``), in input order, with ``prompt_eval_count``.

Every request is recorded in :attr:`FakeOllamaServer.requests`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, assert_never

from .._json import dumps_bytes
from .._models import (
    ErrorEvent,
    MediaOutput,
    SignedThinking,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseDelta,
    ToolUseEnd,
    ToolUseStart,
    UsageEvent,
)
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
from ._wire.ollama import CREATED_AT, decode_request, done_json, message_json, response_json

if TYPE_CHECKING:
    from .._models import JSONValue, StopReason, StreamEvent, Usage

__all__ = ["FakeOllamaServer", "open_ollama_server"]


class FakeOllamaServer(FakeServer):
    """A scripted Ollama server. :meth:`serve` it in a nursery (or use
    :func:`open_ollama_server`) and point an Ollama client at :attr:`base_url`.

    Args:
        script: the replies to ``/api/chat`` requests, in order.
        models: names listed by ``GET /api/tags``.
        embedding_dimensions: vector size when a request sets no ``dimensions``.
        host, port: where :meth:`serve` listens unless told otherwise (0: a free port).
    """

    __slots__ = ("_answers", "embedding_dimensions", "models")

    def __init__(
        self,
        script: ScriptLike,
        models: Sequence[str] = ("llama3.2:latest", "nomic-embed-text:latest"),
        embedding_dimensions: int = 8,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, host=host, port=port)
        self.models = models
        self.embedding_dimensions = embedding_dimensions
        self._answers = 0

    def _created_at(self) -> str:
        # Each answer has its own timestamp (the server's are nanosecond ones).
        self._answers += 1
        return f"2026-01-01T00:00:00.{self._answers:09d}Z"

    def chat_requests(self) -> list[RecordedRequest]:
        """The ``/api/chat`` requests received, in order."""
        return [r for r in self.requests if r.path == "/api/chat"]

    async def _route(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        route = (request.method, request.path.rstrip("/"))
        if route == ("POST", "/api/chat"):
            return await self._chat(request)
        if route == ("GET", "/api/tags"):
            models: list[JSONValue] = [
                {
                    "name": name,
                    "model": name,
                    "modified_at": CREATED_AT,
                    "size": 1000,
                    "digest": hashlib.sha256(name.encode()).hexdigest(),
                    "details": {"format": "gguf", "family": "llama"},
                }
                for name in self.models
            ]
            return _json(200, {"models": models})
        if route == ("GET", "/api/version"):
            return _json(200, {"version": "0.12.3"})
        if route == ("POST", "/api/embed"):
            return self._embed(request)
        return _json(404, {"error": f"no route for {request.method} {request.path}"})

    async def _chat(self, request: RecordedRequest) -> FakeResponse | FakeStream:
        try:
            decoded = decode_request(request.json())
        except ValueError as exc:
            return _json(400, {"error": str(exc)})
        reply = await self._reply(script_request(decoded, stream=decoded.stream, recorded=request))
        if isinstance(reply, ErrorReply):
            return _json(reply.status_code, {"error": reply.message})
        if not decoded.stream:
            response = reply.response if isinstance(reply, StreamReply) else reply
            return _json(200, response_json(response, decoded.model, created_at=self._created_at()))
        return scripted_stream(
            reply,
            _LineEncoder(decoded.model, self._created_at()),
            headers={"content-type": "application/x-ndjson"},
            hold=True,
        )

    def _embed(self, request: RecordedRequest) -> FakeResponse:
        try:
            body = request.json()
        except ValueError:
            body = None
        if not isinstance(body, Mapping) or not isinstance(body.get("model"), str):
            return _json(400, {"error": "model is required"})
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else raw
        if not isinstance(inputs, Sequence) or not inputs:
            return _json(400, {"error": "input is required"})
        size = body.get("dimensions")
        dimensions = size if isinstance(size, int) else self.embedding_dimensions
        texts = [str(item) for item in inputs]
        return _json(
            200,
            {
                "model": body["model"],
                "embeddings": [fake_vector(text, dimensions) for text in texts],
                "total_duration": 1_000_000,
                "load_duration": 100_000,
                "prompt_eval_count": sum(max(1, len(text) // 4) for text in texts),
            },
        )


def _json(status: int, body: JSONValue) -> FakeResponse:
    return json_response(body, status=status, content_type="application/json; charset=utf-8")


def _line(body: JSONValue) -> bytes:
    return dumps_bytes(body) + b"\n"


class _LineEncoder(StreamEncoder):
    """kova stream events → Ollama NDJSON lines (tool calls whole, one per line)."""

    def __init__(self, model: str, created_at: str) -> None:
        self._model = model
        self._created_at = created_at
        self._calls = WholeToolCalls()
        self._stop: StopReason | None = None
        self._usage: Usage | None = None

    def _message(self, message: dict[str, JSONValue]) -> bytes:
        return _line(
            {
                "model": self._model,
                "created_at": self._created_at,
                "message": message,
                "done": False,
            }
        )

    def encode(self, event: StreamEvent) -> bytes:
        match event:
            case TextDelta(text=text):
                return self._message(message_json(text))
            case ThinkingDelta(text=text):
                return self._message(message_json(thinking=text))
            case ToolUseStart() | ToolUseDelta() | ToolUseEnd():
                call = self._calls.take(event)
                return b"" if call is None else self._message(message_json(calls=[call]))
            case StopEvent(stop_reason=stop_reason):
                self._stop = stop_reason
                return b""
            case UsageEvent(usage=usage):
                self._usage = usage
                return b""
            case ErrorEvent(message=message):
                return _line({"error": message})
            case SignedThinking() | MediaOutput():
                return b""
            case _:
                assert_never(event)

    def finish(self) -> bytes:
        if self._stop is None:
            return b""
        return _line(
            done_json(
                self._model,
                self._stop,
                self._usage,
                message_json(),
                created_at=self._created_at,
            )
        )


open_ollama_server = opener(FakeOllamaServer, "open_ollama_server", "Ollama")
