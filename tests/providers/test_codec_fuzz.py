"""Arbitrary Unicode (lone surrogates included) and arbitrary JSON nesting through every
codec's encode and decode: only kova errors come out, and what kova sends is valid UTF-8
JSON (issue 23). Bounded examples, no network: decoding goes through the HTTP provider's
own non-streamed path (an ``httpx2.MockTransport``) and its stream iterator."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx2
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kova import KovaError, Message, Text, Thinking, ToolDefinition, ToolResult, ToolUse
from kova._json import MAX_JSON_DEPTH, dumps_bytes
from kova.providers import ChatRequest, HttpProvider
from kova.providers.anthropic import AnthropicConfig
from kova.providers.anthropic._codec import AnthropicCodec
from kova.providers.bedrock import BedrockConfig
from kova.providers.bedrock._codec import BedrockCodec
from kova.providers.gemini import GeminiConfig
from kova.providers.gemini._codec import GeminiCodec
from kova.providers.ollama import OllamaConfig
from kova.providers.ollama._codec import OllamaCodec
from kova.providers.openai import OpenAiConfig, OpenAiResponsesConfig
from kova.providers.openai._codec import OpenAiCodec
from kova.providers.openai._responses import OpenAiResponsesCodec

from ._contract import run as run_stream
from ._hostile import WIRES

CODECS: dict[str, Any] = {
    "openai": OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
    "anthropic": AnthropicCodec(AnthropicConfig(model="m", api_key="k")),
    "gemini": GeminiCodec(GeminiConfig(model="m", api_key="k")),
    "ollama": OllamaCodec(OllamaConfig(model="m", base_url="http://x")),
    "bedrock": BedrockCodec(BedrockConfig(region="us-east-1", model_id="m")),
    "openai-responses": OpenAiResponsesCodec(OpenAiResponsesConfig(model="m", api_key="k")),
}
WIRE = {wire.name: wire for wire in WIRES}

# Every code point, lone surrogates included (hypothesis leaves category Cs out by default).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def nested_json(draw: st.DrawFn) -> str:
    """JSON text: an arbitrary value wrapped in up to 3,000 arrays or objects."""
    depth = draw(st.sampled_from([0, 1, 5, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 900, 3000]))
    inner = json.dumps(draw(JSON_VALUES))
    if draw(st.booleans()):
        return "[" * depth + inner + "]" * depth
    return '{"k":' * depth + inner + "}" * depth


FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _decode_whole(codec: Any, body: bytes) -> None:
    async def main() -> None:
        def answer(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

        provider = HttpProvider(
            codec, base_url="http://fuzz", transport=httpx2.MockTransport(answer)
        )
        async with provider.open():
            with contextlib.suppress(KovaError):
                await provider.chat_completion(ChatRequest.of("hi"))

    trio.run(main)


@pytest.mark.parametrize("name", list(CODECS))
@FUZZ
@given(body=nested_json() | ANY_TEXT.map(lambda text: json.dumps({"text": text})))
def test_decoding_any_body_raises_only_kova_errors(name: str, body: str) -> None:
    _decode_whole(CODECS[name], body.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("name", list(WIRE))
@FUZZ
@given(args=nested_json())
def test_decoding_any_tool_arguments_raises_only_kova_errors(name: str, args: str) -> None:
    wire = WIRE[name]
    _decode_whole(CODECS[name], wire.tool_body(args))
    # The stream path: a decoder may fail with a kova error; nothing else escapes.
    events, _error = run_stream(CODECS[name], wire.tool_stream(args))
    for event in events:
        assert type(event).__module__.startswith("kova.")


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    text = draw(ANY_TEXT)
    arguments = draw(st.dictionaries(ANY_TEXT, JSON_VALUES, max_size=3))
    return [
        Message.user(text or "x"),
        Message.assistant(
            [
                Thinking(text=draw(ANY_TEXT), signature=draw(ANY_TEXT) or None),
                Text(text=draw(ANY_TEXT)),
                ToolUse(id="call_1", name="f", input=arguments),
            ]
        ),
        Message.tool_results([ToolResult(tool_use_id="call_1", content=draw(ANY_TEXT))]),
        Message.user(draw(ANY_TEXT) or "y"),
    ]


TOOL = ToolDefinition(
    name="f", parameters={"type": "object", "properties": {"q": {"type": "string"}}}
)


@pytest.mark.parametrize("name", list(CODECS))
@FUZZ
@given(history=histories(), stream=st.booleans())
def test_encoding_any_text_gives_utf8_json_that_reads_back(
    name: str, history: list[Message], stream: bool
) -> None:
    wire = CODECS[name].encode(ChatRequest(messages=history, tools=[TOOL]), stream=stream)
    sent = dumps_bytes(wire.body)
    text = sent.decode("utf-8")  # never a UnicodeEncodeError, always valid UTF-8
    assert json.loads(text) == json.loads(json.dumps(wire.body))


@given(depth=st.integers(MAX_JSON_DEPTH + 1, 5000))
@FUZZ
def test_tool_use_refuses_arguments_nested_past_the_limit(depth: int) -> None:
    value: object = 1
    for _ in range(depth):
        value = {"k": value}
    with pytest.raises(ValueError, match="nested more than"):
        ToolUse(id="c", name="f", input=value)  # type: ignore[arg-type]
