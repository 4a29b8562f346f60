"""The caller side of the provider actor: :class:`ProviderRef` and :func:`spawn_provider`.

A :class:`ProviderRef` is the :class:`~kova.providers.Provider` that agents hold. It sends
each request to the actor (``_provider_actor``) and, when the actor admits it at once, runs
the leased attempt in the caller's own task: a call's one HTTP request, or a stream's
response read to its first content and then handed to the consumer. Failed attempts go back
to the actor, whose retry policy, hooks and rate-limit gate decide what happens next. The
messages both sides exchange are in ``_provider_messages``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, NoReturn

import trio

from .._errors import KovaError, MailboxClosed, RateLimited
from .._models import ChatRequest, InferenceConfig, ToolDefinition
from .._record import Record, evolve, set_field
from ._input import check_messages
from ._provider_actor import ProviderActor, _first_content
from ._provider_messages import (
    AttemptCrashed,
    AttemptFailed,
    CallLease,
    CountTokens,
    LeaseCall,
    LeaseStream,
    ListModels,
    OpenStream,
    RateLimitObserved,
    StreamLease,
)
from ._retry import RetryConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from .._models import ModelInfo, ModelResponse, StreamEvent
    from ..actors import ActorRef, RestartType, Runtime
    from ..providers import EventBatches, Provider
    from ._provider_messages import ErrorHook, RetryHook

__all__ = ["ProviderRef", "spawn_provider"]


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

        The stream is leased (see ``_provider_actor``). Errors before any content (HTTP
        statuses, an overload or rate-limit event first thing in the stream) are retried by
        the actor's policy and, once retries are spent, raise on entering; later errors raise
        from the iterator and are never retried.

        Raises:
            MailboxClosed: the provider actor is stopped.
        """
        async with self.stream_checked(_checked(request)) as lease:
            yield _LeasedBatches(lease)

    @asynccontextmanager
    async def stream_checked(self, request: ChatRequest) -> AsyncIterator[StreamLease]:
        """:meth:`chat_completion_stream` for a request already known to be well formed (see
        :meth:`complete_checked`), as the lease itself: its first batch, then the rest of the
        response read directly (the agent's stream loop saves a coroutine per network read
        that way). Internal to kova."""
        async with self._leased_stream(request) as lease:
            try:
                yield lease
            except RateLimited as exc:
                # A rate limit after content: not retried, but the others should back off.
                if exc.retry_after is not None:
                    self._report_rate_limit(exc.retry_after)
                raise

    @asynccontextmanager
    async def _leased_stream(self, request: ChatRequest) -> AsyncIterator[StreamLease]:
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
                        yield StreamLease(first=first, rest=batches)
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
            yield lease

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
