"""The Gemini provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._errors import ProviderError
from .._auth import header_auth
from .._keyed import KeyedHttpProvider
from .._sse import SseEvent
from ._codec import GeminiCodec
from ._config import API_KEY_VARIABLES, GeminiConfig
from ._convert import PROVIDER

if TYPE_CHECKING:
    import httpx2

__all__ = ["GeminiProvider", "missing_key_error"]


def missing_key_error() -> ProviderError:
    """The error of a call made without any Gemini key."""
    return ProviderError.credential_failure(
        "no Gemini API key: pass GeminiConfig(api_key=...) or set "
        + " or ".join(API_KEY_VARIABLES),
        provider=PROVIDER,
    )


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

    def _missing_key(self) -> ProviderError | None:
        return missing_key_error() if self.config.api_key is None else None


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = GeminiProvider
