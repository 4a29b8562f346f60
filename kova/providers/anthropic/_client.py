"""The Anthropic provider: the pure codec over the shared HTTP transport."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import httpx2
import structlog
import trio

from ..._errors import KovaError, KovaTimeoutError, ProviderError, StreamError
from ..._models import ErrorEvent, StreamEvent
from .._http import HttpTransport, map_errors
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

log = structlog.get_logger(__name__)

_CONNECT_TIMEOUT = 5.0  # the official SDK's connect timeout
_MODELS_PAGE_SIZE = 1000
_DRAIN_LIMIT = 65_536
_DRAIN_SECONDS = 1.0  # the API's maximum; most accounts fit in one page


class _Batches(AsyncIterator[Sequence[StreamEvent]]):
    """Batches of kova events, one per network read.

    A plain class rather than an async generator: nothing is left for the garbage collector
    to finalize when the consumer stops early (trio forbids yielding inside the cancel scopes
    an async generator would need).
    """

    __slots__ = ("_chunks", "_closed", "_decoder", "_error", "_sse")

    def __init__(self, chunks: AsyncIterator[str]) -> None:
        self._chunks = chunks
        self._sse = SseDecoder()
        self._decoder = AnthropicStreamDecoder()
        self._error: StreamError | None = None
        self._closed = False

    async def __anext__(self) -> Sequence[StreamEvent]:
        while True:
            if self._error is not None:
                error, self._error = self._error, None
                self._closed = True
                raise error
            if self._closed:
                raise StopAsyncIteration
            if self._decoder.finished:
                self._closed = True
                await self._drain()
                raise StopAsyncIteration
            end_of_body = False
            try:
                with map_errors(PROVIDER, mid_stream=True):
                    chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                end_of_body = True
                events = self._sse.finish()
            else:
                events = self._sse.feed(chunk)
            batch = self._decoder.feed(events)
            last = batch[-1] if batch else None
            if isinstance(last, ErrorEvent):
                # Deliver what arrived before the error event; the next call raises it.
                batch.pop()
                self._error = StreamError(last.message, error_type=last.error_type or None)
            elif end_of_body:
                self._closed = True
                try:
                    self._decoder.check_complete()
                except StreamError as exc:
                    self._error = exc
            if batch:
                return batch

    async def _drain(self) -> None:
        """Read the (normally empty) rest of the body after ``message_stop``, so the
        connection goes back to the pool instead of being closed with bytes unread."""
        ignored = 0
        # The answer is complete: a server that is slow to end the body, or drops the
        # connection now, costs the connection, not the answer.
        with trio.move_on_after(_DRAIN_SECONDS):
            try:
                with map_errors(PROVIDER, mid_stream=True):
                    async for chunk in self._chunks:
                        ignored += len(chunk)
                        if ignored > _DRAIN_LIMIT:
                            return  # leaving the block closes the connection instead
            except (StreamError, KovaTimeoutError):
                log.debug("provider.stream.drain_failed", provider=PROVIDER)


async def _close_body(response: httpx2.Response, chunks: AsyncIterator[str]) -> None:
    """Close a streamed body that may not have been read to the end.

    httpx2's body iterators are nested async generators. When a consumer stops early, closing
    the outermost one leaves the inner ones suspended, and trio warns when the garbage
    collector finds them. Closing the response first and then resuming the iterator makes
    every level finish (each sees the closed stream), so nothing is left to the collector.
    """
    with trio.CancelScope(shield=True), trio.move_on_after(5):
        await response.aclose()
        try:
            async for _ in chunks:
                pass
        except (httpx2.HTTPError, httpx2.StreamError):
            pass


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
        response = decode_response(data)
        log.debug(
            "provider.response.received",
            provider=PROVIDER,
            model=body["model"],
            stop_reason=str(response.stop_reason),
        )
        return response

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
            response = http_stream.response
            chunks = response.aiter_text()
            try:
                yield _Batches(chunks)
            finally:
                await _close_body(response, chunks)

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
