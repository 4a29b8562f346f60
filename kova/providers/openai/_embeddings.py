"""OpenAI (and compatible) embeddings: ``POST /v1/embeddings``."""

from __future__ import annotations

import array
import base64
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import attrs

from ..._errors import ProviderError
from .._checks import (
    at_least,
    check_http_url,
    check_int,
    check_non_empty_str,
    check_optional_str,
    check_path,
)
from .._embedding import Embeddings, HttpEmbeddings, embed_in_batches, finite_vector
from .._http import HttpTransport
from .._settings import HttpSettings, seconds_field
from ._codec import openai_error_details
from ._config import DEFAULT_BASE_URL, _query_params, endpoint_path, openai_auth
from ._convert import PROVIDER, decode_usage

if TYPE_CHECKING:
    import httpx2

    from ..._models import JSONValue, Usage

__all__ = ["OpenAiEmbeddingConfig", "OpenAiEmbeddingProvider", "decode_embeddings"]


@attrs.frozen(kw_only=True)
class OpenAiEmbeddingConfig(HttpSettings):
    """How to reach an OpenAI-compatible ``/v1/embeddings`` endpoint."""

    model: str = attrs.field(default="text-embedding-3-small", validator=check_non_empty_str)
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    dimensions: int | None = attrs.field(default=None, validator=at_least(1))
    """Ask the model to shorten vectors to this size (``text-embedding-3-*`` support it)."""
    embeddings_path: str = attrs.field(default="/v1/embeddings", validator=check_path)
    api_version: str | None = attrs.field(default=None, validator=check_optional_str)
    """Azure ``api-version`` (switches auth to the ``api-key`` header)."""
    timeout: float = seconds_field(30.0)
    batch_size: int = attrs.field(default=2048, validator=[check_int, attrs.validators.gt(0)])
    """Inputs per request; OpenAI accepts at most 2048."""

    key_variables = ("OPENAI_API_KEY",)
    provider_label = "OpenAI"

    def query_params(self) -> dict[str, str]:
        """Query parameters sent with every request."""
        return _query_params(self.api_version)


def _vector(value: JSONValue) -> list[float]:
    if isinstance(value, str):
        # encoding_format=base64: little-endian float32.
        floats = array.array("f")
        try:
            floats.frombytes(base64.b64decode(value, validate=True))
        except ValueError:  # binascii.Error is one; so is a length not a multiple of 4
            raise ProviderError.invalid_response(
                "an embedding is not base64 float32 values", provider=PROVIDER
            ) from None
        if sys.byteorder != "little":  # pragma: no cover - big-endian hosts only
            floats.byteswap()
        return finite_vector(floats.tolist(), provider=PROVIDER)
    if isinstance(value, list):
        return finite_vector(value, provider=PROVIDER)
    raise ProviderError.invalid_response(
        "an embedding is neither a list of numbers nor base64", provider=PROVIDER
    )


def decode_embeddings(body: JSONValue, count: int) -> list[list[float]]:
    """The vectors of one ``/embeddings`` response, in input order (sorted by ``index``: the
    API documents order but not every server keeps it).

    Raises:
        InvalidResponse: the body is malformed or does not answer all ``count`` inputs.
    """
    data = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(data, Sequence):
        raise ProviderError.invalid_response(
            "the embeddings response has no data", provider=PROVIDER
        )
    vectors: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise ProviderError.invalid_response(
                "an embedding item is not an object", provider=PROVIDER
            )
        index = item.get("index", position)
        if not isinstance(index, int):
            raise ProviderError.invalid_response(
                "an embedding index is not an integer", provider=PROVIDER
            )
        vectors[index] = _vector(item.get("embedding"))
    if sorted(vectors) != list(range(count)):
        raise ProviderError.invalid_response(
            f"asked for {count} embeddings, got indices {sorted(vectors)[:10]}", provider=PROVIDER
        )
    return [vectors[index] for index in range(count)]


class OpenAiEmbeddingProvider(HttpEmbeddings):
    """Text embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        config: endpoint, model, dimensions and batch size.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Use inside ``async with provider.open():``.
    """

    __slots__ = ("_path",)

    PROVIDER = PROVIDER
    config: OpenAiEmbeddingConfig
    _path: str

    def __init__(
        self,
        config: OpenAiEmbeddingConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._http = HttpTransport(
            provider=PROVIDER,
            base_url=config.base_url,
            client=client,
            transport=transport,
            error_details=openai_error_details,
            auth=openai_auth(config),
            **config.transport_options(),
        )
        self._path = endpoint_path(config.base_url, config.embeddings_path)

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """One vector per text, in input order, with the tokens the API counted
        (``usage.input_tokens`` from ``prompt_tokens``, summed over batches).

        More texts than ``config.batch_size`` (OpenAI's limit is 2048 per request) are sent
        as several requests, one after another, and reassembled in order.

        Raises:
            ProviderError: an error status or a malformed answer.
            KovaConnectionError, KovaTimeoutError: the transport failed.

        On cancellation the request in flight is abandoned; nothing is returned.
        """
        return await embed_in_batches(texts, self.config.batch_size, self._send, provider=PROVIDER)

    async def _send(self, batch: list[str]) -> tuple[list[list[float]], Usage | None]:
        body: dict[str, JSONValue] = {
            "model": self.config.model,
            "input": batch,
            "encoding_format": "float",
        }
        if self.config.dimensions is not None:
            body["dimensions"] = self.config.dimensions
        return await self._http.request_decoded(
            "POST",
            self._path,
            partial(_decode_answer, count=len(batch)),
            "the embeddings response",
            json_body=body,
            params=self.config.query_params() or None,
            headers=self.config.extra_headers or None,
        )


def _decode_answer(body: JSONValue, count: int) -> tuple[list[list[float]], Usage | None]:
    vectors = decode_embeddings(body, count)
    usage = decode_usage(body.get("usage")) if isinstance(body, Mapping) else None
    return vectors, usage
