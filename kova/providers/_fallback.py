"""Fallback providers: one model provider, and others to ask when it fails.

::

    provider = FallbackProvider(
        AnthropicProvider(AnthropicConfig(model="claude-sonnet-4-6")),
        OpenAiCompatibleProvider(OpenAiConfig(model="gpt-5.1")),
    )
    agent = AgentBuilder().provider(provider).build()

Run by an agent (or :func:`kova.agent.spawn_provider`), every provider gets its own provider
actor, with its own connection pool, in-flight cap, rate-limit gate and retries; a request
goes to the first provider, and to the next one when it fails with an error ``on`` matches
(by default: a retryable error once that provider's retries are spent, and
:class:`~kova.ModelNotFound`). A provider whose rate-limit gate is closed is skipped while a
later one is open. A stream falls back only before its first content reached the consumer:
an answer is never replayed from another model. ``ModelResponse.model`` says which model
answered, and the turn's telemetry has a ``ModelCallFallback`` event each time a call moves
on.

Used directly (``async with provider.open():``), it walks the same order without actors:
no retries, no gates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from .._errors import KovaError, ModelNotFound, ProviderError, ProviderErrorClass
from .._models import UsageEvent
from ._base import Provider, count_tokens, list_models

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from .._models import ChatRequest, ModelInfo, ModelResponse, StreamEvent
    from ._base import EventBatches

__all__ = [
    "FallbackOn",
    "FallbackProvider",
    "PrefixedBatches",
    "first_content",
    "retryable_or_not_found",
]

FallbackOn = Callable[[BaseException], bool]
"""Whether a provider's failure hands the request to the next provider."""


def retryable_or_not_found(error: BaseException) -> bool:
    """The default ``on``: a retryable error (rate limit, overload, connection, timeout),
    which reaches the fallback only once the provider's own retries are spent, or
    :class:`~kova.ModelNotFound` (a model that provider does not serve)."""
    return isinstance(error, KovaError) and (error.is_retryable or isinstance(error, ModelNotFound))


def _matcher(on: object) -> FallbackOn:
    if on is None:
        return retryable_or_not_found
    if callable(on) and not isinstance(on, type):
        return on
    if isinstance(on, type | ProviderErrorClass):
        on = (on,)
    if not isinstance(on, Iterable) or isinstance(on, str):
        raise TypeError(
            "on must be a function of the error, or exception classes and "
            f"ProviderErrorClass values, got {on!r}"
        )
    classes: list[type[BaseException]] = []
    kinds: set[ProviderErrorClass] = set()
    for item in on:
        if isinstance(item, ProviderErrorClass):
            kinds.add(item)
        elif isinstance(item, type) and issubclass(item, BaseException):
            classes.append(item)
        else:
            raise TypeError(
                f"on takes exception classes and ProviderErrorClass values, got {item!r}"
            )
    as_tuple = tuple(classes)

    def matches(error: BaseException) -> bool:
        if isinstance(error, as_tuple):
            return True
        return isinstance(error, ProviderError) and error.error_class in kinds

    return matches


class FallbackProvider:
    """Providers tried in order: ``primary``, then each of ``fallbacks``.

    Args:
        primary: the provider asked first.
        fallbacks: the providers asked next, in order, when the one before failed.
        on: which failures fall back: a function of the error, or exception classes and
            :class:`~kova.ProviderErrorClass` values (``(ProviderOverloaded,
            ProviderErrorClass.NOT_FOUND)``). Default: :func:`retryable_or_not_found`. The
            last provider's failure is the request's.

    Raises:
        TypeError: a member is not a provider, or ``on`` is not one of the forms above.
    """

    __slots__ = ("_on", "providers")

    def __init__(self, primary: Provider, *fallbacks: Provider, on: object = None) -> None:
        providers = (primary, *fallbacks)
        for index, provider in enumerate(providers):
            if not isinstance(provider, Provider):
                raise TypeError(
                    f"FallbackProvider takes providers; argument {index} is a "
                    f"{type(provider).__name__}"
                )
            if isinstance(provider, FallbackProvider):
                raise TypeError("a FallbackProvider cannot contain another: list its providers")
        if not fallbacks:
            raise TypeError("FallbackProvider needs at least one fallback after the primary")
        self.providers: tuple[Provider, ...] = providers
        """The providers, in the order they are asked."""
        self._on = _matcher(on)

    def __repr__(self) -> str:
        return f"FallbackProvider({', '.join(p.name for p in self.providers)})"

    @property
    def name(self) -> str:
        """``fallback(<names in order>)``, e.g. ``fallback(anthropic, openai)``."""
        return f"fallback({', '.join(p.name for p in self.providers)})"

    @property
    def model(self) -> str | None:
        """The primary provider's default model, where it says."""
        primary = self.providers[0]
        for owner in (primary, getattr(primary, "config", None)):
            model = getattr(owner, "model", None)
            if isinstance(model, str):
                return model
        return None

    def falls_back(self, error: BaseException) -> bool:
        """Whether ``error`` from one provider hands the request to the next."""
        return self._on(error)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Opens every provider for the block."""
        async with AsyncExitStack() as stack:
            for provider in self.providers:
                await stack.enter_async_context(provider.open())
            yield

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """The first provider's answer, or the next one's when it fails with an error
        ``on`` matches."""
        last = len(self.providers) - 1
        for index, provider in enumerate(self.providers):
            try:
                return await provider.chat_completion(request)
            except Exception as exc:
                if index == last or not self._on(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """The first provider's stream, or the next one's when it fails before its first
        content with an error ``on`` matches; never after content."""
        last = len(self.providers) - 1
        for index, provider in enumerate(self.providers):
            content = False
            try:
                async with provider.chat_completion_stream(request) as batches:
                    first = await first_content(batches)
                    content = True
                    yield PrefixedBatches(first, batches)
                    return
            except Exception as exc:
                if content or index == last or not self._on(exc):
                    raise

    async def count_tokens(self, request: ChatRequest) -> int:
        """The primary provider's count."""
        return await count_tokens(self.providers[0], request)

    async def list_models(self) -> list[ModelInfo]:
        """The primary provider's models."""
        return await list_models(self.providers[0])


async def first_content(batches: EventBatches) -> tuple[StreamEvent, ...]:
    """Read until a batch with content (anything but usage); usage-only batches before it
    are kept. An error before any content raises here, where the request can still be
    retried or handed to another provider."""
    head: list[StreamEvent] = []
    async for batch in batches:
        head.extend(batch)
        if any(type(event) is not UsageEvent for event in batch):
            break
    return tuple(head)


class PrefixedBatches:
    """A stream's batches after its first content was read: ``first``, then the rest."""

    __slots__ = ("_first", "_rest")

    def __init__(self, first: Sequence[StreamEvent], rest: EventBatches) -> None:
        self._first: Sequence[StreamEvent] | None = first or None
        self._rest = rest

    def __aiter__(self) -> PrefixedBatches:
        return self

    async def __anext__(self) -> Sequence[StreamEvent]:
        first = self._first
        if first is not None:
            self._first = None
            return first
        return await self._rest.__anext__()
