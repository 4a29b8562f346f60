"""The Anthropic provider: the pure codec over the shared HTTP transport."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs

from ..._errors import KovaError, ProviderError, StreamError
from ..._models import ErrorEvent, StreamEvent
from .._http import HttpTransport
from .._sse import SseDecoder
from ._convert import (
    PROVIDER,
    decode_count_tokens,
    decode_model_page,
    decode_response,
    encode_count_tokens_request,
    encode_request,
    request_headers,
)
from ._stream import AnthropicStreamDecoder

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import httpx2

    from ..._models import (
        InferenceConfig,
        Message,
        ModelInfo,
        ModelResponse,
        ToolDefinition,
    )
    from .._base import EventBatches
    from ._config import AnthropicConfig

__all__ = ["AnthropicProvider"]


_CONNECT_TIMEOUT = 5.0  # the official SDK's connect timeout
_MODELS_PAGE_SIZE = 1000  # the API's maximum; most accounts fit in one page


class _TextDecoder:
    """SSE text in, batches of kova events out, in the shape ``HttpStream.iter_decoded``
    feeds: ``feed(text)`` per network read and ``finish()`` at the end of the body.

    An ``error`` event (or a body cut before ``message_stop``) is *deferred* when events came
    before it in the same read: they are delivered first and :class:`_Batches` raises the
    error on the next call, so a consumer sees everything the server sent.
    """

    __slots__ = ("_events", "_pending", "_sse")

    def __init__(self) -> None:
        self._sse = SseDecoder()
        self._events = AnthropicStreamDecoder()
        self._pending: StreamError | None = None

    def take_error(self) -> StreamError | None:
        error, self._pending = self._pending, None
        return error

    def feed(self, text: str) -> list[StreamEvent]:
        return self._deliver(self._events.feed(self._sse.feed(text)), None)

    def finish(self) -> list[StreamEvent]:
        batch = self._events.feed(self._sse.finish())
        incomplete: StreamError | None = None
        if not batch or not isinstance(batch[-1], ErrorEvent):
            try:
                self._events.check_complete()
            except StreamError as exc:
                incomplete = exc
        return self._deliver(batch, incomplete)

    def _deliver(self, batch: list[StreamEvent], error: StreamError | None) -> list[StreamEvent]:
        if batch and isinstance(last := batch[-1], ErrorEvent):
            batch.pop()
            error = StreamError(last.message, error_type=last.error_type or None)
        if error is not None:
            if not batch:
                raise error
            self._pending = error
        return batch


class _Batches(AsyncIterator[Sequence[StreamEvent]]):
    """The batches of one response; raises an error the decoder deferred (see
    :class:`_TextDecoder`). A plain class, so nothing is left for the GC to finalize."""

    __slots__ = ("_batches", "_decoder")

    def __init__(self, batches: AsyncIterator[list[StreamEvent]], decoder: _TextDecoder) -> None:
        self._batches = batches
        self._decoder = decoder

    async def __anext__(self) -> Sequence[StreamEvent]:
        error = self._decoder.take_error()
        if error is not None:
            raise error
        return await self._batches.__anext__()


@attrs.define(init=False)
class AnthropicProvider:
    """Anthropic's native Messages API as a kova :class:`~kova.providers.Provider`.

    Args:
        config: model, credentials and request defaults.
        client: a caller-owned ``httpx2.AsyncClient`` to send requests with (kova never
            closes it).
        transport: an httpx2 transport for the client kova creates (e.g.
            ``httpx2.MockTransport`` in tests). Pass at most one of ``client``/``transport``.

    Use it inside ``async with provider.open():`` (an agent opens it for you). Calls are safe
    from many tasks at once.
    """

    config: AnthropicConfig
    _api_key: str | None
    _http: HttpTransport

    def __init__(
        self,
        config: AnthropicConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._api_key = config.api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        self._http = HttpTransport(
            provider=PROVIDER,
            base_url=config.base_url,
            timeout=config.timeout,
            connect_timeout=min(_CONNECT_TIMEOUT, config.timeout),
            client=client,
            transport=transport,
        )

    @property
    def name(self) -> str:
        return PROVIDER

    def open(self) -> AbstractAsyncContextManager[None]:
        """Hold the HTTP connection pool for the block (reference-counted)."""
        return self._http.open()

    def _headers(self) -> dict[str, str]:
        if not self._api_key:
            raise ProviderError.credential_failure(
                "no Anthropic API key: set AnthropicConfig(api_key=...) or ANTHROPIC_API_KEY",
                provider=PROVIDER,
            )
        return request_headers(self.config, self._api_key)

    async def chat_completion(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> ModelResponse:
        """One ``POST /v1/messages`` call.

        Raises:
            ProviderError: an error status, classified (401/403 auth, 404 model, 429 with
                ``retry_after``, 5xx/529 overloaded), or an unreadable body.
            KovaConnectionError, KovaTimeoutError: the transport failed.

        On cancellation the request is abandoned and its connection closed.
        """
        headers = self._headers()
        body = encode_request(messages, tools, config, self.config, stream=False)
        data = await self._http.request_json(
            "POST", "/v1/messages", json_body=body, headers=headers
        )
        # No per-request log: structlog's default setup prints every event, which costs more
        # than the request's own client-side work (the provider actor logs what matters).
        return decode_response(data)

    @asynccontextmanager
    async def _stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> AsyncIterator[EventBatches]:
        headers = self._headers()
        headers["accept"] = "text/event-stream"
        body = encode_request(messages, tools, config, self.config, stream=True)
        async with self._http.stream(
            "POST", "/v1/messages", json_body=body, headers=headers
        ) as http_stream:
            content_type = http_stream.response.headers.get("content-type", "")
            if not content_type.startswith("text/event-stream"):
                raise ProviderError.invalid_response(
                    f"expected an event stream, got content-type {content_type!r}",
                    provider=PROVIDER,
                )
            decoder = _TextDecoder()
            yield _Batches(http_stream.iter_decoded(decoder.feed, decoder.finish), decoder)

    def chat_completion_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One streaming ``POST /v1/messages`` call::

            async with provider.chat_completion_stream(messages, tools, config) as batches:
                async for batch in batches:
                    ...

        HTTP errors raise when the block is entered. An ``error`` event mid-stream, or a
        connection cut before ``message_stop``, raises :class:`~kova.StreamError` from the
        iterator (after the events that arrived before it). Leaving the block early closes
        the response.
        """
        return self._stream(messages, tools, config)

    async def count_tokens(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> int:
        """The exact prompt size from ``POST /v1/messages/count_tokens`` (same system prompt,
        tools, messages and thinking settings as a real request).

        Raises:
            ProviderError, KovaConnectionError, KovaTimeoutError: as :meth:`chat_completion`.
        """
        headers = self._headers()
        body = encode_count_tokens_request(messages, tools, config, self.config)
        data = await self._http.request_json(
            "POST", "/v1/messages/count_tokens", json_body=body, headers=headers
        )
        return decode_count_tokens(data)

    async def list_models(self) -> list[ModelInfo]:
        """Every model ``GET /v1/models`` lists, following ``has_more``/``last_id`` pages.

        Raises:
            ProviderError, KovaConnectionError, KovaTimeoutError: as :meth:`chat_completion`.
        """
        headers = self._headers()
        models: list[ModelInfo] = []
        after: str | None = None
        seen: set[str] = set()
        while True:
            params = {"limit": str(_MODELS_PAGE_SIZE)}
            if after is not None:
                params["after_id"] = after
            data = await self._http.request_json(
                "GET", "/v1/models", params=params, headers=headers
            )
            page, after = decode_model_page(data)
            models.extend(page)
            if after is None:
                return models
            if after in seen:
                raise KovaError(f"anthropic: /v1/models pagination loops at {after!r}")
            seen.add(after)
