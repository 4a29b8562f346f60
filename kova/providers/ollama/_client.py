"""The Ollama provider: config + codec on the one HTTP provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._auth import bearer_auth
from .._http_provider import HttpProvider
from ._codec import OllamaCodec
from ._config import OllamaConfig

if TYPE_CHECKING:
    import httpx2

__all__ = ["OllamaProvider"]


class OllamaProvider(HttpProvider[str]):
    """An Ollama server's native chat API as a kova :class:`~kova.providers.Provider`.

    Args:
        config: server, model and request defaults.
        client: a caller-owned ``httpx2.AsyncClient`` (kova never closes it).
        transport: an httpx2 transport for the client kova creates (tests).

    No key is needed for a local server. Use it inside ``async with provider.open():`` (an
    agent opens it for you). Calls are safe from many tasks at once.
    """

    def __init__(
        self,
        config: OllamaConfig,
        *,
        client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(config, OllamaConfig):
            raise TypeError(f"OllamaProvider takes an OllamaConfig, got {type(config).__name__}")
        self.config = config
        super().__init__(
            OllamaCodec(config),
            base_url=config.base_url,
            auth=bearer_auth(config.api_key) if config.api_key is not None else None,
            client=client,
            transport=transport,
            **config.http_options(),
        )


if TYPE_CHECKING:
    from .._base import Provider

    _check: type[Provider] = OllamaProvider
