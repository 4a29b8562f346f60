"""The six wire formats' fake servers and a provider for each (tests of compaction share it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig, BedrockProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import (
    open_anthropic_server,
    open_bedrock_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    open_responses_server,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from kova.providers import Provider


@attrs.frozen
class Format:
    name: str
    open_server: Callable[..., Any]
    build: Callable[[Any], Provider]


FORMATS = [
    Format(
        "openai",
        open_openai_server,
        lambda server: OpenAiCompatibleProvider(
            OpenAiConfig(model="m", base_url=server.base_url, api_key="k")
        ),
    ),
    Format(
        "azure",
        open_openai_server,
        lambda server: OpenAiCompatibleProvider(
            OpenAiConfig(
                model="m",
                base_url=server.base_url,
                api_key="k",
                chat_completions_path="/openai/deployments/m/chat/completions",
                api_version="2024-10-21",
            )
        ),
    ),
    Format(
        "anthropic",
        open_anthropic_server,
        lambda server: AnthropicProvider(
            AnthropicConfig(model="m", base_url=server.base_url, api_key="k")
        ),
    ),
    Format(
        "gemini",
        open_gemini_server,
        lambda server: GeminiProvider(
            GeminiConfig(model="m", base_url=server.base_url, api_key="k")
        ),
    ),
    Format(
        "bedrock",
        open_bedrock_server,
        lambda server: BedrockProvider(
            BedrockConfig(
                region="us-east-1", model_id="m", endpoint_url=server.base_url, **server.credentials
            )
        ),
    ),
    Format(
        "ollama",
        open_ollama_server,
        lambda server: OllamaProvider(OllamaConfig(model="m", base_url=server.base_url)),
    ),
    Format(
        "responses",
        open_responses_server,
        lambda server: OpenAiResponsesProvider(
            OpenAiResponsesConfig(model="gpt-fake", base_url=server.base_url, api_key="k")
        ),
    ),
]

NATIVE = [f for f in FORMATS if f.name != "azure"]
"""The five native formats and Responses."""


def chat_requests(server: Any) -> list[Any]:
    """The chat requests ``server`` read (each decoded to kova values; not counts or lists)."""
    return [r for r in server.requests if r.decoded is not None]
