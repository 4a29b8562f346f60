"""The provider actor: one supervised actor per provider instance.

It owns the provider's resources (``provider.open()``: the HTTP client and its connection
pool) for the life of each incarnation, and the policy every request passes:

1. **concurrency cap**: at most ``max_in_flight`` attempts at once (a stream for its whole
   life), slots of a :class:`trio.CapacityLimiter` borrowed on each attempt's behalf;
2. **rate-limit gate**: after a rate limit carrying ``retry_after`` (an HTTP 429, Gemini's
   ``RetryInfo``, a rate-limit event inside a stream), no attempt of any kind starts until
   that time has passed, so the callers sharing a provider back off together instead of
   stampeding. One rate limit closes it for at most the failing request's
   :attr:`~kova.agent.RetryConfig.max_unconfirmed_pause` (5 s), a second one within the
   first one's delay for up to its :attr:`~kova.agent.RetryConfig.max_retry_after`; a caller
   that would not wait that long fails at once;
3. **retries**: the actor decides, for each failed attempt reported to it
   (:class:`~._provider_messages.AttemptFailed`), whether and when the request is tried again
   (:class:`~kova.agent.RetryConfig`; the provider's ``retry_after`` wins over the backoff),
   and puts a ``ModelCallRetrying`` on the turn's event stream when the request carries one.

**One path.** The caller's task does the I/O, always: the actor publishes an
:class:`~._provider_messages.Admission` (the provider it holds open, the cap, the gate) and
each caller (:class:`~kova.agent.ProviderRef`) enters it, sends its request, and reports a
failure back. With no cap and the gate open, entering costs no scheduler pass; the actor
hears only of failures. One retry loop serves calls (completions, token counts, model
lists) and one "until the first content" loop serves streams, both in ``_provider_ref``.

**Whose failure is it.** A request's failure, whatever raised it, is its caller's: a
provider that raises something unexpected (a bug, a value it cannot encode) fails that one
request, logged once, in the caller's task; the actor and the other callers never see it.
The actor crashes (and its supervisor restarts it, reopening the provider) only for its own
faults, such as ``provider.open()`` failing. A restarted actor publishes a new admission,
which callers fetch on their next request.

**Stopping.** An orderly stop closes the admission (new requests get
:class:`~kova.MailboxClosed`) and waits for the admitted attempts, streams included, to
finish before the provider is closed; a crash does not wait.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from .._errors import ProviderError, RateLimited
from .._log import get_logger
from .._observe import ModelCallRetrying
from ..actors import LATER, Actor, UnknownMessage
from ._provider_messages import Admission, AttemptFailed, GetAdmission, RateLimitObserved

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    from .._errors import KovaError
    from .._observe import TurnEmitter
    from ..providers import Provider
    from ._retry import RetryConfig

__all__ = ["ProviderActor"]

log = get_logger(__name__)


class ProviderActor(Actor):
    """Serves one provider to many callers.

    Args:
        provider: any :class:`~kova.providers.Provider`; its ``open()`` is entered for the
            actor's lifetime (a restart reopens it).
        max_in_flight: at most this many attempts (streams included, for their whole
            duration) run at once; further ones wait their turn. ``None``: no cap.
    """

    concurrent: ClassVar[bool] = True

    def __init__(self, provider: Provider, *, max_in_flight: int | None = None) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self._provider = provider
        self._max_in_flight = max_in_flight
        self._admission: Admission | None = None

    @property
    def paused_until(self) -> float:
        """The trio time before which no attempt starts (``-inf`` if none)."""
        admission = self._admission
        return -float("inf") if admission is None else admission.paused_until

    def resources(self) -> AbstractAsyncContextManager[None]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[None]:
        async with self._provider.open():
            admission = self._admission = Admission(self._provider, self._max_in_flight)
            try:
                yield
            finally:
                # An orderly stop lets the admitted attempts finish on the open provider;
                # a crash (or a cancelled stop) does not wait for them.
                state = self._kova_state
                orderly = state is not None and state.crash is None
                await admission.close(drain=orderly)

    def handle_now(self, message: Any) -> Any:
        match message:
            case GetAdmission():
                return self._admission
            case AttemptFailed(error=error, tries=tries, retry=retry, telemetry=telemetry):
                return self._after_failure(error, tries, retry, telemetry)
            case _:
                return LATER

    async def handle_call(self, message: Any) -> Any:
        raise UnknownMessage(self.name, message)

    async def handle_cast(self, message: Any) -> None:
        match message:
            case RateLimitObserved(retry_after=retry_after, retry=retry):
                self._pause(retry_after, retry)
            case _:
                raise UnknownMessage(self.name, message, kind="cast")

    # -- policies -----------------------------------------------------------------------

    def _after_failure(
        self,
        error: KovaError,
        tries: int,
        retry: RetryConfig,
        telemetry: tuple[TurnEmitter, int] | None,
    ) -> float | None:
        """Record a failed attempt; the delay before the next one, or ``None``: give up."""
        if isinstance(error, RateLimited) and error.retry_after is not None:
            self._pause(error.retry_after, retry)
        if not retry.should_retry(tries, error):
            return None
        delay = retry.delay(tries, error)
        # info: retrying is the policy working (ModelCallRetrying carries it too); the
        # error the host must act on is the one raised when the retries run out.
        log.info(
            "provider.request.retrying",
            provider=self._provider.name,
            attempt=tries + 1,
            delay=delay,
            error_class=error.error_class.value if isinstance(error, ProviderError) else None,
            error=str(error),
        )
        if telemetry is not None:  # the turn's event stream (its subscribers never raise here)
            emitter, span_id = telemetry
            error_class = error.error_class.value if isinstance(error, ProviderError) else None
            emitter.emit(
                ModelCallRetrying(
                    turn_id=emitter.turn_id,
                    span_id=span_id,
                    time=trio.current_time(),
                    attempt=tries + 1,
                    error_type=type(error).__name__,
                    error_class=error_class,
                    wait=delay,
                )
            )
        return delay

    def _pause(self, retry_after: float, retry: RetryConfig) -> None:
        admission = self._admission
        if admission is not None and admission.pause(retry_after, retry):
            log.info(
                "provider.rate_limit.paused",
                provider=self._provider.name,
                actor=self.name,
                retry_after=retry_after,
                paused_for=admission.paused_until - trio.current_time(),
            )
