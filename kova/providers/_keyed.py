"""An HTTP provider whose every call needs a key (Anthropic, Gemini) or other credentials
(Bedrock's AWS credentials, which override :meth:`KeyedHttpProvider._require_key`).

Without a key, each call fails with the config's credential error (which names where the key
comes from, :meth:`~kova.providers._settings.HttpSettings.missing_key_error`) before anything
is sent, instead of the API's 401 after a round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._http_provider import FrameT, HttpProvider

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from contextlib import AbstractAsyncContextManager

    from .._models import ChatRequest, ModelInfo, ModelResponse
    from ._base import EventBatches
    from ._settings import HttpSettings

__all__ = ["KeyedHttpProvider"]


class KeyedHttpProvider(HttpProvider[FrameT]):
    """:class:`HttpProvider` whose four calls first check that its config has a key."""

    config: HttpSettings

    def _require_key(self) -> None:
        """Before every call: raise the credential error when there is nothing to sign with."""
        if self.config.api_key is None:
            raise self.config.missing_key_error(self.name)

    def chat_completion(self, request: ChatRequest) -> Coroutine[Any, Any, ModelResponse]:
        """One call (see :meth:`HttpProvider.chat_completion`); without a key,
        :class:`~kova.ProviderAuthError` before anything is sent.

        A plain method returning the call's coroutine (the key is checked when it is
        called): no coroutine frame of its own for every await of the call."""
        self._require_key()
        return super().chat_completion(request)

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
