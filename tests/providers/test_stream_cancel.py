"""Cancelling a stream mid-way, the same for every provider whose fake server can stall: the
HTTP read under the stream stops, nothing more arrives, and the provider serves the next call
(on a new connection: the abandoned one is never reused)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import TextDelta
from kova.providers import ChatRequest, StopEvent
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig, OllamaProvider
from kova.providers.openai import OpenAiCompatibleProvider, OpenAiConfig
from kova.testing import (
    Script,
    StreamReply,
    open_anthropic_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    reply_text,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from kova.providers import Provider

# name -> (open the fake server on a script, build the provider for its base URL)
FAKES: dict[
    str,
    tuple[Callable[[Script], AbstractAsyncContextManager[Any]], Callable[[str], Provider]],
] = {
    "openai": (
        open_openai_server,
        lambda url: OpenAiCompatibleProvider(OpenAiConfig(model="m", base_url=url, api_key="k")),
    ),
    "anthropic": (
        open_anthropic_server,
        lambda url: AnthropicProvider(AnthropicConfig(model="m", base_url=url, api_key="k")),
    ),
    "gemini": (
        open_gemini_server,
        lambda url: GeminiProvider(GeminiConfig(model="m", base_url=url, api_key="k")),
    ),
    "ollama": (
        open_ollama_server,
        lambda url: OllamaProvider(OllamaConfig(model="m", base_url=url)),
    ),
}


@pytest.mark.parametrize("name", list(FAKES))
async def test_cancelling_mid_stream_stops_the_read_and_the_provider_stays_usable(
    name: str, autojump_clock: object
) -> None:
    open_server, build = FAKES[name]
    # The model sends two pieces of text, then stalls with the connection open.
    held = StreamReply(
        response=reply_text("Partial answer that never ends"), chunk_chars=8, hold_after=2
    )
    async with open_server(Script([held, reply_text("after the cancel")])) as server:
        provider = build(server.base_url)
        async with provider.open():
            texts: list[str] = []
            stops: list[StopEvent] = []
            with trio.move_on_after(30) as scope:
                async with provider.chat_completion_stream(ChatRequest.of("q")) as batches:
                    async for batch in batches:
                        texts.extend(e.text for e in batch if isinstance(e, TextDelta))
                        stops.extend(e for e in batch if isinstance(e, StopEvent))
            assert scope.cancelled_caught
            assert trio.current_time() == 30
            response = await provider.chat_completion(ChatRequest.of("again"))
    assert "".join(texts) == "Partial answer t"
    assert stops == []
    assert response.text == "after the cancel"
    first, second = server.requests
    assert first.connection != second.connection
