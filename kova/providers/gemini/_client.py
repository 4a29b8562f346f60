"""The Gemini provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._auth import header_auth
from .._keyed import KeyedHttpProvider
from .._sse import SseEvent
from ._codec import GeminiCodec
from ._config import GeminiConfig

if TYPE_CHECKING:
    import httpx2

__all__ = ["GeminiProvider"]


class GeminiProvider(KeyedHttpProvider[SseEvent]):
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

    config: GeminiConfig

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
            client=client,
            transport=transport,
            **config.http_options(),
        )


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = GeminiProvider
