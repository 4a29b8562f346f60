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


# --- what a server answers: vectors kova refuses (issue 43, item 4) -------------------------

BASE = "https://x.test"


def _openai_body(vectors: list[Any]) -> Any:
    return {"data": [{"embedding": v, "index": i} for i, v in enumerate(vectors)]}


RAW: dict[str, tuple[Callable[..., Any], Callable[[list[Any]], Any]]] = {
    "openai": (
        lambda transport, **options: OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=BASE, api_key="k", **options), transport=transport
        ),
        _openai_body,
    ),
    "azure": (
        lambda transport, **options: OpenAiEmbeddingProvider(
            OpenAiEmbeddingConfig(base_url=BASE, api_key="k", api_version="2024-10-21", **options),
            transport=transport,
        ),
        _openai_body,
    ),
    "gemini": (
        lambda transport, **options: GeminiEmbeddingProvider(
            GeminiEmbeddingConfig(base_url=BASE, api_key="k", **options), transport=transport
        ),
        lambda vectors: {"embeddings": [{"values": v} for v in vectors]},
    ),
    "ollama": (
        lambda transport, **options: OllamaEmbeddingProvider(
            OllamaEmbeddingConfig(model="e", base_url=BASE, **options), transport=transport
        ),
        lambda vectors: {"embeddings": vectors},
    ),
}

HUGE = int("9" * 400)


@pytest.mark.parametrize(
    ("vectors", "match"),
    [
        ([[0.5, HUGE]], "too large for a float"),
        ([[0.5, float("nan")]], "not a finite number"),
        ([[float("inf"), 0.5]], "not a finite number"),
        ([[-float("inf")]], "not a finite number"),
        ([[]], "is empty"),
        ([[0.5, 0.25], [0.5]], "different dimensions"),
        ([[0.5, True]], "not a list of numbers"),
        ([[0.5, "1.5"]], "not a list of numbers"),
    ],
    ids=["400-digits", "nan", "inf", "minus-inf", "empty", "ragged", "bool", "string"],
)
@pytest.mark.parametrize("name", list(RAW))
async def test_vectors_that_are_no_embedding_are_an_invalid_response(
    name: str, vectors: list[Any], match: str
) -> None:
    import json

    import httpx2

    from kova import InvalidResponse

    build, body = RAW[name]
    # Python's JSON writer sends NaN, Infinity and 400-digit integers as they are.
    content = json.dumps(body(vectors)).encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=content, headers={"content-type": "application/json"})

    embedder = build(httpx2.MockTransport(handler))
    async with embedder.open():
        with pytest.raises(InvalidResponse, match=match):
            await embedder.embed(["a"] * len(vectors))


@pytest.mark.parametrize("name", list(RAW))
async def test_batches_of_different_dimensions_are_an_invalid_response(name: str) -> None:
    import json

    import httpx2

    from kova import InvalidResponse

    build, body = RAW[name]
    sizes = iter([2, 3])

    def handler(request: httpx2.Request) -> httpx2.Response:
        content = json.dumps(body([[0.5] * next(sizes)])).encode()
        return httpx2.Response(200, content=content, headers={"content-type": "application/json"})

    embedder = build(httpx2.MockTransport(handler), batch_size=1)
    async with embedder.open():
        with pytest.raises(InvalidResponse, match="different dimensions"):
            await embedder.embed(["a", "b"])


async def test_base64_float32_nan_is_an_invalid_response() -> None:
    import array
    import base64

    import httpx2

    from kova import InvalidResponse

    encoded = base64.b64encode(array.array("f", [0.5, float("nan")]).tobytes()).decode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"data": [{"embedding": encoded, "index": 0}]})

    build, _ = RAW["openai"]
    embedder = build(httpx2.MockTransport(handler))
    async with embedder.open():
        with pytest.raises(InvalidResponse, match="not a finite number"):
            await embedder.embed(["a"])
