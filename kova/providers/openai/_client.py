"""The OpenAI-compatible chat provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._http_provider import HttpProvider
from .._sse import SseEvent
from ._codec import OpenAiCodec
from ._config import openai_auth

if TYPE_CHECKING:
    import httpx2

    from ._config import OpenAiConfig

__all__ = ["OpenAiCompatibleProvider"]


class OpenAiCompatibleProvider(HttpProvider[SseEvent]):
    """A :class:`~kova.providers.Provider` for OpenAI Chat Completions and compatible servers.

    Args:
        config: endpoint, model and defaults.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an ``httpx2`` transport for the client kova creates (tests).

    Use it inside ``async with provider.open():`` (an agent does this for you). Calls are safe
    from many tasks at once. On cancellation the HTTP request is abandoned and its
    connection closed.
    """

    def __init__(
        self,
        config: OpenAiConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        super().__init__(
            OpenAiCodec(config),
            base_url=config.base_url,
            auth=openai_auth(config),
            client=client,
            transport=transport,
            **config.http_options(),
        )


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = OpenAiCompatibleProvider
