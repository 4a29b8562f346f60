"""Ollama embeddings: ``POST /api/embed``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse
from ..._models import Usage
from .._auth import bearer_auth
from .._embedding import Embeddings, HttpEmbeddings, embed_in_batches, finite_vector
from .._http import HttpTransport
from ._config import OllamaEmbeddingConfig
from ._convert import PROVIDER

if TYPE_CHECKING:
    import httpx2

    from ..._models import JSONValue

__all__ = ["OllamaEmbeddingProvider", "decode_embed", "encode_embed"]


def encode_embed(texts: Sequence[str], config: OllamaEmbeddingConfig) -> dict[str, JSONValue]:
    """The ``/api/embed`` body for one batch."""
    body: dict[str, JSONValue] = {"model": config.model, "input": list(texts)}
    if config.truncate is not None:
        body["truncate"] = config.truncate
    if config.dimensions is not None:
        body["dimensions"] = config.dimensions
    if config.keep_alive is not None:
        body["keep_alive"] = config.keep_alive
    return body


def decode_embed(body: JSONValue, count: int) -> tuple[list[list[float]], Usage | None]:
    """The vectors (input order: the API returns them so, with no index) and the prompt
    tokens it counted.

    Raises:
        InvalidResponse: malformed, or not exactly ``count`` vectors.
    """
    items = body.get("embeddings") if isinstance(body, Mapping) else None
    if not isinstance(items, list):
        raise InvalidResponse("the embed response has no embeddings", provider=PROVIDER)
    if len(items) != count:
        raise InvalidResponse(f"asked for {count} embeddings, got {len(items)}", provider=PROVIDER)
    vectors = [finite_vector(item, provider=PROVIDER) for item in items]
    assert isinstance(body, Mapping)
    tokens = body.get("prompt_eval_count")
    usage = (
        Usage(input_tokens=tokens)
        if isinstance(tokens, int) and not isinstance(tokens, bool)
        else None
    )
    return vectors, usage


class OllamaEmbeddingProvider(HttpEmbeddings):
    """Text embeddings from an Ollama server (``nomic-embed-text``, ``all-minilm``, ...).

    Args:
        config: server, model, dimensions and batch size.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Satisfies :class:`~kova.providers.EmbeddingProvider`. Use inside
    ``async with provider.open():``.
    """

    __slots__ = ()

    PROVIDER = PROVIDER
    config: OllamaEmbeddingConfig

    def __init__(
        self,
        config: OllamaEmbeddingConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(config, OllamaEmbeddingConfig):
            raise TypeError(
                "OllamaEmbeddingProvider takes an OllamaEmbeddingConfig, got "
                + type(config).__name__
            )
        self.config = config
        self._http = HttpTransport(
            provider=PROVIDER,
            base_url=config.base_url,
            client=client,
            transport=transport,
            auth=bearer_auth(config.api_key) if config.api_key is not None else None,
            **config.transport_options(),
        )

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """One vector per text, in input order, with the prompt tokens the server counted
        (``usage.input_tokens``, summed over batches).

        Raises:
            TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
            ProviderError: an error status or a malformed answer.
            KovaConnectionError, KovaTimeoutError: the transport failed.
        """
        return await embed_in_batches(texts, self.config.batch_size, self._send, provider=PROVIDER)

    async def _send(self, batch: list[str]) -> tuple[list[list[float]], Usage | None]:
        return await self._http.request_decoded(
            "POST",
            "/api/embed",
            partial(decode_embed, count=len(batch)),
            "the embed response",
            json_body=encode_embed(batch, self.config),
            headers=self.config.extra_headers or None,
        )
