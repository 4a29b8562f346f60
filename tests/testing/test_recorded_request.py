"""What a fake server's ``chat_requests()`` returns reads as kova values, as docs/testing.md
says (issue 44, item 10): ``server.chat_requests()[0].messages`` is what
``provider.requests[0].messages`` is for a ScriptedProvider. Before, it was an undocumented
``RecordedRequest`` with only the wire (``.json()``, ``.body``)."""

from __future__ import annotations

from typing import Any

import pytest

from kova import InferenceConfig, Message
from kova.agent import AgentBuilder
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.openai import (
    OpenAiCompatibleProvider,
    OpenAiConfig,
    OpenAiResponsesConfig,
    OpenAiResponsesProvider,
)
from kova.testing import (
    RecordedRequest,
    ScriptedProvider,
    open_anthropic_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    open_responses_server,
    reply_text,
)
from kova.tools import tool

HISTORY = [Message.system("Be terse."), Message.user("hello")]


def _provider(kind: str, url: str) -> Any:
    if kind == "openai":
        return OpenAiCompatibleProvider(OpenAiConfig(base_url=url, model="m", api_key="k"))
    if kind == "responses":
        return OpenAiResponsesProvider(OpenAiResponsesConfig(base_url=url, model="m", api_key="k"))
    if kind == "anthropic":
        return AnthropicProvider(AnthropicConfig(base_url=url, model="m", api_key="k"))
    if kind == "gemini":
        return GeminiProvider(GeminiConfig(base_url=url, model="m", api_key="k"))
    return OllamaProvider(OllamaConfig(base_url=url, model="m"))


OPENERS = {
    "openai": (open_openai_server, "chat_requests"),
    "responses": (open_responses_server, "responses_requests"),
    "anthropic": (open_anthropic_server, "messages_requests"),
    "gemini": (open_gemini_server, "chat_requests"),
    "ollama": (open_ollama_server, "chat_requests"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", sorted(OPENERS))
async def test_a_fake_servers_requests_read_as_kova_values(kind: str, stream: bool) -> None:
    opener, listing = OPENERS[kind]
    config = InferenceConfig(max_tokens=100)
    scripted = ScriptedProvider([reply_text("hi")])
    async with opener([reply_text("hi")]) as server:
        for provider in (_provider(kind, server.base_url), scripted):
            agent = AgentBuilder().provider(provider).tools(_lookup()).build()
            async with agent:
                if stream:
                    async with agent.stream(HISTORY, config=config) as events:
                        async for _event in events:
                            pass
                else:
                    await agent.run(HISTORY, config=config)
    (request,) = getattr(server, listing)()
    assert isinstance(request, RecordedRequest)
    # The same assertions as for the ScriptedProvider's record of the same turn.
    (expected,) = scripted.requests
    assert request.messages == tuple(expected.messages)
    assert request.messages[-1] == Message.user("hello")
    assert [tool.name for tool in request.tools] == ["lookup"]
    assert request.config.max_tokens == 100
    assert request.stream is stream
    assert request.decoded is not None


def _lookup() -> Any:
    @tool
    def lookup(word: str) -> str:
        """Look a word up"""
        return word

    return lookup


async def test_a_request_that_was_not_decoded_says_so() -> None:
    async with open_openai_server([reply_text("hi")]) as server:
        provider = OpenAiCompatibleProvider(
            OpenAiConfig(base_url=server.base_url, model="m", api_key="k")
        )
        async with provider.open():
            await provider.list_models()
    (listing,) = server.requests
    assert listing.decoded is None
    with pytest.raises(ValueError, match="not a chat request the fake server decoded"):
        _ = listing.messages
