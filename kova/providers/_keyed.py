"""An HTTP provider whose every call needs a key (Anthropic, Gemini).

Without a key, each call fails with the provider's own credential error (which names where
the key comes from) before anything is sent, instead of the API's 401 after a round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._http_provider import FrameT, HttpProvider

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from .._errors import ProviderError
    from .._models import ChatRequest, ModelInfo, ModelResponse
    from ._base import EventBatches

__all__ = ["KeyedHttpProvider"]


class KeyedHttpProvider(HttpProvider[FrameT]):
    """:class:`HttpProvider` whose four calls first check :meth:`_missing_key`."""

    def _missing_key(self) -> ProviderError | None:
        """The error every call raises when no key is configured, else ``None``."""
        raise NotImplementedError

    def _require_key(self) -> None:
        error = self._missing_key()
        if error is not None:
            raise error

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """One call (see :meth:`HttpProvider.chat_completion`); without a key,
        :class:`~kova.ProviderAuthError` before anything is sent."""
        self._require_key()
        return await super().chat_completion(request)

    def chat_completion_stream(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One streamed call (see :meth:`HttpProvider.chat_completion_stream`); without a
        key, :class:`~kova.ProviderAuthError` before anything is sent."""
        self._require_key()
        return super().chat_completion_stream(request)

    async def count_tokens(self, request: ChatRequest) -> int:
        """The exact prompt size from the provider's counting endpoint (see
        :meth:`HttpProvider.count_tokens`)."""
        self._require_key()
        return await super().count_tokens(request)

    async def list_models(self) -> list[ModelInfo]:
        """Every model the provider lists, all pages (see :meth:`HttpProvider.list_models`)."""
        self._require_key()
        return await super().list_models()
