"""The provider actor: one supervised actor per provider instance.

It owns the provider's resources (``provider.open()``: the HTTP client and its connection
pool) for as long as it runs and serves many requests at once. Around the provider it
composes the policies every request kind passes, in this order:

1. **concurrency cap** -- at most ``max_in_flight`` requests (a stream counts for its whole
   life);
2. **rate-limit gate** -- after a rate limit carrying ``retry_after`` (an HTTP 429 or a
   rate-limit error event inside a stream), no request of any kind is sent until that time has
   passed, so many agents sharing one provider back off together instead of stampeding;
3. **retries** -- one implementation for chat, streams, token counts and model lists: only
   retryable errors (:attr:`~kova.KovaError.is_retryable`), with the request's
   :class:`~kova.agent.RetryConfig`; the provider's ``retry_after`` wins over the backoff. A
   stream is retried only while none of its content has reached the consumer (no replay).

All of that state -- the limiter, the gate, the provider and its pool -- belongs to the actor.

**Streams are leased.** For a stream the actor opens the HTTP response in its own task, reads
until the first batch with content (retrying errors that come before it, an overload error
event included), and then hands the caller a :class:`StreamLease`: that first batch and the
iterator of *that one response's* remaining batches. The caller's task reads the rest itself,
so the hot path has no actor hop per network read (relaying every batch through the actor
measured +11.7 us on an 11.5 us event, ``bench/breakdown.py``). What a lease may touch: only
its own response's batch iterator, from one task, until it leaves the stream. It never sees
the provider, the transport, the pool, the limiter or the gate; leaving the stream (or
cancelling the caller) cancels the actor-side request, which closes the response and frees
the in-flight slot.

**Calls are leased too, when they can be admitted at once.** A non-streaming completion asks
the actor for admission (:class:`LeaseCall`), answered in the actor's own task without a task
of its own (:meth:`~kova.actors.Actor.handle_now`): with no concurrency cap and the gate open,
the reply is a :class:`CallLease`, the one attempt to run, and the caller's task sends the
HTTP request itself. A failed attempt goes back to the actor (:class:`AttemptFailed`), which
records it, pauses the gate on a rate limit and decides, with the request's retry policy,
whether and when to try again; an unexpected exception (a provider bug) is handed to the
actor (:class:`AttemptCrashed`), which crashes and restarts as if it had raised there. With a
cap, or while the gate is closed, the actor serves the whole call in a task of its own as
before (:class:`ChatCompletion`). The actor's stop waits for leased calls still running, as it
waits for its own in-flight requests. Measured: the actor round trip of a call went from a
task per request (about 80 us of CPU) to an answer from the actor's own loop.

Others reach the actor through a :class:`~kova.agent.ProviderRef` (``_provider_ref``: the
caller side of leases and the :func:`~kova.agent.spawn_provider` that starts this actor),
which implements the :class:`~kova.providers.Provider` protocol itself, so code written
against a provider (the agent loop) takes either. The messages and leases are in
``_provider_messages``.
"""

from __future__ import annotations

import math
import weakref
from contextlib import asynccontextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from .._errors import KovaError, ProviderError, RateLimited
from .._log import get_logger
from .._models import UsageEvent
from ..actors import LATER, Actor, UnknownMessage
from ._provider_messages import (
    AttemptCrashed,
    AttemptFailed,
    CallLease,
    ChatCompletion,
    CountTokens,
    LeaseCall,
    LeaseStream,
    ListModels,
    OpenStream,
    RateLimitObserved,
    StreamGrant,
    StreamLease,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractAsyncContextManager

    from .._models import ChatRequest, StreamEvent
    from ..providers import EventBatches, Provider
    from ._provider_messages import ErrorHook, RetryHook, _Admission
    from ._retry import RetryConfig

__all__ = ["ProviderActor"]

log = get_logger(__name__)


class ProviderActor(Actor):
    """Serves one provider to many callers.

    Args:
        provider: any :class:`~kova.providers.Provider`; its ``open()`` is entered for the
            actor's lifetime (a restart reopens it).
        max_in_flight: at most this many requests (streams included, for their whole
            duration) run at once; further requests wait their turn. ``None``: no cap.
    """

    concurrent: ClassVar[bool] = True

    def __init__(self, provider: Provider, *, max_in_flight: int | None = None) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self._provider = provider
        self._limiter = trio.CapacityLimiter(max_in_flight) if max_in_flight else None
        self._paused_until = -math.inf
        self._leases: weakref.WeakSet[_Admission] = weakref.WeakSet()

    @property
    def paused_until(self) -> float:
        """The trio time before which no request is sent (``-inf`` if none)."""
        return self._paused_until

    def resources(self) -> AbstractAsyncContextManager[None]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[None]:
        async with self._provider.open():
            yield
            # An orderly stop: calls leased out are in flight like the actor's own requests,
            # and finish on the provider before it closes (a crash does not wait for them).
            state = self._kova_state
            if state is None or state.crash is None:
                for lease in list(self._leases):
                    if lease.running:
                        await lease.done.wait()

    def handle_now(self, message: Any) -> Any:
        match message:
            case LeaseCall(request=request):
                if self._limiter is not None or self._paused_until > trio.current_time():
                    return LATER  # wait for a slot or the gate: served in a task
                lease = CallLease(attempt=partial(self._provider.chat_completion, request))
                self._leases.add(lease)
                return lease
            case LeaseStream(request=request):
                if self._limiter is not None or self._paused_until > trio.current_time():
                    return None  # wait for a slot or the gate: an actor-served stream
                grant = StreamGrant(open=partial(self._provider.chat_completion_stream, request))
                self._leases.add(grant)
                return grant
            case AttemptFailed(
                error=error, tries=tries, retry=retry, on_error=on_error, on_retry=on_retry
            ):
                return self._after_failure(retry, on_error, tries, error, on_retry)
            case AttemptCrashed(error=error):
                raise error
            case _:
                return LATER

    async def handle_call(self, message: Any) -> Any:
        provider = self._provider
        match message:
            case ChatCompletion() | LeaseCall():
                return await self._with_retries(
                    message.retry,
                    message.on_error,
                    partial(provider.chat_completion, message.request),
                    message.on_retry,
                    message.tries,
                )
            case CountTokens(request=request, retry=retry, on_error=on_error):
                return await self._with_retries(
                    retry, on_error, lambda: provider.count_tokens(request)
                )
            case ListModels(retry=retry, on_error=on_error):
                return await self._with_retries(retry, on_error, provider.list_models)
            case _:
                raise UnknownMessage(self.name, message)

    async def handle_stream(self, message: Any, send: trio.MemorySendChannel[Any]) -> None:
        match message:
            case OpenStream(
                request=request, retry=retry, on_error=on_error, on_retry=on_retry, tries=tries
            ):
                await self._stream(request, retry, on_error, send, on_retry, tries)
            case _:
                raise UnknownMessage(self.name, message, kind="stream")

    async def handle_cast(self, message: Any) -> None:
        match message:
            case RateLimitObserved(retry_after=retry_after):
                self._pause(retry_after)
            case _:
                raise UnknownMessage(self.name, message, kind="cast")

    # -- policies -----------------------------------------------------------------------

    @asynccontextmanager
    async def _admitted(self) -> AsyncIterator[None]:
        """The concurrency cap, then the rate-limit gate."""
        async with self._limiter if self._limiter is not None else nullcontext():
            # Re-check after every wake-up: another request may have pushed the pause
            # further while we slept (a deadline, not a condition another task signals).
            while (until := self._paused_until) > trio.current_time():  # noqa: ASYNC110
                await trio.sleep_until(until)
            yield

    async def _with_retries(
        self,
        retry: RetryConfig,
        on_error: ErrorHook | None,
        attempt: Callable[[], Awaitable[Any]],
        on_retry: RetryHook | None = None,
        tries: int = 0,
    ) -> Any:
        while True:
            try:
                async with self._admitted():
                    return await attempt()
            except KovaError as error:
                delay = self._after_failure(retry, on_error, tries, error, on_retry)
                if delay is None:
                    raise
            await trio.sleep(delay)
            tries += 1

    async def _stream(
        self,
        request: ChatRequest,
        retry: RetryConfig,
        on_error: ErrorHook | None,
        send: trio.MemorySendChannel[Any],
        on_retry: RetryHook | None = None,
        tries: int = 0,
    ) -> None:
        while True:
            try:
                async with (
                    self._admitted(),
                    self._provider.chat_completion_stream(request) as batches,
                ):
                    first = await _first_content(batches)
                    await send.send(StreamLease(first=first, rest=batches))
                    # The caller reads the rest; hold the response and the slot until it
                    # leaves the stream (which cancels this request).
                    await trio.sleep_forever()
            except KovaError as error:
                delay = self._after_failure(retry, on_error, tries, error, on_retry)
                if delay is None:
                    raise
            await trio.sleep(delay)
            tries += 1

    def _after_failure(
        self,
        retry: RetryConfig,
        on_error: ErrorHook | None,
        tries: int,
        error: KovaError,
        on_retry: RetryHook | None = None,
    ) -> float | None:
        """Record a failed attempt; the delay before the next one, or ``None``: give up."""
        if on_error is not None:
            on_error(error)
        if isinstance(error, RateLimited) and error.retry_after is not None:
            self._pause(error.retry_after)
        if not retry.should_retry(tries, error):
            return None
        delay = retry.delay(tries, error)
        log.warning(
            "provider.request.retrying",
            provider=self._provider.name,
            attempt=tries + 1,
            delay=delay,
            error_class=error.error_class.value if isinstance(error, ProviderError) else None,
            error=str(error),
        )
        if on_retry is not None:
            try:
                on_retry(tries + 1, error, delay)
            except Exception as exc:  # an observer must not change the retry policy
                log.warning("provider.retry_hook.failed", error=repr(exc))
        return delay

    def _pause(self, retry_after: float) -> None:
        until = trio.current_time() + retry_after
        if until > self._paused_until:
            self._paused_until = until
            log.info(
                "provider.rate_limit.paused",
                provider=self._provider.name,
                actor=self.name,
                retry_after=retry_after,
            )


async def _first_content(batches: EventBatches) -> tuple[StreamEvent, ...]:
    """Read until a batch with content (anything but usage); usage-only batches before it
    are kept. An error before any content raises here, where it can still be retried."""
    head: list[StreamEvent] = []
    async for batch in batches:
        head.extend(batch)
        if any(type(event) is not UsageEvent for event in batch):
            break
    return tuple(head)
