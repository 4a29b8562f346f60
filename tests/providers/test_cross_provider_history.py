"""A history written by one provider, sent to another: provider data stays with its owner.

Gemini's ``thoughtSignature`` rides on kova blocks as provider metadata (text parts and
function calls). Only the Gemini encoder sends it back; every other provider's encoder reads
the blocks' text, calls and results and never puts the signature on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kova import InferenceConfig, Message, Text, ToolResult, ToolUse
from kova.providers import ChatRequest
from kova.providers.anthropic import AnthropicConfig
from kova.providers.anthropic._codec import AnthropicCodec
from kova.providers.bedrock import BedrockConfig
from kova.providers.bedrock._codec import BedrockCodec
from kova.providers.gemini import GeminiConfig
from kova.providers.gemini._codec import GeminiCodec
from kova.providers.gemini._convert import THOUGHT_SIGNATURE_KEY
from kova.providers.ollama import OllamaConfig
from kova.providers.ollama._codec import OllamaCodec
from kova.providers.openai import OpenAiConfig
from kova.providers.openai._codec import OpenAiCodec
from kova.providers.openai._responses import OpenAiResponsesCodec
from kova.providers.openai._responses_config import OpenAiResponsesConfig

SIGNATURES = ("dGV4dC1zaWc=", "Y2FsbC1zaWc=", "ZW1wdHktc2ln", "bGFzdC1zaWc=")


def _signed(signature: str) -> dict[str, Any]:
    return {THOUGHT_SIGNATURE_KEY: signature}


GEMINI_HISTORY = [
    Message.user("Weather in Paris?"),
    Message.assistant(
        [
            Text(text="Let me check.", provider_metadata=_signed(SIGNATURES[0])),
            ToolUse(
                id="fc_1",
                name="get_weather",
                input={"city": "Paris"},
                provider_metadata=_signed(SIGNATURES[1]),
            ),
            Text(text="", provider_metadata=_signed(SIGNATURES[2])),
        ]
    ),
    Message.tool_results([ToolResult(tool_use_id="fc_1", content="18°C")]),
    Message.assistant([Text(text="It is 18°C.", provider_metadata=_signed(SIGNATURES[3]))]),
    Message.user("Thanks! And Rome?"),
]

OTHERS = {
    "openai": OpenAiCodec(OpenAiConfig(model="m", api_key="k")),
    "openai-responses": OpenAiResponsesCodec(OpenAiResponsesConfig(model="m", api_key="k")),
    "anthropic": AnthropicCodec(AnthropicConfig(model="m", api_key="k")),
    "bedrock": BedrockCodec(BedrockConfig(region="us-east-1", model_id="m")),
    "ollama": OllamaCodec(OllamaConfig(model="m", base_url="http://x")),
}


def _body(codec: Any, stream: bool) -> str:
    request = ChatRequest(messages=GEMINI_HISTORY, config=InferenceConfig(max_tokens=64))
    return json.dumps(codec.encode(request, stream=stream).body, ensure_ascii=False)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_providers_never_send_gemini_signatures(name: str, stream: bool) -> None:
    body = _body(OTHERS[name], stream)
    for signature in SIGNATURES:
        assert signature not in body, name
    assert "thoughtSignature" not in body
    assert THOUGHT_SIGNATURE_KEY not in body
    # The text itself does go (the signed blocks are ordinary text to them).
    assert "Let me check." in body
    assert "It is 18°C." in body


def test_gemini_echoes_every_signature_on_its_own_part() -> None:
    body = json.loads(_body(GeminiCodec(GeminiConfig(model="m", api_key="k")), False))
    model_turns = [c["parts"] for c in body["contents"] if c["role"] == "model"]
    assert model_turns == [
        [
            {"text": "Let me check.", "thoughtSignature": SIGNATURES[0]},
            {
                "functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}},
                "thoughtSignature": SIGNATURES[1],
            },
            {"text": "", "thoughtSignature": SIGNATURES[2]},
        ],
        [{"text": "It is 18°C.", "thoughtSignature": SIGNATURES[3]}],
    ]
