"""The Gemini provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._errors import ProviderError
from .._auth import header_auth
from .._http_provider import HttpProvider
from .._sse import SseEvent
from ._codec import GeminiCodec
from ._config import API_KEY_VARIABLES, GeminiConfig
from ._convert import PROVIDER

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    import httpx2

    from ..._models import ChatRequest, ModelInfo, ModelResponse
    from .._base import EventBatches

__all__ = ["GeminiProvider", "missing_key_error"]


def missing_key_error() -> ProviderError:
    """The error of a call made without any Gemini key."""
    return ProviderError.credential_failure(
        "no Gemini API key: pass GeminiConfig(api_key=...) or set "
        + " or ".join(API_KEY_VARIABLES),
        provider=PROVIDER,
    )


class GeminiProvider(HttpProvider[SseEvent]):
    """Google's Gemini API (``generateContent``) as a kova :class:`~kova.providers.Provider`.

    Args:
        config: model, credentials and request defaults.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an httpx2 transport for the client kova creates (tests). Pass at most one
            of ``client``/``transport``.

    The key travels as ``x-goog-api-key``. With none (no argument, no ``GEMINI_API_KEY``, no
    ``GOOGLE_API_KEY``) every call raises :class:`~kova.ProviderAuthError` before anything
    is sent.

    Use it inside ``async with provider.open():`` (an agent opens it for you). Calls are safe
    from many tasks at once.
    """

    def __init__(
        self,
        config: GeminiConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(config, GeminiConfig):
            raise TypeError(f"GeminiProvider takes a GeminiConfig, got {type(config).__name__}")
        self.config = config
        key = config.api_key
        super().__init__(
            GeminiCodec(config),
            base_url=config.base_url,
            auth=header_auth("x-goog-api-key", key) if key is not None else None,
            timeout=config.timeout,
            connect_timeout=config.connect_timeout,
            total_timeout=config.total_timeout,
            stream_timeout=config.stream_timeout,
            max_response_bytes=config.max_response_bytes,
            client=client,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"GeminiProvider({self.config!r})"

    def _require_key(self) -> None:
        if self.config.api_key is None:
            raise missing_key_error()

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """One ``:generateContent`` call (see :meth:`HttpProvider.chat_completion`)."""
        self._require_key()
        return await super().chat_completion(request)

    def chat_completion_stream(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One ``:streamGenerateContent?alt=sse`` call (see
        :meth:`HttpProvider.chat_completion_stream`)."""
        self._require_key()
        return super().chat_completion_stream(request)

    async def count_tokens(self, request: ChatRequest) -> int:
        """The exact prompt size from ``:countTokens``."""
        self._require_key()
        return await super().count_tokens(request)

    async def list_models(self) -> list[ModelInfo]:
        """Every model ``GET /models`` lists, following ``nextPageToken``."""
        self._require_key()
        return await super().list_models()


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = GeminiProvider
