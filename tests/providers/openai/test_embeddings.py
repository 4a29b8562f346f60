"""OpenAiEmbeddingProvider against the fake server."""

from __future__ import annotations

import math

import pytest

from kova import InvalidResponse
from kova.providers.openai import OpenAiEmbeddingConfig, OpenAiEmbeddingProvider
from kova.providers.openai._embeddings import decode_embeddings
from kova.testing import FakeOpenAiServer, Script, open_openai_server


def provider_for(server: FakeOpenAiServer, **config: object) -> OpenAiEmbeddingProvider:
    settings: dict[str, object] = {"api_key": "sk-test"} | config
    return OpenAiEmbeddingProvider(
        OpenAiEmbeddingConfig(base_url=server.base_url, **settings)  # type: ignore[arg-type]
    )


async def test_vectors_come_back_in_input_order_even_when_the_server_reverses_them() -> None:
    async with open_openai_server(Script([]), reverse_embeddings=True) as server:
        provider = provider_for(server)
        async with provider.open():
            vectors = await provider.embed(["alpha", "beta", "gamma"])
            singles = [(await provider.embed([text]))[0] for text in ["alpha", "beta", "gamma"]]
    assert vectors == singles
    assert len({tuple(v) for v in vectors}) == 3
    assert all(len(v) == 8 for v in vectors)
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-9) for v in vectors)
    body = server.requests[0].json()
    assert body == {
        "model": "text-embedding-3-small",
        "input": ["alpha", "beta", "gamma"],
        "encoding_format": "float",
    }
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


async def test_dimensions_are_requested_and_reported() -> None:
    async with open_openai_server(Script([])) as server:
        provider = provider_for(server, dimensions=3, model="text-embedding-3-large")
        assert provider.dimensions == 3
        async with provider.open():
            (vector,) = await provider.embed(["x"])
    assert len(vector) == 3
    assert server.requests[0].json()["dimensions"] == 3
    assert server.requests[0].json()["model"] == "text-embedding-3-large"


async def test_inputs_beyond_the_batch_size_are_split_and_reassembled_in_order() -> None:
    texts = [f"text {n}" for n in range(7)]
    async with open_openai_server(
        Script([]), embedding_input_limit=3, reverse_embeddings=True
    ) as server:
        provider = provider_for(server, batch_size=3)
        async with provider.open():
            batched = await provider.embed(texts)
        unbatched_server_vectors = []
        for text in texts:
            async with provider.open():
                unbatched_server_vectors.extend(await provider.embed([text]))
    assert batched == unbatched_server_vectors
    sizes = [len(r.json()["input"]) for r in server.requests[:3]]
    assert sizes == [3, 3, 1]


async def test_a_server_limit_is_reported_as_an_invalid_request() -> None:
    from kova import InvalidRequest

    async with open_openai_server(Script([]), embedding_input_limit=2) as server:
        provider = provider_for(server)
        async with provider.open():
            with pytest.raises(InvalidRequest, match="at most 2"):
                await provider.embed(["a", "b", "c"])


async def test_an_empty_input_sends_nothing() -> None:
    async with open_openai_server(Script([])) as server:
        provider = provider_for(server)
        async with provider.open():
            assert await provider.embed([]) == []
    assert server.requests == []


def test_base64_vectors_are_decoded() -> None:
    import base64
    import struct

    packed = base64.b64encode(struct.pack("<3f", 0.5, -1.0, 2.0)).decode()
    body = {"data": [{"index": 1, "embedding": [1.0]}, {"index": 0, "embedding": packed}]}
    assert decode_embeddings(body, 2) == [[0.5, -1.0, 2.0], [1.0]]


def test_missing_indices_are_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse, match="asked for 2"):
        decode_embeddings({"data": [{"index": 0, "embedding": [1.0]}]}, 2)
    with pytest.raises(InvalidResponse):
        decode_embeddings({"object": "list"}, 1)
