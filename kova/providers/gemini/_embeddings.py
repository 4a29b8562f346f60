"""Gemini embeddings: ``POST /v1beta/models/{model}:batchEmbedContents``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

from ..._errors import InvalidResponse
from .._auth import header_auth
from .._embedding import Embeddings, HttpEmbeddings, check_texts, embed_in_batches, finite_vector
from .._http import HttpTransport
from ._config import GeminiEmbeddingConfig
from ._convert import PROVIDER, error_details

if TYPE_CHECKING:
    import httpx2

    from ..._models import JSONValue, Usage

__all__ = ["GeminiEmbeddingProvider", "decode_batch_embeddings", "encode_batch_embeddings"]


def encode_batch_embeddings(texts: Sequence[str], config: GeminiEmbeddingConfig) -> JSONValue:
    """The ``batchEmbedContents`` body: one request per text, in order."""
    name = "models/" + config.model.removeprefix("models/")
    requests: list[JSONValue] = []
    for text in texts:
        request: dict[str, JSONValue] = {"model": name, "content": {"parts": [{"text": text}]}}
        if config.task_type is not None:
            request["taskType"] = config.task_type
        if config.dimensions is not None:
            request["outputDimensionality"] = config.dimensions
        requests.append(request)
    return {"requests": requests}


def decode_batch_embeddings(body: JSONValue, count: int) -> list[list[float]]:
    """The vectors of one ``batchEmbedContents`` answer (same order as the requests).

    Raises:
        InvalidResponse: malformed, or not exactly ``count`` embeddings.
    """
    items = body.get("embeddings") if isinstance(body, Mapping) else None
    if not isinstance(items, list):
        raise InvalidResponse("the embeddings response has no embeddings", provider=PROVIDER)
    if len(items) != count:
        raise InvalidResponse(f"asked for {count} embeddings, got {len(items)}", provider=PROVIDER)
    return [
        finite_vector(item.get("values") if isinstance(item, Mapping) else None, provider=PROVIDER)
        for item in items
    ]


class GeminiEmbeddingProvider(HttpEmbeddings):
    """Text embeddings from Gemini (``gemini-embedding-001`` and the like).

    Args:
        config: model, key, dimensions, task type and batch size.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Satisfies :class:`~kova.providers.EmbeddingProvider`. Use inside
    ``async with provider.open():``. The API reports no token usage for embeddings, so
    :attr:`~kova.providers.Embeddings.usage` is ``None``.
    """

    __slots__ = ()

    PROVIDER = PROVIDER
    config: GeminiEmbeddingConfig

    def __init__(
        self,
        config: GeminiEmbeddingConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(config, GeminiEmbeddingConfig):
            raise TypeError(
                "GeminiEmbeddingProvider takes a GeminiEmbeddingConfig, got "
                + type(config).__name__
            )
        self.config = config
        key = config.api_key
        self._http = HttpTransport(
            provider=PROVIDER,
            base_url=config.base_url,
            client=client,
            transport=transport,
            error_details=error_details,
            auth=header_auth("x-goog-api-key", key) if key is not None else None,
            **config.transport_options(),
        )

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """One vector per text, in input order.

        More texts than ``config.batch_size`` (the API takes at most 100 per call) go as
        several requests, one after another, reassembled in order.

        Raises:
            TypeError: ``texts`` is a single string, not a sequence, or holds a non-string.
            ProviderAuthError: no key is configured.
            ProviderError: an error status or a malformed answer.
            KovaConnectionError, KovaTimeoutError: the transport failed.
        """
        texts = check_texts(texts)
        if self.config.api_key is None:
            raise self.config.missing_key_error(PROVIDER)
        return await embed_in_batches(texts, self.config.batch_size, self._send, provider=PROVIDER)

    async def _send(self, batch: list[str]) -> tuple[list[list[float]], Usage | None]:
        model = self.config.model.removeprefix("models/")
        vectors = await self._http.request_decoded(
            "POST",
            f"/{self.config.api_version}/models/{model}:batchEmbedContents",
            partial(decode_batch_embeddings, count=len(batch)),
            "the embeddings response",
            json_body=encode_batch_embeddings(batch, self.config),
            headers=self.config.extra_headers or None,
        )
        return vectors, None
