"""A proxy that ignores ``stream`` and serves the whole JSON answer to a streaming request:
every provider says "expected a stream, got a JSON body" (an ``InvalidResponse``), whatever
fields the body happens to carry (Anthropic's ``"type": "message"`` is not an error type)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from kova import InvalidResponse, JSONValue
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig

if TYPE_CHECKING:
    from kova.providers import Provider

USAGE_ANTHROPIC = {"input_tokens": 5, "output_tokens": 2}

# The non-streamed answer of each API (wire notes in shared/wire/), as a proxy would serve it.
BODIES: dict[str, JSONValue] = {
    "anthropic": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": USAGE_ANTHROPIC,
    },
    "openai": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi"},
                "finish_reason": "stop",
            }
        ],
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP"}
        ],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    },
    "ollama": {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "Hi"},
        "done": True,
        "done_reason": "stop",
    },
    "bedrock": {
        "output": {"message": {"role": "assistant", "content": [{"text": "Hi"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7},
    },
}


def _provider(name: str, transport: httpx2.MockTransport) -> Provider:
    url = "https://proxy.test"
    providers: dict[str, Any] = {
        "anthropic": lambda: AnthropicProvider(
            AnthropicConfig(model="claude-sonnet-4-5", api_key="k", base_url=url),
            transport=transport,
        ),
        "openai": lambda: OpenAiCompatibleProvider(
            OpenAiConfig(model="gpt-4o", api_key="k", base_url=url), transport=transport
        ),
        "gemini": lambda: GeminiProvider(
            GeminiConfig(model="gemini-2.5-flash", api_key="k", base_url=url),
            transport=transport,
        ),
        "ollama": lambda: OllamaProvider(
            OllamaConfig(model="llama3.2", base_url=url), transport=transport
        ),
        "bedrock": lambda: BedrockProvider(
            BedrockConfig(
                region="us-east-1",
                model_id="anthropic.claude-v2",
                endpoint_url=url,
                access_key_id="AKIDEXAMPLE",
                secret_access_key="secret",
            ),
            transport=transport,
        ),
    }
    provider: Provider = providers[name]()
    return provider


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_json_answer_to_a_streaming_request_is_named(name: str) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=BODIES[name])

    provider = _provider(name, httpx2.MockTransport(handler))
    async with provider.open():
        with pytest.raises(
            InvalidResponse, match=r"expected a stream .* got a JSON body"
        ) as caught:
            async with provider.chat_completion_stream(ChatRequest.of("hi")):
                pytest.fail("entered a stream that is not one")
    assert caught.value.error_type != "message"
