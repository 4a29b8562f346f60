"""The five providers, each against a scripted fake server and against a raw server that sends
whatever bytes a test gives it (the hostile tests of issue 23)."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    Script,
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
)
from kova.testing._http_server import FakeResponse, FakeStream, RecordedRequest, serve_http
from kova.testing._wire.bedrock import encode_message, event_message

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from kova import JSONValue
    from kova.providers import Provider


def _sse(data: bytes, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + data + b"\n\n"


def _j(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@attrs.frozen
class Wire:
    """One provider's wire format, as much of it as the hostile tests need."""

    name: str
    build: Callable[..., Provider]
    """The provider for a base URL (credentials that a raw server accepts); keywords go to
    its config (``timeout=2``)."""
    open_fake: Callable[[Script], AbstractAsyncContextManager[Any]]
    stream_type: str
    tool_body: Callable[[str], bytes]
    """A whole (non-streamed) answer calling tool ``f`` with these argument JSON text."""
    tool_stream: Callable[[str], list[bytes]]
    """The frames of a streamed answer calling tool ``f`` with this argument JSON text."""
    raw_frame: Callable[[bytes], bytes]
    """One stream frame carrying this payload as its JSON."""
    build_fake: Callable[[Any], Provider] | None = None
    """The provider for a fake server (default: ``build(server.base_url)``)."""

    def for_fake(self, server: Any) -> Provider:
        return self.build_fake(server) if self.build_fake else self.build(server.base_url)


def _openai_body(args: str) -> bytes:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}}
    return _j(
        {
            "id": "c",
            "object": "chat.completion",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
        }
    )


def _openai_stream(args: str) -> list[bytes]:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    delta = {"index": 0, "function": {"arguments": args}}
    return [
        _sse(_j({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})),
        _sse(_j({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})),
        _sse(_j({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        b"data: [DONE]\n\n",
    ]


def _anthropic_body(args: str) -> bytes:
    return (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":'
        b'[{"type":"tool_use","id":"tu_1","name":"f","input":' + args.encode() + b"}],"
        b'"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}'
    )


def _anthropic_stream(args: str) -> list[bytes]:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    }
    block = {"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": args}
    return [
        _sse(_j(start), "message_start"),
        _sse(_j({"type": "content_block_start", "index": 0, "content_block": block})),
        _sse(_j({"type": "content_block_delta", "index": 0, "delta": delta})),
        _sse(_j({"type": "content_block_stop", "index": 0})),
        _sse(
            _j(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 1},
                }
            )
        ),
        _sse(_j({"type": "message_stop"})),
    ]


def _gemini_chunk(args: str) -> bytes:
    return (
        b'{"candidates":[{"content":{"role":"model","parts":[{"functionCall":'
        b'{"name":"f","args":' + args.encode() + b'}}]},"finishReason":"STOP"}],'
        b'"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1},"responseId":"r"}'
    )


def _ollama_line(args: str) -> bytes:
    return (
        b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"",'
        b'"tool_calls":[{"function":{"name":"f","arguments":' + args.encode() + b"}}]},"
        b'"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}'
    )


def _bedrock_body(args: str) -> bytes:
    return (
        b'{"output":{"message":{"role":"assistant","content":[{"toolUse":'
        b'{"toolUseId":"t1","name":"f","input":' + args.encode() + b"}}]}},"
        b'"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}'
    )


def _bedrock_stream(args: str) -> list[bytes]:
    start: dict[str, JSONValue] = {
        "contentBlockIndex": 0,
        "start": {"toolUse": {"toolUseId": "t1", "name": "f"}},
    }
    usage: dict[str, JSONValue] = {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}
    return [
        event_message("messageStart", {"role": "assistant"}),
        event_message("contentBlockStart", start),
        event_message(
            "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": args}}}
        ),
        event_message("contentBlockStop", {"contentBlockIndex": 0}),
        event_message("messageStop", {"stopReason": "tool_use"}),
        event_message("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}),
    ]


def _bedrock_frame(payload: bytes) -> bytes:
    headers = {
        ":event-type": "messageStart",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return encode_message(headers, payload)


def _bedrock(url: str, **settings: Any) -> BedrockProvider:
    return BedrockProvider(
        BedrockConfig(
            region="us-east-1",
            model_id="m",
            endpoint_url=url,
            access_key_id="AKIAFAKE",
            secret_access_key="fake-secret",
            **settings,
        )
    )


WIRES = [
    Wire(
        name="openai",
        build=lambda url, **settings: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=url, api_key="k", **settings)
        ),
        open_fake=open_openai_server,
        stream_type="text/event-stream",
        tool_body=_openai_body,
        tool_stream=_openai_stream,
        raw_frame=_sse,
    ),
    Wire(
        name="anthropic",
        build=lambda url, **settings: AnthropicProvider(
            AnthropicConfig(model="m", base_url=url, api_key="k", **settings)
        ),
        open_fake=open_anthropic_server,
        stream_type="text/event-stream",
        tool_body=_anthropic_body,
        tool_stream=_anthropic_stream,
        raw_frame=lambda payload: _sse(payload, "message_start"),
    ),
    Wire(
        name="gemini",
        build=lambda url, **settings: GeminiProvider(
            GeminiConfig(model="m", base_url=url, api_key="k", **settings)
        ),
        open_fake=open_gemini_server,
        stream_type="text/event-stream",
        tool_body=_gemini_chunk,
        tool_stream=lambda args: [_sse(_gemini_chunk(args))],
        raw_frame=_sse,
    ),
    Wire(
        name="ollama",
        build=lambda url, **settings: OllamaProvider(
            OllamaConfig(model="m", base_url=url, **settings)
        ),
        open_fake=open_ollama_server,
        stream_type="application/x-ndjson",
        tool_body=_ollama_line,
        tool_stream=lambda args: [_ollama_line(args) + b"\n"],
        raw_frame=lambda payload: payload + b"\n",
    ),
    Wire(
        name="bedrock",
        build=_bedrock,
        open_fake=open_bedrock_server,
        stream_type="application/vnd.amazon.eventstream",
        tool_body=_bedrock_body,
        tool_stream=_bedrock_stream,
        raw_frame=_bedrock_frame,
        build_fake=lambda server: BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="m",
                endpoint_url=server.base_url,
                **server.credentials,
            )
        ),
    ),
]

WIRE_IDS = [wire.name for wire in WIRES]

Reply = FakeResponse | FakeStream


@asynccontextmanager
async def raw_server(
    reply: Callable[[RecordedRequest], Reply],
) -> AsyncIterator[tuple[str, list[RecordedRequest]]]:
    """A loopback server answering every request with ``reply(request)``; yields its base URL
    and the requests it received."""
    received: list[RecordedRequest] = []

    async def handler(request: RecordedRequest) -> Reply:
        received.append(request)
        return reply(request)

    async with trio.open_nursery() as nursery:
        url: str = await nursery.start(serve_http, handler)
        yield url, received
        nursery.cancel_scope.cancel()
