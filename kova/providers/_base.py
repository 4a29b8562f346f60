"""The provider protocol: what every model provider implements.

A provider is a configuration plus a pure codec plus resources (an HTTP connection pool) that
live between :meth:`Provider.open` entering and leaving. kova runs each provider inside a
*provider actor* (see :mod:`kova.agent`), which enters ``open()`` once and serves many
requests at once; a host may also use a provider directly::

    async with provider.open():
        response = await provider.chat_completion(ChatRequest.of("hello"))

Streams are async context managers that yield an async iterator of **batches**: every event
decoded from one network read arrives as one sequence. Batching is what keeps the cost of an
actor hop per read instead of per token (see DESIGN.md, "Performance facts").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._estimate import heuristic_count_tokens
from .._models import (
    ChatRequest,
    ModelInfo,
    ModelResponse,
    StreamEvent,
)

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

__all__ = [
    "EventBatches",
    "Provider",
    "count_tokens",
    "heuristic_count_tokens",
    "list_models",
]

EventBatches = AsyncIterator[Sequence[StreamEvent]]
"""What a provider stream yields: batches of events, in order."""


@runtime_checkable
class Provider(Protocol):
    """A model provider.

    Implementations must be safe to call from many tasks at once between entering and leaving
    :meth:`open`. They never write thinking into history except signed blocks that must be
    echoed back (Anthropic), and drop foreign ``Thinking`` blocks when they build a request.

    Two capabilities are optional, since not every provider has them: ``async def
    count_tokens(request) -> int`` (exact prompt tokens; Anthropic, Gemini and Bedrock ask
    an endpoint) and ``async def list_models() -> list[ModelInfo]``. Call them through
    :func:`count_tokens` and :func:`list_models`, which fall back to
    :func:`heuristic_count_tokens` and to ``NotImplementedError``.
    """

    @property
    def name(self) -> str:
        """A short label for logs and metrics, e.g. ``"openai"``."""
        ...

    def open(self) -> AbstractAsyncContextManager[None]:
        """Acquire the provider's resources (HTTP client, connection pool) for the block.

        Entering is reference-counted: nested or concurrent ``open()`` blocks share one pool,
        which is closed when the last one leaves.
        """
        ...

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """One non-streaming call.

        Raises:
            ProviderError: the provider answered with an error (classified).
            KovaConnectionError, KovaTimeoutError: the transport failed.

        On cancellation the HTTP request is abandoned and its connection closed.
        """
        ...

    def chat_completion_stream(
        self, request: ChatRequest
    ) -> AbstractAsyncContextManager[EventBatches]:
        """One streaming call: ``async with provider.chat_completion_stream(request) as b``.

        The request is sent when the block is entered (HTTP errors raise there); leaving the
        block early closes the response. An error event or a connection cut mid-stream raises
        :class:`~kova.StreamError` from the iterator, never a silently short answer.
        """
        ...


async def count_tokens(provider: object, request: ChatRequest) -> int:
    """Prompt tokens for ``request``: the provider's own ``count_tokens`` where it has one,
    else :func:`heuristic_count_tokens`."""
    counter = getattr(provider, "count_tokens", None)
    if counter is None:
        return heuristic_count_tokens(request.messages, request.tools)
    count: int = await counter(request)
    return count


async def list_models(provider: object) -> list[ModelInfo]:
    """The models ``provider`` offers.

    Raises:
        NotImplementedError: the provider cannot list its models.
    """
    lister = getattr(provider, "list_models", None)
    if lister is None:
        name = getattr(provider, "name", type(provider).__name__)
        raise NotImplementedError(f"provider {name!r} cannot list its models")
    models: list[ModelInfo] = await lister()
    return models
