"""The three embedding providers check their input alike, before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from kova.providers import EmbeddingProvider
from kova.providers.gemini import GeminiEmbeddingConfig, GeminiEmbeddingProvider
from kova.providers.ollama import OllamaEmbeddingConfig, OllamaEmbeddingProvider
from kova.providers.openai import OpenAiEmbeddingConfig, OpenAiEmbeddingProvider
from kova.testing import Script, open_gemini_server, open_ollama_server, open_openai_server

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

Build = Callable[[str], EmbeddingProvider]

PROVIDERS: dict[str, tuple[Callable[[], AbstractAsyncContextManager[Any]], Build]] = {
    "openai": (
        lambda: open_openai_server(Script([])),
        lambda url: OpenAiEmbeddingProvider(OpenAiEmbeddingConfig(base_url=url, api_key="k")),
    ),
    "gemini": (
        lambda: open_gemini_server(Script([])),
        lambda url: GeminiEmbeddingProvider(GeminiEmbeddingConfig(base_url=url, api_key="k")),
    ),
    "ollama": (
        lambda: open_ollama_server(Script([])),
        lambda url: OllamaEmbeddingProvider(OllamaEmbeddingConfig(model="e", base_url=url)),
    ),
}


@pytest.mark.parametrize(
    ("texts", "match"),
    [
        ("one string", "not one string"),
        (None, "got NoneType"),
        (["fine", 2], "item 1 is a int"),
        ([b"bytes"], "item 0 is a bytes"),
    ],
)
@pytest.mark.parametrize("name", list(PROVIDERS))
async def test_bad_texts_are_a_type_error_before_any_request(
    name: str, texts: object, match: str
) -> None:
    open_server, build = PROVIDERS[name]
    async with open_server() as server:
        embedder = build(server.base_url)
        async with embedder.open():
            with pytest.raises(TypeError, match=match):
                await embedder.embed(texts)  # type: ignore[arg-type]
            empty = await embedder.embed([])
    assert server.requests == []
    assert list(empty) == []
