"""Shared helpers for the OpenAI Responses provider tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kova.providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider

if TYPE_CHECKING:
    from kova.testing import FakeResponsesServer


def responses_provider(server: FakeResponsesServer, **config: object) -> OpenAiResponsesProvider:
    settings: dict[str, object] = {
        "model": "gpt-fake",
        "api_key": "sk-test",
        "base_url": server.base_url,
    } | config
    return OpenAiResponsesProvider(OpenAiResponsesConfig(**settings))  # type: ignore[arg-type]
