"""The Anthropic provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._auth import bearer_auth, header_auth
from .._keyed import KeyedHttpProvider
from .._sse import SseEvent
from ._codec import AnthropicCodec

if TYPE_CHECKING:
    import httpx2

    from ._config import AnthropicConfig

__all__ = ["AnthropicProvider"]


class AnthropicProvider(KeyedHttpProvider[SseEvent]):
    """Anthropic's native Messages API as a kova :class:`~kova.providers.Provider`.

    Args:
        config: model, credentials and request defaults.
        client: a caller-owned ``httpx2.AsyncClient`` to send requests with (kova never
            closes it).
        transport: an httpx2 transport for the client kova creates (e.g.
            ``httpx2.MockTransport`` in tests). Pass at most one of ``client``/``transport``.

    The key comes from ``config.api_key``, else ``ANTHROPIC_API_KEY`` (read when the config is
    built); API versions from ``2026-10-21`` on take it as ``Authorization: Bearer`` (what the
    official SDK sends), older pinned versions as ``x-api-key``. With no key at all, every
    call raises :class:`~kova.ProviderAuthError` before anything is sent.

    Use it inside ``async with provider.open():`` (an agent opens it for you). Calls are safe
    from many tasks at once.
    """

    config: AnthropicConfig

    def __init__(
        self,
        config: AnthropicConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        key = config.api_key
        auth: httpx2.Auth | None = None
        if key is not None:
            auth = bearer_auth(key) if config.bearer_auth else header_auth("x-api-key", key)
        super().__init__(
            AnthropicCodec(config),
            base_url=config.base_url,
            auth=auth,
            client=client,
            transport=transport,
            **config.http_options(),
        )


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = AnthropicProvider
