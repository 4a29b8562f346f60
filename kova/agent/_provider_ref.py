"""The caller side of the provider actor: :class:`ProviderRef` and :func:`spawn_provider`.

A :class:`ProviderRef` is the :class:`~kova.providers.Provider` that agents hold. Every
request runs in the caller's own task: it enters the admission the actor published (the
in-flight cap and the rate-limit gate; see ``_provider_actor``), sends the request on the
provider the actor holds open, and reports a failed attempt back to the actor, whose retry
policy decides whether and when to try again. Two loops do this, written once each: one for
calls (completions, token counts, model lists) and one for streams, which retries only
until the first content reached the consumer. The messages are in ``_provider_messages``.
"""

from __future__ import annotations

from contextlib import asynccontextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, TypeVar

import trio

from .._errors import KovaError, MailboxClosed, RateLimited
from .._log import get_logger
from .._models import ChatRequest, InferenceConfig, ToolDefinition, UsageEvent
from .._record import Record, evolve, set_field
from ..providers._base import heuristic_count_tokens
from ._input import check_messages
from ._provider_actor import ProviderActor
from ._provider_messages import AttemptFailed, GetAdmission, RateLimitObserved, StreamLease
from ._retry import RetryConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

    from .._models import ModelInfo, ModelResponse, StreamEvent
    from ..actors import ActorRef, RestartType, Runtime
    from ..providers import EventBatches, Provider
    from ._provider_messages import Admission, RetryHook

__all__ = ["ProviderRef", "spawn_provider"]

log = get_logger(__name__)

_T = TypeVar("_T")
_GET_ADMISSION = GetAdmission()


class _Link:
    """One provider actor as its refs reach it: the actor, and the admission its current
    incarnation published (asked for on first use, and again once it is closed). Shared by
    every copy of a ref (``with_retry``, ``observed``)."""

    __slots__ = ("actor", "admission")

    def __init__(self, actor: ActorRef) -> None:
        self.actor = actor
        self.admission: Admission | None = None

    async def refresh(self) -> Admission:
        """The current incarnation's admission.

        Raises:
            MailboxClosed: the actor is stopped.
        """
        admission: Admission = await self.actor.call(_GET_ADMISSION)
        self.admission = admission
        return admission


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
    """A :class:`~kova.providers.Provider` served by a provider actor.

    Requests run in the caller's task, admitted and retried by the actor's policy (see
    :func:`spawn_provider`). Cancelling a call cancels its HTTP request before the call
    returns; leaving a stream early closes the response under it.
    """

    ref: ActorRef
    """The provider actor."""
    provider_name: str
    retry: RetryConfig
    """How this ref's requests are retried (an agent passes its own)."""
    on_retry: RetryHook | None
    """Called in the actor before each retry (see :data:`RetryHook`)."""
    runtime: Runtime | None
    """Where the actor runs (used by :meth:`stop`)."""
    _link: _Link

    def __init__(
        self,
        *,
        ref: ActorRef,
        provider_name: str,
        retry: RetryConfig | None = None,
        on_retry: RetryHook | None = None,
        runtime: Runtime | None = None,
        link: _Link | None = None,
    ) -> None:
        set_field(self, "ref", ref)
        set_field(self, "provider_name", provider_name)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "on_retry", on_retry)
        set_field(self, "runtime", runtime)
        set_field(self, "_link", _Link(ref) if link is None else link)

    @property
    def name(self) -> str:
        return self.provider_name

    def open(self) -> AbstractAsyncContextManager[None]:
        """Nothing to acquire: the actor holds the provider open."""
        return nullcontext()

    def with_retry(self, retry: RetryConfig) -> ProviderRef:
        """This ref with another retry policy (same actor)."""
        if not isinstance(retry, RetryConfig):
            raise TypeError(f"retry must be a kova.agent.RetryConfig, got {type(retry).__name__}")
        return evolve(self, retry=retry)

    def observed(self, on_retry: RetryHook | None) -> ProviderRef:
        """This ref with a retry hook (same actor, same policy)."""
        return evolve(self, on_retry=on_retry)

    # -- calls --------------------------------------------------------------------------

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """See :meth:`kova.providers.Provider.chat_completion` (admitted and retried by the
        actor's policy).

        Raises:
            MailboxClosed: the provider actor is stopped.
            RateLimited: also when the rate-limit gate is closed and this ref's retry policy
                does not wait that long (``retry_after`` is the time left).
        """
        return await self.complete_checked(_checked(request))

    async def complete_checked(self, request: ChatRequest) -> ModelResponse:
        """:meth:`chat_completion` for a request already known to be well formed (the agent
        checks a turn's history once, at its boundary, and builds the rest itself). Internal
        to kova."""
        return await self._call(lambda provider: provider.chat_completion(request))

    async def count_tokens(self, request: ChatRequest) -> int:
        """See :meth:`kova.providers.Provider.count_tokens` (through the gate, retried). A
        provider without a counter of its own gets
        :func:`~kova.providers.heuristic_count_tokens`."""
        checked = _checked(request)
        return await self._call(lambda provider: _count_tokens(provider, checked))

    async def list_models(self) -> list[ModelInfo]:
        """See :meth:`kova.providers.Provider.list_models` (through the gate, retried).

        Raises:
            NotImplementedError: the provider cannot list its models.
        """
        return await self._call(_list_models)

    async def _call(self, attempt: Callable[[Provider], Awaitable[_T]]) -> _T:
        """The retry loop of every request that is not a stream."""
        link, retry = self._link, self.retry
        tries = 0
        while True:
            admission = link.admission
            if admission is None or admission.closed:
                admission = await link.refresh()
            token = await admission.enter(retry)
            try:
                return await attempt(admission.provider)
            except KovaError as exc:
                error = exc
            except Exception as exc:
                _provider_bug(admission, exc)
                raise
            finally:
                admission.leave(token)
            await self._after_failure(error, tries)
            tries += 1

    async def _after_failure(self, error: KovaError, tries: int) -> None:
        """An attempt failed after ``tries`` earlier failures: the actor records it and
        decides. Returns once the next attempt may start, or raises ``error``."""
        try:
            delay = await self._link.actor.call(
                AttemptFailed(error=error, tries=tries, retry=self.retry, on_retry=self.on_retry)
            )
        except MailboxClosed:
            delay = None  # stopped meanwhile: no next attempt, and the error is the answer
        if delay is None:
            raise error
        await trio.sleep(delay)

    # -- streams ------------------------------------------------------------------------

    @asynccontextmanager
    async def chat_completion_stream(self, request: ChatRequest) -> AsyncIterator[EventBatches]:
        """See :meth:`kova.providers.Provider.chat_completion_stream`.

        Errors before any content (HTTP statuses, an overload or rate-limit event first
        thing in the stream) are retried by the actor's policy and, once retries are spent,
        raise on entering; later errors raise from the iterator and are never retried.

        Raises:
            MailboxClosed: the provider actor is stopped.
        """
        async with self.stream_checked(_checked(request)) as lease:
            yield _LeasedBatches(lease)

    @asynccontextmanager
    async def stream_checked(self, request: ChatRequest) -> AsyncIterator[StreamLease]:
        """:meth:`chat_completion_stream` for a request already known to be well formed (see
        :meth:`complete_checked`), as the lease itself: its first batch, then the rest of the
        response, read directly. The retry loop of streams: an attempt is retried only until
        its first content; the in-flight slot is held until the consumer leaves. Internal to
        kova."""
        link, retry = self._link, self.retry
        tries = 0
        while True:
            admission = link.admission
            if admission is None or admission.closed:
                admission = await link.refresh()
            token = await admission.enter(retry)
            content = False
            try:
                async with admission.provider.chat_completion_stream(request) as batches:
                    try:
                        first = await _first_content(batches)
                    except KovaError as exc:
                        error = exc  # before any content: the policy decides
                    else:
                        content = True
                        yield StreamLease(first=first, rest=batches)
                        return
            except KovaError as exc:
                if content:
                    # The consumer's, or the stream's after its content: never retried. A
                    # rate limit still closes the gate, so the other callers back off.
                    if isinstance(exc, RateLimited) and exc.retry_after is not None:
                        self._report_rate_limit(min(exc.retry_after, retry.max_retry_after))
                    raise
                error = exc  # the request failed on opening (an HTTP status)
            except Exception as exc:
                if not content:
                    _provider_bug(admission, exc)
                raise
            finally:
                admission.leave(token)
            await self._after_failure(error, tries)
            tries += 1

    def _report_rate_limit(self, retry_after: float) -> None:
        # A full mailbox means the actor is busy, not gone: this request still raises its
        # RateLimited, and the next rate limit pauses the others.
        with suppress(trio.WouldBlock, MailboxClosed):
            self._link.actor.cast(RateLimitObserved(retry_after=retry_after))

    async def stop(self) -> None:
        """Stop the provider actor (orderly: requests in flight finish first, within the
        grace period). Does nothing without a :attr:`runtime`."""
        if self.runtime is not None:
            await self.runtime.stop(self.ref)


async def _first_content(batches: EventBatches) -> tuple[StreamEvent, ...]:
    """Read until a batch with content (anything but usage); usage-only batches before it
    are kept. An error before any content raises here, where it can still be retried."""
    head: list[StreamEvent] = []
    async for batch in batches:
        head.extend(batch)
        if any(type(event) is not UsageEvent for event in batch):
            break
    return tuple(head)


async def _count_tokens(provider: Provider, request: ChatRequest) -> int:
    counter = getattr(provider, "count_tokens", None)
    if counter is None:
        return heuristic_count_tokens(request.messages, request.tools)
    count: int = await counter(request)
    return count


async def _list_models(provider: Provider) -> list[ModelInfo]:
    lister = getattr(provider, "list_models", None)
    if lister is None:
        raise NotImplementedError(f"provider {provider.name!r} cannot list its models")
    models: list[ModelInfo] = await lister()
    return models


def _provider_bug(admission: Admission, exc: Exception) -> None:
    """A provider raised something that is not a request error: it fails this request only
    (the caller's task raises it, with its traceback), logged here once, as a warning. An
    exception group made only of request errors (a provider that raised several at once) is
    the caller's to handle."""
    if isinstance(exc, BaseExceptionGroup) and exc.split(KovaError)[1] is None:
        return
    log.warning(
        "provider.request.failed", provider=admission.name, error=f"{type(exc).__name__}: {exc}"
    )


def _checked(request: object) -> ChatRequest:
    """``request``, checked in the caller's task: a malformed one fails its caller with a
    ``TypeError`` before anything is sent."""
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
    if max_in_flight is not None and (
        not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool) or max_in_flight < 1
    ):
        raise ValueError(f"max_in_flight must be an int of at least 1, got {max_in_flight!r}")

    def factory() -> ProviderActor:
        return ProviderActor(provider, max_in_flight=max_in_flight)

    # The supervisor names unnamed children after the factory, adding -2, -3 ... if taken.
    factory.__name__ = f"provider.{provider.name}"
    ref = await runtime.spawn(factory, name=name, mailbox_size=mailbox_size, restart=restart)
    return ProviderRef(
        ref=ref, provider_name=provider.name, retry=retry or RetryConfig(), runtime=runtime
    )
