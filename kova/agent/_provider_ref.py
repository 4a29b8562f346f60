"""The caller side of the provider actor: :class:`ProviderRef` and :func:`spawn_provider`.

A :class:`ProviderRef` is the :class:`~kova.providers.Provider` that agents hold. Every
request runs in the caller's own task: it enters the admission the actor published (the
in-flight cap and the rate-limit gate; see ``_provider_actor``), sends the request on the
provider the actor holds open, and reports a failed attempt back to the actor, whose retry
policy decides whether and when to try again. Two loops do this, written once each: one for
calls (completions, token counts, model lists) and one for streams, which retries only
until the first content reached the consumer. The messages are in ``_provider_messages``.

A ref spawned for a :class:`~kova.providers.FallbackProvider` holds one link per provider
(each its own actor) and walks them in order around those loops: the next provider gets
the request when one fails with an error the fallback's ``on`` matches, or while its gate
is closed; a stream only before its first content.
"""

from __future__ import annotations

from contextlib import asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._errors import KovaError, ProviderError, ProviderErrorClass, RateLimited
from .._log import get_logger
from .._models import ChatRequest, InferenceConfig, ToolDefinition
from .._observe import ModelCallFallback, stray_cancel
from .._record import Record, evolve, set_field
from ..providers._base import count_tokens, list_models
from ..providers._fallback import FallbackProvider, PrefixedBatches, first_content
from ._input import check_messages
from ._provider_actor import ProviderActor
from ._provider_messages import GetAdmission, StreamLease
from ._retry import RetryConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._models import ModelInfo, ModelResponse
    from .._observe import TurnEmitter
    from ..actors import ActorRef, RestartType, Runtime
    from ..providers import EventBatches, FallbackOn, Provider
    from ._provider_messages import Admission

__all__ = ["ProviderRef", "spawn_provider"]

log = get_logger(__name__)

_T = TypeVar("_T")
_GET_ADMISSION = GetAdmission()


class _Link:
    """One provider actor as its refs reach it: the actor, and the admission its current
    incarnation published (asked for on first use, and again once it is closed). Shared by
    every copy of a ref (``with_retry``, ``observed``)."""

    __slots__ = ("actor", "admission", "name")

    def __init__(self, actor: ActorRef, name: str) -> None:
        self.actor = actor
        self.name = name
        self.admission: Admission | None = None

    def gated(self) -> bool:
        """The rate-limit gate of this provider is closed now."""
        admission = self.admission
        return (
            admission is not None
            and not admission.closed
            and admission.paused_until > trio.current_time()
        )

    async def refresh(self) -> Admission:
        """The current incarnation's admission.

        Raises:
            MailboxClosed: the actor is stopped.
        """
        admission: Admission = await self.actor.call(_GET_ADMISSION)
        self.admission = admission
        return admission


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
    telemetry: tuple[TurnEmitter, int] | None
    """The turn's event stream and the model call's span id (see :meth:`observed`)."""
    runtime: Runtime | None
    """Where the actor runs (used by :meth:`stop`)."""
    _links: tuple[_Link, ...]
    _fallback_on: FallbackOn | None

    def __init__(
        self,
        *,
        ref: ActorRef,
        provider_name: str,
        retry: RetryConfig | None = None,
        telemetry: tuple[TurnEmitter, int] | None = None,
        runtime: Runtime | None = None,
        links: tuple[_Link, ...] | None = None,
        fallback_on: FallbackOn | None = None,
    ) -> None:
        set_field(self, "ref", ref)
        set_field(self, "provider_name", provider_name)
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "telemetry", telemetry)
        set_field(self, "runtime", runtime)
        set_field(self, "_links", (_Link(ref, provider_name),) if links is None else links)
        set_field(self, "_fallback_on", fallback_on)

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

    def observed(self, emitter: TurnEmitter, span_id: int) -> ProviderRef:
        """This ref reporting to a turn's event stream (same actors, same policy): each retry
        the admission decides becomes a ``ModelCallRetrying`` and each move to a fallback provider
        a ``ModelCallFallback`` of the model call ``span_id``."""
        return evolve(self, telemetry=(emitter, span_id))

    # -- calls --------------------------------------------------------------------------

    async def chat_completion(self, request: ChatRequest) -> ModelResponse:
        """See :meth:`kova.providers.Provider.chat_completion` (admitted and retried by the
        actor's policy).

        Raises:
            MailboxClosed: the provider actor is stopped.
            RateLimited: also when the rate-limit gate is closed and this ref's retry policy
                does not wait that long (``retry_after`` is the time left).
        """
        return await self._complete_checked(_checked(request))

    def _complete_checked(self, request: ChatRequest) -> Coroutine[Any, Any, ModelResponse]:
        """:meth:`chat_completion` for a request already known to be well formed (the agent
        checks a turn's history once, at its boundary, and builds the rest itself). Internal
        to kova. A plain method returning the coroutine that does the work: no coroutine
        frame of its own for every await of the call."""
        links = self._links
        if len(links) == 1:  # no fallbacks: the retry loop itself
            return self._attempts(links[0], lambda provider: provider.chat_completion(request))
        return self._call(lambda provider: provider.chat_completion(request))

    async def count_tokens(self, request: ChatRequest) -> int:
        """See :meth:`kova.providers.Provider.count_tokens` (through the gate, retried). A
        provider without a counter of its own gets
        :func:`~kova.providers.heuristic_count_tokens`."""
        checked = _checked(request)
        return await self._call(lambda provider: count_tokens(provider, checked))

    async def list_models(self) -> list[ModelInfo]:
        """See :meth:`kova.providers.Provider.list_models` (through the gate, retried).

        Raises:
            NotImplementedError: the provider cannot list its models.
        """
        return await self._call(list_models)

    async def _call(self, attempt: Callable[[Provider], Awaitable[_T]]) -> _T:
        """Every request that is not a stream: on the provider, or along the fallbacks."""
        links = self._links
        if len(links) == 1:
            return await self._attempts(links[0], attempt)
        last = len(links) - 1
        index = self._skip_gated(0)
        while True:
            try:
                return await self._attempts(links[index], attempt)
            except Exception as exc:
                if index == last or not self._falls_back(exc):
                    raise
                index = self._skip_gated(self._fell_back(index, exc))

    async def _attempts(self, link: _Link, attempt: Callable[[Provider], Awaitable[_T]]) -> _T:
        """The retry loop of every request that is not a stream, on one provider."""
        retry = self.retry
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
            except trio.Cancelled as exc:
                _stray_cancel(admission, exc)
                raise
            finally:
                admission.leave(token)
            await self._after_failure(admission, error, tries)
            tries += 1

    async def _after_failure(self, admission: Admission, error: KovaError, tries: int) -> None:
        """An attempt failed after ``tries`` earlier failures: its admission decides (an
        incarnation that ended meanwhile: no next attempt, the error is the answer). Returns
        once the next attempt may start, or raises ``error``."""
        delay = admission.failed(error, tries, self.retry, self.telemetry)
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
        async with self._stream_checked(_checked(request)) as lease:
            yield PrefixedBatches(lease.first, lease.rest)

    def _stream_checked(self, request: ChatRequest) -> AbstractAsyncContextManager[StreamLease]:
        """:meth:`chat_completion_stream` for a request already known to be well formed (see
        :meth:`_complete_checked`), as the lease itself: its first batch, then the rest of the
        response, read directly. Internal to kova."""
        return _LeasedStream(self, request)

    # -- fallbacks ----------------------------------------------------------------------

    def _falls_back(self, error: BaseException) -> bool:
        on = self._fallback_on
        return on is not None and on(error)

    def _skip_gated(self, index: int) -> int:
        """The first provider from ``index`` on whose rate-limit gate is open, the ones
        skipped reported; ``index`` itself when every one from there on is closed (its gate
        then decides: wait within the bound, or fail and fall back)."""
        links = self._links
        for candidate in range(index, len(links)):
            if not links[candidate].gated():
                for skipped in range(index, candidate):
                    self._fell_back(skipped, None)
                return candidate
        return index

    def _fell_back(self, index: int, error: BaseException | None) -> int:
        """The request leaves provider ``index`` for the next one (which it returns)."""
        here, there = self._links[index].name, self._links[index + 1].name
        log.info(
            "provider.fallback",
            provider=here,
            to=there,
            error=None if error is None else f"{type(error).__name__}: {error}",
            error_class=error.error_class.value if isinstance(error, ProviderError) else None,
        )
        if self.telemetry is not None:
            emitter, span_id = self.telemetry
            error_class = getattr(error, "error_class", None)
            emitter.emit(
                ModelCallFallback(
                    turn_id=emitter.turn_id,
                    span_id=span_id,
                    time=trio.current_time(),
                    from_provider=here,
                    to_provider=there,
                    error_type=None if error is None else type(error).__name__,
                    error_class=None if error_class is None else str(error_class.value),
                )
            )
        return index + 1

    async def stop(self) -> None:
        """Stop the provider actors (orderly: requests in flight finish first, within the
        grace period). Does nothing without a :attr:`runtime`."""
        if self.runtime is not None:
            for link in self._links:
                await self.runtime.stop(link.actor)


class _LeasedStream:
    """:meth:`ProviderRef._stream_checked`'s context manager: entering runs the retry loop of
    streams (an attempt is retried only until its first content, along the fallbacks when
    there are some); the in-flight slot is held until the consumer leaves. A plain class
    rather than an ``asynccontextmanager`` generator: thousands of streams may wait for their
    response heads at once, and each generator would hold its frame for the whole stream."""

    __slots__ = ("_admission", "_link", "_opened", "_ref", "_request", "_token")

    def __init__(self, ref: ProviderRef, request: ChatRequest) -> None:
        self._ref = ref
        self._request = request
        self._opened: AbstractAsyncContextManager[EventBatches] | None = None
        self._admission: Admission | None = None
        self._link: _Link | None = None
        self._token: object = None

    def __aenter__(self) -> Coroutine[Any, Any, StreamLease]:
        links = self._ref._links
        if len(links) == 1:  # no fallbacks: the retry loop itself, no frame of its own
            return self._attempts(links[0])
        return self._along(links)

    async def _along(self, links: tuple[_Link, ...]) -> StreamLease:
        """The retry loop on each provider in turn, while they fail before any content with
        an error the fallback's ``on`` matches (a provider whose gate is closed skipped)."""
        ref = self._ref
        last = len(links) - 1
        index = ref._skip_gated(0)
        while True:
            try:
                return await self._attempts(links[index])
            except Exception as exc:
                if index == last or not ref._falls_back(exc):
                    raise
                index = ref._skip_gated(ref._fell_back(index, exc))

    async def _attempts(self, link: _Link) -> StreamLease:
        """The retry loop of streams, on one provider: returns once an attempt's first
        content arrived, holding its slot and its response."""
        ref = self._ref
        retry = ref.retry
        tries = 0
        while True:
            admission = link.admission
            if admission is None or admission.closed:
                admission = await link.refresh()
            token = await admission.enter(retry)
            held = False
            try:
                opened = admission.provider.chat_completion_stream(self._request)
                batches = await opened.__aenter__()
                try:
                    first = await first_content(batches)
                except KovaError as exc:
                    error = exc  # before any content: the policy decides
                    await opened.__aexit__(None, None, None)
                except BaseException as exc:
                    await opened.__aexit__(type(exc), exc, exc.__traceback__)
                    raise
                else:
                    held = True
                    self._opened, self._admission, self._token = opened, admission, token
                    self._link = link
                    return StreamLease(first=first, rest=batches)
            except KovaError as exc:
                error = exc  # the request failed on opening (an HTTP status)
            except Exception as exc:
                _provider_bug(admission, exc)
                raise
            except trio.Cancelled as exc:
                _stray_cancel(admission, exc)
                raise
            finally:
                if not held:
                    admission.leave(token)
            await ref._after_failure(admission, error, tries)
            tries += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        opened, admission, link = self._opened, self._admission, self._link
        assert opened is not None, "entered"
        assert admission is not None
        assert link is not None
        self._opened = None
        error = exc
        try:
            await opened.__aexit__(exc_type, exc, traceback)
        except BaseException as raised:
            error = raised
            raise
        finally:
            # The consumer's, or the stream's after its content: never retried. A rate
            # limit still closes the gate, so the other callers back off.
            if isinstance(error, RateLimited) and error.retry_after is not None:
                admission.rate_limited(error.retry_after, self._ref.retry)
            admission.leave(self._token)


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


def _stray_cancel(admission: Admission, exc: trio.Cancelled) -> None:
    """Raise a provider's own ``trio.Cancelled`` (one nothing cancelling this task explains,
    see :func:`~kova._observe.stray_cancel`) as the request's error; return for a real one.
    Passed on, the caller's agent saw a cancellation it never asked for, which a cancelled
    scope further out swallowed: the turn's error vanished."""
    if not stray_cancel(exc):
        return
    log.warning("provider.request.failed", provider=admission.name, error=repr(exc))
    raise ProviderError(
        f"the provider raised trio.Cancelled while nothing cancelled the request "
        f"(a provider bug: {exc!r})",
        provider=admission.name,
        error_class=ProviderErrorClass.OTHER,
    ) from None


def _checked(request: object) -> ChatRequest:
    """``request``, checked in the caller's task: a malformed one fails its caller with a
    ``TypeError`` before anything is sent."""
    if not isinstance(request, ChatRequest):
        raise TypeError(f"expected a kova.providers.ChatRequest, got {type(request).__name__}")
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
    """Start a :class:`ProviderActor` for ``provider`` under ``runtime`` (for a
    :class:`~kova.providers.FallbackProvider`: one actor per provider it holds, each with
    its own pool, cap and gate).

    Returns once the provider is open.

    Args:
        runtime: where the actor runs (see :func:`kova.actors.open_runtime`).
        provider: the provider to serve.
        name: the actor's name; by default ``provider.<provider name>``, made unique (a
            fallback's providers: ``<name>.0``, ``<name>.1``, ...).
        max_in_flight: cap on concurrent requests (``None``: no cap).
        mailbox_size: the actor's mailbox size (default 16).
        retry: the default retry policy of the returned ref (an agent uses its own).
        restart: the child restart type (default ``"permanent"``).
    """
    if max_in_flight is not None and (
        not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool) or max_in_flight < 1
    ):
        raise ValueError(f"max_in_flight must be an int of at least 1, got {max_in_flight!r}")
    members = provider.providers if isinstance(provider, FallbackProvider) else (provider,)
    links: list[_Link] = []
    try:
        for index, member in enumerate(members):
            member_name = name if name is None or len(members) == 1 else f"{name}.{index}"
            actor = await _spawn_one(
                runtime, member, member_name, max_in_flight, mailbox_size, restart
            )
            links.append(_Link(actor, member.name))
    except BaseException:
        for link in links:
            await runtime.stop(link.actor)
        raise
    return ProviderRef(
        ref=links[0].actor,
        provider_name=provider.name,
        retry=retry or RetryConfig(),
        runtime=runtime,
        links=tuple(links),
        fallback_on=provider.falls_back if isinstance(provider, FallbackProvider) else None,
    )


async def _spawn_one(
    runtime: Runtime,
    provider: Provider,
    name: str | None,
    max_in_flight: int | None,
    mailbox_size: int | None,
    restart: RestartType | None,
) -> ActorRef:
    def factory() -> ProviderActor:
        return ProviderActor(provider, max_in_flight=max_in_flight)

    # The supervisor names unnamed children after the factory, adding -2, -3 ... if taken.
    factory.__name__ = f"provider.{provider.name}"
    return await runtime.spawn(factory, name=name, mailbox_size=mailbox_size, restart=restart)
