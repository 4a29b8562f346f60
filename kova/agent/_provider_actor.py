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

Others reach the actor through a :class:`ProviderRef`, which implements the
:class:`~kova.providers.Provider` protocol itself, so code written against a provider (the
agent loop) takes either.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from contextlib import asynccontextmanager, nullcontext, suppress
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeAlias

import trio

from .._errors import KovaError, MailboxClosed, ProviderError, RateLimited
from .._log import get_logger
from .._models import ChatRequest, InferenceConfig, ToolDefinition, UsageEvent
from .._record import Record, evolve, set_field
from ..actors import LATER, Actor, ActorRef, Call, UnknownMessage
from ._input import check_messages
from ._retry import RetryConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Sequence
    from contextlib import AbstractAsyncContextManager

    from .._models import ModelInfo, ModelResponse, StreamEvent
    from ..actors import RestartType, Runtime
    from ..providers import EventBatches, Provider

__all__ = [
    "AttemptCrashed",
    "AttemptFailed",
    "CallLease",
    "ChatCompletion",
    "LeaseCall",
    "LeaseStream",
    "StreamGrant",
    "CountTokens",
    "ListModels",
    "OpenStream",
    "ErrorHook",
    "ProviderActor",
    "ProviderRef",
    "RateLimitObserved",
    "RetryHook",
    "StreamLease",
    "spawn_provider",
]

log = get_logger(__name__)

ErrorHook: TypeAlias = Callable[[KovaError], None]
"""Called in the actor for every failed attempt of a request, retried or not (the metrics
hook: ``MetricsCollector.record_llm_error``). It must not block or raise."""

RetryHook: TypeAlias = Callable[[int, KovaError, float], None]
"""Called in the actor when the retry policy decides to try a request again, with the
attempt that failed (1 for the first), its error and the wait before the next attempt. The
agent's telemetry uses it to put ``ModelCallRetrying`` on the turn's event stream. Only
values cross: the actor's limiter, gate and provider stay its own. It must not block or
raise; ``None`` (nobody listens) costs nothing."""


class _Completion(Record):
    """The fields of a completion request to the actor. ``tries`` counts the attempts already
    failed (for the retry policy)."""

    __slots__ = ("on_error", "on_retry", "request", "retry", "tries")

    request: ChatRequest
    retry: RetryConfig
    on_error: ErrorHook | None
    on_retry: RetryHook | None
    tries: int

    def __init__(
        self,
        *,
        request: ChatRequest,
        retry: RetryConfig | None = None,
        on_error: ErrorHook | None = None,
        on_retry: RetryHook | None = None,
        tries: int = 0,
    ) -> None:
        set_field(self, "request", request)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_error", on_error)
        set_field(self, "on_retry", on_retry)
        set_field(self, "tries", tries)


class ChatCompletion(_Completion, Call["ModelResponse"]):
    """Call: one non-streaming completion, served and retried per ``retry`` in the actor."""

    __slots__ = ()


class LeaseCall(_Completion, Call["CallLease | ModelResponse"]):
    """Call: one non-streaming completion. The reply is a :class:`CallLease` when the actor
    admits it at once (the caller then runs the attempt), else the whole response, served and
    retried in the actor like :class:`ChatCompletion`."""

    __slots__ = ()


class AttemptFailed(Record, Call["float | None"]):
    """Call: a leased attempt failed with ``error`` after ``tries`` earlier failures. The reply
    is the wait before the next attempt, or ``None``: give up (the caller raises ``error``)."""

    __slots__ = ("error", "on_error", "on_retry", "retry", "tries")

    error: KovaError
    tries: int
    retry: RetryConfig
    on_error: ErrorHook | None
    on_retry: RetryHook | None

    def __init__(
        self,
        *,
        error: KovaError,
        tries: int,
        retry: RetryConfig | None = None,
        on_error: ErrorHook | None = None,
        on_retry: RetryHook | None = None,
    ) -> None:
        set_field(self, "error", error)
        set_field(self, "tries", tries)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_error", on_error)
        set_field(self, "on_retry", on_retry)


class AttemptCrashed(Record, Call[None]):
    """Call: a leased attempt raised something that is not a request error (a provider bug).
    The actor crashes with it, as if its own task had raised it; the caller gets
    :class:`~kova.ActorFailed`."""

    __slots__ = ("error",)

    error: Exception

    def __init__(self, *, error: Exception) -> None:
        set_field(self, "error", error)


class _Admission:
    """What the actor hands a caller it admitted at once: one attempt to run in the caller's
    own task. The caller sets ``running`` as it starts the attempt and ``done`` when it is
    over, whatever its outcome: the actor's stop waits for the running ones (an admission its
    caller dropped, cancelled just as it arrived, holds nothing up)."""

    __slots__ = ("__weakref__", "done", "running")

    def __init__(self) -> None:
        self.running = False
        self.done = trio.Event()


class CallLease(_Admission):
    """A call admitted at once: ``attempt()`` sends that one request. What it may touch: that
    one request (see :class:`_Admission`)."""

    __slots__ = ("attempt",)

    def __init__(self, attempt: Callable[[], Awaitable[ModelResponse]]) -> None:
        super().__init__()
        self.attempt = attempt


class OpenStream(_Completion):
    """Stream: one streaming completion; the single item is a :class:`StreamLease`."""

    __slots__ = ()


class LeaseStream(Record, Call["StreamGrant | None"]):
    """Call: may the caller open one streaming completion itself, now? The reply is a
    :class:`StreamGrant` when the actor admits it at once (no cap, the gate open), else
    ``None``: the caller asks for an actor-served stream (:class:`OpenStream`) instead."""

    __slots__ = ("request",)

    request: ChatRequest

    def __init__(self, *, request: ChatRequest) -> None:
        set_field(self, "request", request)


class StreamGrant(_Admission):
    """A stream admitted at once: ``open()`` is the provider's stream of that one request.
    What it may touch: that one response (see :class:`_Admission`)."""

    __slots__ = ("open",)

    def __init__(self, open: Callable[[], AbstractAsyncContextManager[EventBatches]]) -> None:
        super().__init__()
        self.open = open


class CountTokens(Record, Call[int]):
    """Call: prompt tokens for a request."""

    __slots__ = ("on_error", "request", "retry")

    request: ChatRequest
    retry: RetryConfig
    on_error: ErrorHook | None

    def __init__(
        self,
        *,
        request: ChatRequest,
        retry: RetryConfig | None = None,
        on_error: ErrorHook | None = None,
    ) -> None:
        set_field(self, "request", request)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_error", on_error)


class ListModels(Record, Call["list[ModelInfo]"]):
    """Call: the provider's models."""

    __slots__ = ("on_error", "retry")

    retry: RetryConfig
    on_error: ErrorHook | None

    def __init__(
        self, *, retry: RetryConfig | None = None, on_error: ErrorHook | None = None
    ) -> None:
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_error", on_error)


class RateLimitObserved(Record):
    """Cast: a leased stream was rate limited after its content began; pause new requests
    for ``retry_after`` seconds."""

    __slots__ = ("retry_after",)

    retry_after: float

    def __init__(self, *, retry_after: float) -> None:
        set_field(self, "retry_after", retry_after)


class StreamLease(Record):
    """What a stream's caller receives: the first batch with content (and any usage-only
    batches before it) and the rest of that one response's batches. See the module
    docstring for what a lease may touch."""

    __slots__ = ("first", "rest")

    first: tuple[StreamEvent, ...]
    rest: EventBatches

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __init__(self, *, first: tuple[StreamEvent, ...], rest: EventBatches) -> None:
        set_field(self, "first", first)
        set_field(self, "rest", rest)


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


class _LeasedBatches:
    """The batches of a lease: its first batch, then the rest of the response."""

    __slots__ = ("_first", "_rest")

    def __init__(self, lease: StreamLease) -> None:
        self._first: tuple[StreamEvent, ...] | None = lease.first or None
        self._rest = lease.rest

    def __aiter__(self) -> _LeasedBatches:
        return self

    async def __anext__(self) -> Sequence[StreamEvent]:
        first = self._first
        if first is not None:
            self._first = None
            return first
        return await self._rest.__anext__()


class ProviderRef(Record):
    """A :class:`~kova.providers.Provider` that forwards every request to a provider actor.

    Cancellation crosses over: cancelling a call cancels the HTTP request in the actor before
    the call returns; leaving a stream early stops the HTTP read under it.
    """

    __slots__ = ("on_error", "on_retry", "provider_name", "ref", "retry", "runtime")

    ref: ActorRef
    """The provider actor."""
    provider_name: str
    retry: RetryConfig
    """How the actor retries this ref's requests (an agent passes its own)."""
    on_error: ErrorHook | None
    """Called in the actor for each failed attempt (see :data:`ErrorHook`)."""
    on_retry: RetryHook | None
    """Called in the actor before each retry (see :data:`RetryHook`)."""
    runtime: Runtime | None
    """Where the actor runs (used by :meth:`stop`)."""

    def __init__(
        self,
        *,
        ref: ActorRef,
        provider_name: str,
        retry: RetryConfig | None = None,
        on_error: ErrorHook | None = None,
        on_retry: RetryHook | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        set_field(self, "ref", ref)
        set_field(self, "provider_name", provider_name)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_error", on_error)
        set_field(self, "on_retry", on_retry)
        set_field(self, "runtime", runtime)

    @property
    def name(self) -> str:
        return self.provider_name

    def open(self) -> AbstractAsyncContextManager[None]:
        """Nothing to acquire: the actor holds the provider open."""
        return nullcontext()

    def with_retry(self, retry: RetryConfig, *, on_error: ErrorHook | None = None) -> ProviderRef:
        """This ref with another retry policy and error hook (same actor)."""
        return evolve(self, retry=retry, on_error=on_error)

    def observed(self, on_retry: RetryHook | None) -> ProviderRef:
        """This ref with a retry hook (same actor, same policy)."""
        return evolve(self, on_retry=on_retry)

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """See :meth:`kova.providers.Provider.chat_completion` (retried in the actor).

        Raises:
            MailboxClosed: the provider actor is stopped.
            ActorFailed: the provider actor crashed during the call.
        """
        return await self.complete_checked(_checked(request))

    async def complete_checked(self, request: ChatRequest) -> ModelResponse:
        """:meth:`chat_completion` for a request already known to be well formed (the agent
        checks a turn's history once, at its boundary, and builds the rest itself): admitted
        and retried by the actor, leased when it can be. Internal to kova."""
        ref = self.ref
        message = LeaseCall(
            request=request, retry=self.retry, on_error=self.on_error, on_retry=self.on_retry
        )
        tries = 0
        while True:
            reply = await ref.call(message)
            if not isinstance(reply, CallLease):
                return reply  # served in the actor, retries and all
            reply.running = True
            try:
                return await reply.attempt()
            except KovaError as exc:
                error = exc
            except Exception as exc:
                if _request_errors_only(exc):
                    raise  # the caller's, as when served in the actor
                await self._crash_actor(exc)
            finally:
                reply.done.set()
            await self._after_failed_attempt(error, tries)
            tries += 1
            message = evolve(message, tries=tries)

    async def _after_failed_attempt(self, error: KovaError, tries: int) -> None:
        """A leased attempt failed after ``tries`` earlier failures: the actor records it and
        decides. Waits until the next attempt may start, or raises ``error``."""
        delay = await self.ref.call(
            AttemptFailed(
                error=error,
                tries=tries,
                retry=self.retry,
                on_error=self.on_error,
                on_retry=self.on_retry,
            )
        )
        if delay is None:
            raise error
        await trio.sleep(delay)

    async def _crash_actor(self, exc: Exception) -> NoReturn:
        """A leased attempt raised what is not a request error (a provider bug): the actor
        crashes with it, and this caller gets :class:`~kova.ActorFailed`."""
        await self.ref.call(AttemptCrashed(error=exc))
        raise AssertionError("unreachable: the actor crashed") from exc

    @asynccontextmanager
    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """See :meth:`kova.providers.Provider.chat_completion_stream`.

        The stream is leased (see the module docstring). Errors before any content (HTTP
        statuses, an overload or rate-limit event first thing in the stream) are retried by
        the actor's policy and, once retries are spent, raise on entering; later errors raise
        from the iterator and are never retried.

        Raises:
            MailboxClosed: the provider actor is stopped.
        """
        async with self.stream_checked(_checked(request)) as batches:
            yield batches

    @asynccontextmanager
    async def stream_checked(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """:meth:`chat_completion_stream` for a request already known to be well formed (see
        :meth:`complete_checked`). Internal to kova."""
        async with self._leased_stream(request) as batches:
            try:
                yield batches
            except RateLimited as exc:
                # A rate limit after content: not retried, but the others should back off.
                if exc.retry_after is not None:
                    self._report_rate_limit(exc.retry_after)
                raise

    @asynccontextmanager
    async def _leased_stream(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """The stream, opened in this task when the actor admits it at once, else by the
        actor; errors before content retried by the actor's policy either way."""
        ref = self.ref
        message = LeaseStream(request=request)
        tries = 0
        while True:
            grant = await ref.call(message)
            if grant is None:
                break  # a cap or a closed gate: the actor serves the stream
            error: KovaError | None = None
            content = False
            grant.running = True
            try:
                async with grant.open() as batches:
                    try:
                        first = await _first_content(batches)
                    except KovaError as exc:
                        error = exc
                    else:
                        content = True
                        yield _LeasedBatches(StreamLease(first=first, rest=batches))
                        return
            except KovaError as exc:
                if content:
                    raise  # the consumer's, or the stream's after its content: never retried
                error = exc  # the request failed on opening (an HTTP status)
            except Exception as exc:
                if content or _request_errors_only(exc):
                    raise
                await self._crash_actor(exc)
            finally:
                grant.done.set()
            assert error is not None
            await self._after_failed_attempt(error, tries)
            tries += 1
        async with ref.stream(
            OpenStream(
                request=request,
                retry=self.retry,
                on_error=self.on_error,
                on_retry=self.on_retry,
                tries=tries,
            ),
            buffer=1,
        ) as items:
            try:
                lease: StreamLease = await items.receive()
            except trio.EndOfChannel:
                raise MailboxClosed(self.ref.name) from None
            yield _LeasedBatches(lease)

    def _report_rate_limit(self, retry_after: float) -> None:
        # A full mailbox means the actor is busy, not gone: this request still raises its
        # RateLimited, and the next rate limit pauses the others.
        with suppress(trio.WouldBlock, MailboxClosed):
            self.ref.cast(RateLimitObserved(retry_after=retry_after))

    async def list_models(self) -> list[ModelInfo]:
        """See :meth:`kova.providers.Provider.list_models` (through the gate, retried)."""
        return await self.ref.call(ListModels(retry=self.retry, on_error=self.on_error))

    async def count_tokens(self, request: ChatRequest) -> int:
        """See :meth:`kova.providers.Provider.count_tokens` (through the gate, retried)."""
        return await self.ref.call(
            CountTokens(request=_checked(request), retry=self.retry, on_error=self.on_error)
        )

    async def stop(self) -> None:
        """Stop the provider actor (orderly: queued and in-flight requests finish first,
        within the grace period). Does nothing without a :attr:`runtime`."""
        if self.runtime is not None:
            await self.runtime.stop(self.ref)


def _request_errors_only(exc: Exception) -> bool:
    """An exception group of request errors only (a provider that raises several at once):
    the caller's to handle, never a fault of the actor."""
    return isinstance(exc, BaseExceptionGroup) and exc.split(KovaError)[1] is None


def _checked(request: object) -> ChatRequest:
    """``request``, checked in the caller's task: a malformed one must fail its caller with a
    ``TypeError``, never reach (and crash) the actor that many callers share."""
    if not isinstance(request, ChatRequest):
        raise TypeError(f"expected a kova.ChatRequest, got {type(request).__name__}")
    check_messages(request.messages)
    for index, tool in enumerate(request.tools):
        if not isinstance(tool, ToolDefinition):
            raise TypeError(
                f"tools[{index}] must be a kova.ToolDefinition, got {type(tool).__name__}"
            )
    if not isinstance(request.config, InferenceConfig):
        raise TypeError(
            f"config must be a kova.InferenceConfig, got {type(request.config).__name__}"
        )
    return request


async def spawn_provider(
    runtime: Runtime,
    provider: Provider,
    *,
    name: str | None = None,
    max_in_flight: int | None = None,
    mailbox_size: int | None = None,
    retry: RetryConfig | None = None,
    restart: RestartType | None = None,
) -> ProviderRef:
    """Start a :class:`ProviderActor` for ``provider`` under ``runtime``.

    Returns once the provider is open.

    Args:
        runtime: where the actor runs (see :func:`kova.actors.open_runtime`).
        provider: the provider to serve.
        name: the actor's name; by default ``provider.<provider name>``, made unique.
        max_in_flight: cap on concurrent requests (``None``: no cap).
        mailbox_size: the actor's mailbox size (default 16).
        retry: the default retry policy of the returned ref (an agent uses its own).
        restart: the child restart type (default ``"permanent"``).
    """

    def factory() -> ProviderActor:
        return ProviderActor(provider, max_in_flight=max_in_flight)

    # The supervisor names unnamed children after the factory, adding -2, -3 ... if taken.
    factory.__name__ = f"provider.{provider.name}"
    ref = await runtime.spawn(factory, name=name, mailbox_size=mailbox_size, restart=restart)
    return ProviderRef(
        ref=ref, provider_name=provider.name, retry=retry or RetryConfig(), runtime=runtime
    )
