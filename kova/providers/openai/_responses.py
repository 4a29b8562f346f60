"""The OpenAI Responses API provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..._errors import ProviderError
from ..._log import get_logger
from ..._record import Record, set_field
from .._auth import bearer_auth, header_auth
from .._codec import CodecBase, ModelPage, WireRequest
from .._framing import SseFramer
from .._http_provider import HttpProvider
from .._sse import SseEvent
from ._codec import STREAM_ACCEPT, openai_error_details
from ._config import endpoint_path
from ._convert import decode_models
from ._responses_convert import (
    PROVIDER,
    decode_input_tokens,
    decode_response,
    encode_count_request,
    encode_deferred_tools,
    encode_request,
    wants_encrypted_reasoning,
)
from ._responses_models import is_encrypted_refusal
from ._responses_stream import ResponsesStreamDecoder

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    import httpx2

    from ..._models import ChatRequest, JSONValue, ModelResponse
    from ..._secret import SecretHeaders
    from .._base import EventBatches
    from .._http import ErrorDetails
    from ._responses_config import OpenAiResponsesConfig

__all__ = ["OpenAiResponsesCodec", "OpenAiResponsesProvider"]

log = get_logger(__name__)


class OpenAiResponsesCodec(
    Record,
    CodecBase[SseEvent],
    eq_exclude=("stream_headers", "refused"),
    repr_exclude=("stream_headers", "refused"),
):
    """The Responses API (``POST /v1/responses``) over SSE."""

    config: OpenAiResponsesConfig
    stream_headers: SecretHeaders
    """The headers of a streamed call, worked out once (the config is frozen)."""
    refused: set[str]
    """The models that refused ``include: ["reasoning.encrypted_content"]`` (a 400): asked
    no more. Changed only between checkpoints, by the provider that owns this codec."""
    name: ClassVar[str] = PROVIDER
    framer: ClassVar[type[SseFramer]] = SseFramer
    stream_content_types: ClassVar[tuple[str, ...]] = ("text/event-stream",)

    def __init__(self, config: OpenAiResponsesConfig) -> None:
        set_field(self, "config", config)
        set_field(self, "stream_headers", config.extra_headers.merged(STREAM_ACCEPT))
        set_field(self, "refused", set())

    def _post(self, path: str, body: JSONValue, *, stream: bool = False) -> WireRequest:
        config = self.config
        return WireRequest(
            path=endpoint_path(config.base_url, path),
            query=config.query_params(),
            headers=self.stream_headers if stream else config.extra_headers,
            body=body,
        )

    def encode(self, request: ChatRequest, *, stream: bool) -> WireRequest:
        body = encode_request(
            request.messages,
            request.tools,
            request.config,
            self.config,
            stream=stream,
            refused=self.refused,
        )
        if request.deferred_tools:  # the hosted tool search
            tools = body.setdefault("tools", [])
            assert isinstance(tools, list)
            tools.extend(
                encode_deferred_tools(request.deferred_tools, strict=self.config.strict_tools)
            )
        compaction = request.compaction
        if compaction is not None and compaction.summarize:  # the server's own compaction
            body["context_management"] = [
                {"type": "compaction", "compact_threshold": compaction.trigger}
            ]
        return self._post(self.config.responses_path, body, stream=stream)

    def decode(self, body: JSONValue) -> ModelResponse:
        return decode_response(body, endpoint=self.config.base_url)

    def stream_decoder(self) -> ResponsesStreamDecoder:
        return ResponsesStreamDecoder(endpoint=self.config.base_url)

    def error_details(self, body: JSONValue) -> ErrorDetails:
        return openai_error_details(body)

    def encode_count_tokens(self, request: ChatRequest) -> WireRequest:
        body = encode_count_request(request.messages, request.tools, request.config, self.config)
        return self._post(self.config.input_tokens_path, body)

    def decode_count_tokens(self, body: JSONValue) -> int:
        return decode_input_tokens(body)

    def encode_list_models(self, cursor: str | None) -> WireRequest:
        config = self.config
        return WireRequest(
            method="GET",
            path=endpoint_path(config.base_url, config.models_path),
            query=config.query_params(),
            headers=config.extra_headers,
        )

    def decode_list_models(self, body: JSONValue) -> ModelPage:
        return ModelPage(models=decode_models(body))


def responses_auth(config: OpenAiResponsesConfig) -> httpx2.Auth | None:
    """Azure takes the key in ``api-key``, everyone else as a bearer token; no key, no
    header."""
    if config.api_key is None:
        return None
    if config.uses_api_key_header:
        return header_auth("api-key", config.api_key)
    return bearer_auth(config.api_key)


class OpenAiResponsesProvider(HttpProvider[SseEvent]):
    """A :class:`~kova.providers.Provider` for the OpenAI Responses API (OpenAI, Azure
    OpenAI, Responses-compatible servers).

    Args:
        config: endpoint, model and defaults.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Use it inside ``async with provider.open():`` (an agent does this for you).
    """

    def __init__(
        self,
        config: OpenAiResponsesConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        from ._responses_config import OpenAiResponsesConfig

        if not isinstance(config, OpenAiResponsesConfig):
            raise TypeError(
                f"OpenAiResponsesProvider takes an OpenAiResponsesConfig, got "
                f"{type(config).__name__}"
            )
        self.config = config
        super().__init__(
            OpenAiResponsesCodec(config),
            base_url=config.base_url,
            auth=responses_auth(config),
            client=client,
            transport=transport,
            **config.http_options(),
        )

    def _refused_encrypted(self, request: ChatRequest, error: ProviderError) -> bool:
        """Whether ``error`` is the API refusing ``reasoning.encrypted_content`` for a model
        kova asked it of by its own choice (not forced by ``encrypted_reasoning=True``): the
        model is remembered, and the caller sends the request once more without it."""
        config = self.config
        model = request.config.model or config.model
        codec: OpenAiResponsesCodec = self.codec  # type: ignore[assignment]
        if (
            config.encrypted_reasoning is not None
            or not wants_encrypted_reasoning(config, model, codec.refused)
            or not is_encrypted_refusal(error.status_code, error.message)
        ):
            return False
        codec.refused.add(model)
        log.info("openai_responses.encrypted_reasoning_refused", model=model)
        return True

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """One non-streaming call (see :meth:`HttpProvider.chat_completion`); sent once
        more without ``reasoning.encrypted_content`` if the model refuses it."""
        try:
            return await super().chat_completion(request)
        except ProviderError as exc:
            if not self._refused_encrypted(request, exc):
                raise
        return await super().chat_completion(request)

    def chat_completion_stream(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One streaming call (see :meth:`HttpProvider.chat_completion_stream`); opened
        once more without ``reasoning.encrypted_content`` if the model refuses it."""
        return _RefusalRetryingStream(self, request)


class _RefusalRetryingStream:
    """:meth:`OpenAiResponsesProvider.chat_completion_stream`: the refusal is an error
    status, raised on entering, before any event, so the stream is simply opened again."""

    __slots__ = ("_opened", "_provider", "_request")

    def __init__(self, provider: OpenAiResponsesProvider, request: ChatRequest) -> None:
        self._provider = provider
        self._request = request
        self._opened: AbstractAsyncContextManager[EventBatches] | None = None

    async def __aenter__(self) -> EventBatches:
        provider, request = self._provider, self._request
        opened = HttpProvider.chat_completion_stream(provider, request)
        try:
            batches = await opened.__aenter__()
        except ProviderError as exc:
            if not provider._refused_encrypted(request, exc):
                raise
            opened = HttpProvider.chat_completion_stream(provider, request)
            batches = await opened.__aenter__()
        self._opened = opened
        return batches

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        opened = self._opened
        assert opened is not None
        self._opened = None
        return await opened.__aexit__(exc_type, exc, traceback)


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = OpenAiResponsesProvider
