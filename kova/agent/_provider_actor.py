"""The provider actor: one supervised actor per provider instance.

It holds the provider's resources (``provider.open()``: the HTTP client and its connection
pool) for as long as it runs, serves many requests at once, optionally caps how many are in
flight, and coordinates rate limits: after a 429 carrying ``retry_after``, no request is sent
until that time has passed, so many agents sharing one provider back off together instead of
stampeding the moment their own timers fire.

Others reach it through a :class:`ProviderRef`, which implements the
:class:`~kova.providers.Provider` protocol itself, so code written against a provider (the
agent loop) takes either.

Streams are *leased*, not relayed. A ``ProviderRef`` stream asks the actor for a lease
(:class:`LeaseStream`): the actor waits out any rate-limit pause, takes an in-flight slot and
hands back its open provider; the caller's task then reads the HTTP response itself, and
leaving the stream returns the slot. Relaying every batch through the actor
(:class:`StreamChatCompletion`, still served for callers that want it) costs a task switch per
network read: measured at +11.7 us on a 11.5 us event (``bench/breakdown.py``), twice the
floor, because a token stream delivers about one event per read. A lease costs one message
per stream, and cancellation is as direct as it gets: the read happens in the caller's own
cancel scope. The actor still owns the connection pool's lifetime (a stop waits, within its
grace period, for leases to be returned), the in-flight cap and the rate-limit gate.
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast

import attrs
import trio

from .._errors import ActorError, MailboxClosed, RateLimited
from .._log import get_logger
from ..actors import Actor, ActorRef

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from .._models import (
        InferenceConfig,
        Message,
        ModelInfo,
        ModelResponse,
        ToolDefinition,
    )
    from ..actors import RestartType, Runtime
    from ..providers import EventBatches, Provider

__all__ = [
    "ChatCompletion",
    "CountTokens",
    "LeaseStream",
    "ListModels",
    "ProviderActor",
    "ProviderMessage",
    "ProviderRef",
    "RateLimitObserved",
    "StreamChatCompletion",
    "spawn_provider",
]

log = get_logger(__name__)


@attrs.frozen(kw_only=True)
class ChatCompletion:
    """Call: one non-streaming completion; replies with a :class:`~kova.ModelResponse`."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig


@attrs.frozen(kw_only=True)
class StreamChatCompletion:
    """Stream: one streaming completion; the items are batches of stream events."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig


@attrs.frozen(kw_only=True)
class LeaseStream:
    """Stream: lend the open provider for one streaming completion.

    The single item is the provider, sent once the rate-limit pause (if any) has passed and an
    in-flight slot is free. The slot is held until the consumer leaves the stream.
    """


@attrs.frozen(kw_only=True)
class RateLimitObserved:
    """Cast: a leased stream was rate limited; pause new requests for ``retry_after`` s."""

    retry_after: float


@attrs.frozen(kw_only=True)
class CountTokens:
    """Call: prompt tokens for a request; replies with an ``int``."""

    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    config: InferenceConfig


@attrs.frozen(kw_only=True)
class ListModels:
    """Call: the provider's models; replies with a ``list[ModelInfo]``."""


ProviderMessage: TypeAlias = (
    ChatCompletion
    | StreamChatCompletion
    | LeaseStream
    | RateLimitObserved
    | CountTokens
    | ListModels
)


class ProviderActor(Actor):
    """Serves one provider to many callers.

    Args:
        provider: any :class:`~kova.providers.Provider`; its ``open()`` is entered for the
            actor's lifetime (a restart reopens it).
        max_in_flight: at most this many completions (streams included, for their whole
            duration) run at once; further requests wait their turn. ``None``: no cap.
    """

    concurrent: ClassVar[bool] = True

    def __init__(self, provider: Provider, *, max_in_flight: int | None = None) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.provider = provider
        self._limiter = trio.CapacityLimiter(max_in_flight) if max_in_flight else None
        self._paused_until = -math.inf

    @property
    def paused_until(self) -> float:
        """The trio time before which no completion is sent (``-inf`` if none)."""
        return self._paused_until

    def resources(self) -> AbstractAsyncContextManager[None]:
        return self.provider.open()

    async def handle_call(self, message: Any) -> Any:
        match message:
            case ChatCompletion(messages=messages, tools=tools, config=config):
                async with self._request_slot():
                    return await self.provider.chat_completion(messages, tools, config)
            case CountTokens(messages=messages, tools=tools, config=config):
                return await self.provider.count_tokens(messages, tools, config)
            case ListModels():
                return await self.provider.list_models()
            case _:
                raise ActorError(f"provider actor cannot handle {type(message).__name__}")

    async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
        match message:
            case StreamChatCompletion(messages=messages, tools=tools, config=config):
                async with (
                    self._request_slot(),
                    self.provider.chat_completion_stream(messages, tools, config) as batches,
                ):
                    async for batch in batches:
                        await send.send(batch)
            case LeaseStream():
                async with self._limiter if self._limiter is not None else nullcontext():
                    await self._wait_until_unpaused()
                    await send.send(self.provider)
                    # Hold the slot until the consumer leaves (which cancels us).
                    await trio.sleep_forever()
            case _:
                raise ActorError(f"provider actor cannot stream {type(message).__name__}")

    async def handle_cast(self, message: Any) -> None:
        match message:
            case RateLimitObserved(retry_after=retry_after):
                self._pause(retry_after)
            case _:
                raise ActorError(f"provider actor cannot handle {type(message).__name__}")

    async def _wait_until_unpaused(self) -> None:
        # Re-check after every wake-up: another request may have pushed the pause further
        # while we slept. (A deadline, not a condition another task signals, so an Event
        # would not help.)
        while (until := self._paused_until) > trio.current_time():  # noqa: ASYNC110
            await trio.sleep_until(until)

    @asynccontextmanager
    async def _request_slot(self) -> AsyncIterator[None]:
        async with self._limiter if self._limiter is not None else nullcontext():
            await self._wait_until_unpaused()
            try:
                yield
            except RateLimited as exc:
                if exc.retry_after is not None:
                    self._pause(exc.retry_after)
                raise

    def _pause(self, retry_after: float) -> None:
        until = trio.current_time() + retry_after
        if until > self._paused_until:
            self._paused_until = until
            log.info(
                "provider.rate_limit.paused",
                provider=self.provider.name,
                actor=self.name,
                retry_after=retry_after,
            )


@attrs.frozen(kw_only=True)
class ProviderRef:
    """A :class:`~kova.providers.Provider` that forwards every request to a provider actor.

    Cancellation crosses over: cancelling a call cancels the HTTP request in the actor before
    the call returns; leaving a stream early stops the HTTP read under it.
    """

    ref: ActorRef
    """The provider actor."""
    provider_name: str
    stream_buffer: int = 8
    """Batches buffered between the actor and the consumer of a stream."""
    runtime: Runtime | None = None
    """Where the actor runs (used by :meth:`stop`)."""

    @property
    def name(self) -> str:
        return self.provider_name

    def open(self) -> AbstractAsyncContextManager[None]:
        """Nothing to acquire: the actor holds the provider open."""
        return nullcontext()

    async def chat_completion(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> ModelResponse:
        """See :meth:`kova.providers.Provider.chat_completion`.

        Raises:
            MailboxClosed: the provider actor is stopped.
            ActorFailed: the provider actor crashed during the call.
        """
        request = ChatCompletion(messages=tuple(messages), tools=tuple(tools), config=config)
        return cast("ModelResponse", await self.ref.call(request))

    @asynccontextmanager
    async def chat_completion_stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> AsyncIterator[EventBatches]:
        """See :meth:`kova.providers.Provider.chat_completion_stream`.

        The stream is leased (see the module docstring): the actor admits it (rate-limit
        pause, in-flight cap) and this task reads the response. Errors the provider raises
        when the request is sent (HTTP status errors, a rate limit) raise on entering.

        Raises:
            MailboxClosed: the provider actor is stopped.
        """
        async with self.ref.stream(LeaseStream(), buffer=1) as lease:
            try:
                provider: Provider = await lease.receive()
            except trio.EndOfChannel:
                raise MailboxClosed(self.ref.name) from None
            try:
                async with provider.chat_completion_stream(messages, tools, config) as batches:
                    yield batches
            except RateLimited as exc:
                if exc.retry_after is not None:
                    self._report_rate_limit(exc.retry_after)
                raise

    def _report_rate_limit(self, retry_after: float) -> None:
        # A full mailbox means the actor is busy, not gone: this request still raises its
        # RateLimited, and the next 429 pauses the others.
        with suppress(trio.WouldBlock, MailboxClosed):
            self.ref.cast(RateLimitObserved(retry_after=retry_after))

    async def list_models(self) -> list[ModelInfo]:
        return cast("list[ModelInfo]", await self.ref.call(ListModels()))

    async def count_tokens(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
    ) -> int:
        request = CountTokens(messages=tuple(messages), tools=tuple(tools), config=config)
        return cast("int", await self.ref.call(request))

    async def stop(self) -> None:
        """Stop the provider actor (orderly: queued and in-flight requests finish first,
        within the grace period). Does nothing without a :attr:`runtime`."""
        if self.runtime is not None:
            await self.runtime.stop(self.ref)


async def spawn_provider(
    runtime: Runtime,
    provider: Provider,
    *,
    name: str | None = None,
    max_in_flight: int | None = None,
    mailbox_size: int | None = None,
    stream_buffer: int = 8,
    restart: RestartType | None = None,
) -> ProviderRef:
    """Start a :class:`ProviderActor` for ``provider`` under ``runtime``.

    Returns once the provider is open.

    Args:
        runtime: where the actor runs (see :func:`kova.actors.open_runtime`).
        provider: the provider to serve.
        name: the actor's name; by default ``provider.<provider name>``, made unique.
        max_in_flight: cap on concurrent completions (``None``: no cap).
        mailbox_size: the actor's mailbox size (default 16).
        stream_buffer: batches buffered per stream.
        restart: the child restart type (default ``"permanent"``).
    """

    def factory() -> ProviderActor:
        return ProviderActor(provider, max_in_flight=max_in_flight)

    # The supervisor names unnamed children after the factory, adding -2, -3 ... if taken.
    factory.__name__ = f"provider.{provider.name}"
    ref = await runtime.spawn(factory, name=name, mailbox_size=mailbox_size, restart=restart)
    return ProviderRef(
        ref=ref, provider_name=provider.name, stream_buffer=stream_buffer, runtime=runtime
    )
