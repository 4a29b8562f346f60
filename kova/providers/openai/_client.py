"""The OpenAI-compatible chat provider: the pure codec over the shared HTTP transport."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs

from ..._errors import ProviderErrorClass
from .._base import heuristic_count_tokens
from .._http import ErrorDetails, HttpTransport, default_error_details
from ._config import endpoint_path
from ._convert import PROVIDER, decode_models, decode_response, encode_request
from ._stream import OpenAiStreamDecoder

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    import httpx2

    from ..._models import (
        InferenceConfig,
        JSONValue,
        Message,
        ModelInfo,
        ModelResponse,
        StreamEvent,
        ToolDefinition,
    )
    from ._config import OpenAiConfig, OpenAiEmbeddingConfig

__all__ = ["OpenAiCompatibleProvider", "openai_error_details", "openai_transport"]


def openai_error_details(body: JSONValue) -> ErrorDetails:
    """OpenAI's error body. A 429 whose code is ``insufficient_quota`` is not a rate limit:
    waiting does not help, so it is classified ``OTHER`` (not retryable)."""
    details = default_error_details(body)
    if details.code == "insufficient_quota" or details.error_type == "insufficient_quota":
        return attrs.evolve(details, error_class=ProviderErrorClass.OTHER)
    return details


def openai_transport(
    config: OpenAiConfig | OpenAiEmbeddingConfig,
    *,
    client: httpx2.AsyncClient | None,
    transport: httpx2.AsyncBaseTransport | None,
) -> tuple[HttpTransport, dict[str, str]]:
    """The transport of an OpenAI-compatible endpoint, and the headers for every request
    (sent per request, not as client defaults, so an injected client gets them too)."""
    http = HttpTransport(
        provider=PROVIDER,
        base_url=config.base_url,
        timeout=config.timeout,
        connect_timeout=config.connect_timeout,
        client=client,
        transport=transport,
        error_details=openai_error_details,
    )
    return http, {**config.extra_headers, **config.auth_headers()}


@attrs.define(init=False)
class OpenAiCompatibleProvider:
    """A :class:`~kova.providers.Provider` for OpenAI Chat Completions and compatible servers.

    Args:
        config: endpoint, model and defaults.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Use it inside ``async with provider.open():`` (an agent does this for you). Calls are safe
    from many tasks at once. On cancellation the HTTP request is abandoned and its
    connection closed.
    """

    config: OpenAiConfig
    _http: HttpTransport
    _headers: Mapping[str, str] = attrs.field(repr=False)
    _chat_path: str
    _models_path: str

    def __init__(
        self,
        config: OpenAiConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._http, self._headers = openai_transport(config, client=client, transport=transport)
        self._chat_path = endpoint_path(config.base_url, config.chat_completions_path)
        self._models_path = endpoint_path(config.base_url, config.models_path)

    @property
    def name(self) -> str:
        """``"openai"``."""
        return PROVIDER

    def open(self) -> AbstractAsyncContextManager[None]:
        """Hold the HTTP connection pool for the block (reference-counted)."""
        return self._http.open()

    async def chat_completion(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> ModelResponse:
        """One non-streaming call.

        Raises:
            ProviderError: an error status (classified) or an unreadable answer.
            KovaConnectionError, KovaTimeoutError: the transport failed.
        """
        body = encode_request(messages, tools, config, self.config, stream=False)
        data = await self._http.request_json(
            "POST",
            self._chat_path,
            json_body=body,
            params=self.config.query_params() or None,
            headers=self._headers,
        )
        return decode_response(data, keep_reasoning=self.config.echo_reasoning)

    @asynccontextmanager
    async def chat_completion_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> AsyncIterator[AsyncIterator[Sequence[StreamEvent]]]:
        """One streaming call: ``async with provider.chat_completion_stream(...) as batches``.

        Error statuses raise on entry. The iterator raises :class:`~kova.StreamError` for an
        ``error`` chunk, a connection cut mid-stream, or a stream without ``[DONE]`` /
        ``finish_reason``; :class:`~kova.KovaTimeoutError` when a read times out.
        """
        body = encode_request(messages, tools, config, self.config, stream=True)
        async with self._http.stream(
            "POST",
            self._chat_path,
            json_body=body,
            params=self.config.query_params() or None,
            headers=self._headers,
        ) as stream:
            decoder = OpenAiStreamDecoder(keep_reasoning=self.config.echo_reasoning)
            yield stream.iter_decoded(decoder.feed, decoder.finish)

    async def list_models(self) -> list[ModelInfo]:
        """``GET`` the models path.

        Raises:
            ProviderError, KovaConnectionError, KovaTimeoutError: as :meth:`chat_completion`.
        """
        data = await self._http.request_json(
            "GET",
            self._models_path,
            params=self.config.query_params() or None,
            headers=self._headers,
        )
        return decode_models(data)

    async def count_tokens(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> int:
        """The offline heuristic (Chat Completions has no counting endpoint)."""
        return heuristic_count_tokens(messages, tools)


if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from .._base import Provider

    _check: type[Provider] = OpenAiCompatibleProvider
