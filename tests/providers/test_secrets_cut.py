"""A key a server echoes never prints, wherever it falls against the cuts kova makes in the
server's text (issue 43, item 3): previews of 200 characters (a body, an unreadable stream
line on every framing), error pages of 500, error types of 200, messages of 2,000.

For every credential kind on every provider (embeddings included), in every kind of answer,
the server echoes the key at every offset around every cut point. Nothing shown may hold 10
consecutive characters of any key: ``str``, ``repr``, a traceback rendered with locals, the
attributes of every error in the cause chain (a ``JSONDecodeError.doc``, a
``UnicodeDecodeError.object``), and, through an agent, its logs, telemetry events and
OpenTelemetry spans. Servers are ``httpx2.MockTransport`` handlers (the wire formats are the
real ones; the offsets need thousands of answers)."""

from __future__ import annotations

import json
import traceback
from typing import TYPE_CHECKING, Any

import attrs
import httpx2
import pytest
from structlog.testing import capture_logs

from kova import KovaError
from kova.agent import AgentBuilder, RetryConfig
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import (
    GeminiConfig,
    GeminiEmbeddingConfig,
    GeminiEmbeddingProvider,
    GeminiProvider,
)
from kova.providers.ollama import (
    OllamaConfig,
    OllamaEmbeddingConfig,
    OllamaEmbeddingProvider,
    OllamaProvider,
)
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiEmbeddingConfig,
    OpenAiEmbeddingProvider,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing._wire.bedrock import encode_message, exception_message

if TYPE_CHECKING:
    from collections.abc import Callable

KEY = "Qm7RzT4vWx9KpL2nYb6HcJ8dFg3SaE5uVt1ZoXiN"
"""The key every credential holds: no 10 characters of it occur in anything kova writes."""
ACCESS_KEY = "AKIA7QX2M9ZRT4VW8KPL"
BASE = "https://x.test"
WINDOW = 10
"""How many consecutive characters of a key count as a leak."""
CUTS = (200, 500, 2000)


def leaked(text: str) -> list[str]:
    folded = text.casefold()
    found = []
    for secret in (KEY, ACCESS_KEY):
        for start in range(len(secret) - WINDOW + 1):
            piece = secret[start : start + WINDOW]
            if piece.casefold() in folded:
                found.append(piece)
    return found


@attrs.frozen
class Kind:
    """One provider and credential kind over a mock transport."""

    name: str
    build: Callable[[httpx2.MockTransport], Any]
    framing: str  # "sse", "ndjson", "eventstream"; "embed" for an embedding provider


def _bedrock(**config: Any) -> Callable[[httpx2.MockTransport], Any]:
    return lambda transport: BedrockProvider(
        BedrockConfig(region="us-east-1", model_id="m", endpoint_url=BASE, **config),
        transport=transport,
    )


HEADERS = {"x-gateway-key": KEY}

KINDS = [
    Kind(
        "openai-bearer",
        lambda t: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=BASE, api_key=KEY), transport=t
        ),
        "sse",
    ),
    Kind(
        "openai-azure",
        lambda t: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=BASE, api_key=KEY, api_version="2024-10-21"),
            transport=t,
        ),
        "sse",
    ),
    Kind(
        "openai-extra-headers",
        lambda t: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=BASE, api_key="", extra_headers=HEADERS),
            transport=t,
        ),
        "sse",
    ),
    Kind(
        "responses-bearer",
        lambda t: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url=BASE, api_key=KEY), transport=t
        ),
        "sse",
    ),
    Kind(
        "responses-azure",
        lambda t: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="m", base_url=BASE, api_key=KEY, azure=True),
            transport=t,
        ),
        "sse",
    ),
    Kind(
        "anthropic-x-api-key",
        lambda t: AnthropicProvider(
            AnthropicConfig(model="m", base_url=BASE, api_key=KEY), transport=t
        ),
        "sse",
    ),
    Kind(
        "anthropic-extra-headers",
        lambda t: AnthropicProvider(
            AnthropicConfig(model="m", base_url=BASE, api_key="k", extra_headers=HEADERS),
            transport=t,
        ),
        "sse",
    ),
    Kind(
        "gemini-api-key",
        lambda t: GeminiProvider(GeminiConfig(model="m", base_url=BASE, api_key=KEY), transport=t),
        "sse",
    ),
    Kind(
        "ollama-bearer",
        lambda t: OllamaProvider(OllamaConfig(model="m", base_url=BASE, api_key=KEY), transport=t),
        "ndjson",
    ),
    Kind(
        "ollama-extra-headers",
        lambda t: OllamaProvider(
            OllamaConfig(model="m", base_url=BASE, extra_headers=HEADERS), transport=t
        ),
        "ndjson",
    ),
    Kind("bedrock-api-key", _bedrock(api_key=KEY), "eventstream"),
    Kind(
        "aws-access-keys",
        _bedrock(access_key_id=ACCESS_KEY, secret_access_key=KEY),
        "eventstream",
    ),
    Kind(
        "aws-session-token",
        _bedrock(access_key_id=ACCESS_KEY, secret_access_key="s" * 40, session_token=KEY),
        "eventstream",
    ),
    Kind(
        "bedrock-extra-headers",
        _bedrock(access_key_id=ACCESS_KEY, secret_access_key="s" * 40, extra_headers=HEADERS),
        "eventstream",
    ),
    Kind(
        "openai-embeddings",
        lambda t: OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=BASE, api_key=KEY), transport=t
        ),
        "embed",
    ),
    Kind(
        "azure-embeddings",
        lambda t: OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=BASE, api_key=KEY, api_version="2024-10-21"),
            transport=t,
        ),
        "embed",
    ),
    Kind(
        "gemini-embeddings",
        lambda t: GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(base_url=BASE, api_key=KEY), transport=t
        ),
        "embed",
    ),
    Kind(
        "ollama-embeddings",
        lambda t: OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(model="m", base_url=BASE, extra_headers=HEADERS), transport=t
        ),
        "embed",
    ),
]


def _raw(text: str) -> bytes:
    """``text`` as a server's bytes (a lone surrogate as the three bytes some servers send)."""
    return text.encode("utf-8", "surrogatepass")


def _echo(pad: int) -> str:
    """The key after ``pad`` characters of filler (no key characters in it)."""
    return "." * pad + KEY + "."


@attrs.frozen
class Answer:
    """One kind of answer: the response for a filler length, and whether it is streamed."""

    name: str
    stream: bool
    respond: Callable[[Kind, str], httpx2.Response | None]
    """The answer echoing this text; ``None``: this answer does not apply to this kind."""


def _json_error(kind: Kind, text: str, where: str) -> Any:
    error: dict[str, Any] = {"message": "refused", "type": "invalid_request_error"}
    error["message" if where == "message" else "type"] = text
    if kind.framing == "ndjson":
        return {"error": text}
    if kind.name.startswith(("gemini",)):
        status = text if where == "type" else "INVALID_ARGUMENT"
        return {"error": {"code": 400, "message": error["message"], "status": status}}
    if kind.framing == "eventstream":
        return {"message": error["message"], "__type": error["type"]}
    return {"error": error}


def _status(where: str) -> Callable[[Kind, str], httpx2.Response]:
    def respond(kind: Kind, text: str) -> httpx2.Response:
        if where == "page":
            return httpx2.Response(502, content=b"<html>" + _raw(text) + b"</html>")
        return _json(400, _json_error(kind, text, where))

    return respond


def _json(status: int, value: Any) -> httpx2.Response:
    """A JSON answer (lone surrogates as their JSON escapes)."""
    return httpx2.Response(
        status, content=json.dumps(value).encode(), headers={"content-type": "application/json"}
    )


def _body(kind: Kind, text: str) -> httpx2.Response:
    """A 200 answer that is not JSON."""
    return httpx2.Response(200, content=b"{" + _raw(text))


def _undecodable(kind: Kind, text: str) -> httpx2.Response:
    """A 200 answer that is not UTF-8."""
    return httpx2.Response(
        200,
        content=b'{"x": "' + b"\xff" + _raw(text) + b'"}',
        headers={"content-type": "application/json"},
    )


def _wrong_shape(kind: Kind, text: str) -> httpx2.Response:
    """A 200 JSON answer of the wrong shape, the key where text belongs."""
    return _json(
        200,
        {
            "choices": text,
            "content": text,
            "candidates": text,
            "output": text,
            "message": text,
            "data": text,
            "embeddings": text,
            "embedding": text,
        },
    )


def _not_a_stream(kind: Kind, text: str) -> httpx2.Response | None:
    if kind.framing == "embed":
        return None
    return httpx2.Response(200, content=_raw(text), headers={"content-type": "text/html"})


def _json_not_a_stream(kind: Kind, text: str) -> httpx2.Response | None:
    if kind.framing == "embed":
        return None
    return httpx2.Response(
        200, content=b"[" + _raw(text), headers={"content-type": "application/json"}
    )


def _stream(kind: Kind, body: bytes) -> httpx2.Response:
    content_type = {
        "sse": "text/event-stream",
        "ndjson": "application/x-ndjson",
        "eventstream": "application/vnd.amazon.eventstream",
    }[kind.framing]
    return httpx2.Response(200, content=body, headers={"content-type": content_type})


def _unreadable_line(kind: Kind, text: str) -> httpx2.Response | None:
    raw = _raw(text)
    match kind.framing:
        case "sse":
            event = b"event: message_start\n" if kind.name.startswith("anthropic") else b""
            if kind.name.startswith("responses"):
                event = b"event: response.created\n"
            return _stream(kind, event + b"data: " + raw + b"\n\n")
        case "ndjson":
            return _stream(kind, raw + b"\n")
        case "eventstream":
            headers = {
                ":event-type": "messageStart",
                ":content-type": "application/json",
                ":message-type": "event",
            }
            return _stream(kind, encode_message(headers, raw))
    return None


def _stream_error(where: str) -> Callable[[Kind, str], httpx2.Response | None]:
    def respond(kind: Kind, text: str) -> httpx2.Response | None:
        match kind.framing:
            case "sse":
                body: dict[str, Any] = _json_error(kind, text, where)
                if kind.name.startswith("anthropic"):
                    body = {"type": "error", **body}
                    return _stream(
                        kind, b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"
                    )
                if kind.name.startswith("responses"):
                    error = {"type": "error", "message": "refused", "code": "x"}
                    error["message" if where == "message" else "code"] = text
                    return _stream(
                        kind, b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
                    )
                return _stream(kind, b"data: " + json.dumps(body).encode() + b"\n\n")
            case "ndjson":
                return _stream(kind, json.dumps({"error": text}).encode() + b"\n")
            case "eventstream":
                if where == "type":
                    return _stream(kind, exception_message(text, "refused"))
                raw = encode_message(
                    {
                        ":exception-type": "validationException",
                        ":content-type": "application/json",
                        ":message-type": "exception",
                    },
                    _raw(text),
                )
                return _stream(kind, raw)
        return None

    return respond


ANSWERS = [
    Answer("error-page", False, _status("page")),
    Answer("error-page-stream", True, _status("page")),
    Answer("error-message", False, _status("message")),
    Answer("error-type", False, _status("type")),
    Answer("error-type-stream", True, _status("type")),
    Answer("not-json", False, _body),
    Answer("not-utf8", False, _undecodable),
    Answer("wrong-shape", False, _wrong_shape),
    Answer("not-a-stream", True, _not_a_stream),
    Answer("json-not-a-stream", True, _json_not_a_stream),
    Answer("unreadable-line", True, _unreadable_line),
    Answer("stream-error-message", True, _stream_error("message")),
    Answer("stream-error-type", True, _stream_error("type")),
]


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def rendered(exc: BaseException) -> str:
    """``str``, ``repr``, a traceback with locals, and every attribute of every error in the
    cause chain (``doc``, ``object``, ``request``, ``message``, ...)."""
    parts = [str(exc), repr(exc)]
    for error in _chain(exc):
        parts += [str(error), repr(error), repr(error.args)]
        for name in dir(error):
            if name.startswith("__") or name == "with_traceback":
                continue
            try:
                value = getattr(error, name)
            except Exception:  # a property that raises (httpx2's .request unset)
                continue
            if not callable(value):
                parts.append(f"{name}={value!r}")
    parts.append(
        "".join(traceback.TracebackException.from_exception(exc, capture_locals=True).format())
    )
    return "\n".join(parts)


async def _attempt(provider: Any, kind: Kind, stream: bool) -> BaseException | None:
    try:
        if kind.framing == "embed":
            await provider.embed(["hello"])
        elif stream:
            async with provider.chat_completion_stream(ChatRequest.of("hi")) as batches:
                async for _batch in batches:
                    pass
        else:
            await provider.chat_completion(ChatRequest.of("hi"))
    except Exception as exc:
        return exc
    return None


def _pads() -> list[int]:
    """Filler lengths that put the key across each cut, at every offset (with a margin for
    what precedes the echo in the text cut: a repr's quote, a stream line's prefix)."""
    found: set[int] = set()
    for cut in CUTS:
        found.update(range(max(cut - len(KEY) - 12, 0), cut + 4))
    return sorted(found)


@pytest.mark.parametrize("kind", KINDS, ids=[kind.name for kind in KINDS])
async def test_an_echoed_key_never_prints_at_any_offset_around_any_cut(kind: Kind) -> None:
    current: list[httpx2.Response] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        return current[0]

    provider = kind.build(httpx2.MockTransport(handler))
    leaks: dict[str, list[int]] = {}
    outputs = 0
    async with provider.open():
        for answer in ANSWERS:
            if answer.stream and kind.framing == "embed":
                continue
            for pad in _pads():
                response = answer.respond(kind, _echo(pad))
                if response is None:
                    break
                current[:] = [response]
                error = await _attempt(provider, kind, answer.stream)
                assert error is not None, (answer.name, pad)
                assert isinstance(error, KovaError), (answer.name, pad, repr(error)[:300])
                str(error).encode()  # printable as UTF-8
                outputs += 1
                if leaked(rendered(error)):
                    leaks.setdefault(answer.name, []).append(pad)
    assert outputs > 500
    assert {name: len(pads) for name, pads in leaks.items()} == {}


CHAT_KINDS = [kind for kind in KINDS if kind.framing != "embed"]


async def _turn(agent: Any, stream: bool) -> str:
    """What one failed turn shows (its traceback holds this frame, not the test's)."""
    events: list[object] = []
    try:
        if stream:
            async with agent.stream("hi") as turn:
                async for event in turn:
                    events.append(event)
        else:
            await agent.run("hi")
    except KovaError as exc:
        # What the web view shows of it (EventServer.fail_turn's turn_failed message).
        page = {"type": "turn_failed", "error": f"{type(exc).__name__}: {exc}"}
        from kova.web import _schema

        return rendered(exc) + repr(events) + _schema.encode(page)
    raise AssertionError("the turn did not fail")


@pytest.mark.parametrize("kind", CHAT_KINDS, ids=[kind.name for kind in CHAT_KINDS])
async def test_an_echoed_key_never_reaches_an_agents_logs_events_or_spans(kind: Kind) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from kova.telemetry.otel import OtelSubscriber

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    current: list[httpx2.Response] = []
    provider = kind.build(httpx2.MockTransport(lambda request: current[0]))
    builder = AgentBuilder().provider(provider).retry_config(RetryConfig(max_retries=0))
    shown: list[str] = []
    turns = 0
    async with builder.build() as agent:
        telemetry: list[object] = []
        agent.telemetry.subscribe(telemetry.append)
        agent.telemetry.subscribe(
            OtelSubscriber(tracer_provider=tracer_provider, capture_content=True)
        )
        with capture_logs() as logs:
            for answer in ANSWERS:
                for cut in CUTS:
                    for pad in (cut - len(KEY) // 2 - 3, cut - 5):
                        response = answer.respond(kind, _echo(pad))
                        if response is None:
                            continue
                        current[:] = [response]
                        shown.append(await _turn(agent, answer.stream))
                        turns += 1
        shown += [repr(telemetry), repr(logs)]
        # The web view's frames: its telemetry events, and a failed turn's message.
        from kova.web import _schema

        for event in telemetry:
            frame = _schema.telemetry_json(event)  # type: ignore[arg-type]
            if frame is not None:
                shown.append(_schema.encode(frame))
    for span in exporter.get_finished_spans():
        shown += [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
        shown += [repr(dict(event.attributes or {})) for event in span.events]
    tracer_provider.shutdown()
    assert turns > 30
    assert telemetry
    assert leaked("\n".join(shown)) == []


@pytest.mark.parametrize("kind", KINDS, ids=[kind.name for kind in KINDS])
async def test_lone_surrogates_a_server_sends_never_stop_an_error_from_printing(
    kind: Kind,
) -> None:
    """A server's text with lone surrogates (a JSON escape of half an emoji, or its three raw
    bytes): ``print(error)`` to a UTF-8 stream works."""
    current: list[httpx2.Response] = []
    provider = kind.build(httpx2.MockTransport(lambda request: current[0]))
    tried = 0
    async with provider.open():
        for answer in ANSWERS:
            if answer.stream and kind.framing == "embed":
                continue
            response = answer.respond(kind, "half \ud83d, lone \udc80 ")
            if response is None:
                continue
            current[:] = [response]
            error = await _attempt(provider, kind, answer.stream)
            assert isinstance(error, KovaError), (answer.name, repr(error)[:300])
            for shown in (str(error), repr(error), *(str(e) for e in _chain(error))):
                shown.encode()
            tried += 1
    assert tried >= 5
