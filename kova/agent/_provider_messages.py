"""What the provider actor and its callers exchange.

The actor (``_provider_actor``) publishes one :class:`Admission` per incarnation: the
provider it holds open, the in-flight cap, the rate-limit gate and the retry decision, which
callers pass through before and after each attempt. A caller (``_provider_ref``) asks for it
once (:class:`GetAdmission`), runs its attempts in its own task, and hands each failed
attempt to it (:meth:`Admission.failed`: the gate closes on a rate limit, and the caller's
retry policy says whether and when to try again), in its own task: a failure costs no
mailbox round trip. So does a rate limit that arrives after a stream's content began
(:meth:`Admission.rate_limited`). A stream's caller ends up with a :class:`StreamLease`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from .._errors import KovaError, ProviderError, RateLimited
from .._log import get_logger
from .._observe import ModelCallRetrying
from .._record import Record
from ..actors import Call

if TYPE_CHECKING:
    from .._models import StreamEvent
    from .._observe import TurnEmitter
    from ..providers import EventBatches, Provider
    from ._retry import RetryConfig

__all__ = ["Admission", "GetAdmission", "StreamLease"]

log = get_logger("kova.agent._provider_actor")
"""The actor's logger: the gate and the retries are its policy, wherever they run."""


class Admission:
    """What one incarnation of a provider actor publishes to its callers.

    The actor writes it (the gate, on its own task); callers only pass through it, with
    :meth:`enter` before each attempt and :meth:`leave` after it, the way tasks share a
    :class:`trio.CapacityLimiter`:

    - ``provider``: the provider the actor holds open (``open()`` entered for the
      incarnation's life). A provider is safe to call from many tasks at once while open, so
      each caller sends its own request from its own task; it never opens or closes it.
    - the in-flight cap: at most ``max_in_flight`` attempts (a stream for its whole life)
      hold a slot of the actor's limiter, borrowed on the attempt's behalf;
    - the rate-limit gate: until :attr:`paused_until` (trio time) no attempt starts. A
      caller that may retry waits for it (it is never closed for longer than the caller's
      ``max_retry_after``: see :meth:`enter`); a caller whose retries are off, or whose bound
      is shorter than the time left, fails at once with :class:`~kova.RateLimited`.

    With no cap and the gate open, :meth:`enter` returns without a checkpoint: admission
    costs no scheduler pass. ``closed`` turns true when the incarnation ends (callers then
    ask the actor for the next one); its orderly stop waits until every admitted attempt left.
    """

    __slots__ = (
        "_claimed_until",
        "_drained",
        "_limiter",
        "actor",
        "closed",
        "in_flight",
        "name",
        "paused_until",
        "provider",
    )

    def __init__(self, provider: Provider, max_in_flight: int | None, actor: str = "") -> None:
        self.provider = provider
        self.name = provider.name
        self.actor = actor
        """The name of the actor that published it (for its log lines)."""
        self._limiter = trio.CapacityLimiter(max_in_flight) if max_in_flight else None
        self.paused_until = -math.inf
        """Trio time before which no attempt starts (``-inf``: never paused)."""
        self._claimed_until = -math.inf
        """Until when the rate limits seen asked to wait (each bounded by its caller's
        ``max_retry_after``): another rate limit before then confirms them."""
        self.in_flight = 0
        self.closed = False
        self._drained: trio.Event | None = None

    # -- the caller's side --------------------------------------------------------------

    async def enter(self, retry: RetryConfig) -> object:
        """Wait for a slot, then for the gate; the borrower token to :meth:`leave` with.

        Raises:
            RateLimited: the gate is closed and ``retry`` does not wait that long (retries
                off, or more time left than its ``max_retry_after``); ``retry_after`` is the
                time left.
        """
        limiter = self._limiter
        token: object = None
        if limiter is not None:
            token = object()
            try:
                limiter.acquire_on_behalf_of_nowait(token)
            except trio.WouldBlock:
                await limiter.acquire_on_behalf_of(token)
        self.in_flight += 1
        try:
            # Re-checked after every wake-up: another rate limit may have pushed it further.
            while self.paused_until > -math.inf:
                left = self.paused_until - trio.current_time()
                if left <= 0:
                    break
                if retry.max_retries == 0 or left > retry.max_retry_after:
                    raise RateLimited(
                        "the rate-limit gate is closed after an earlier rate limit",
                        provider=self.name,
                        retry_after=left,
                    )
                await trio.sleep(left)
        except BaseException:
            self.leave(token)
            raise
        return token

    def leave(self, token: object) -> None:
        """The attempt admitted with ``token`` is over (whatever its outcome)."""
        self.in_flight -= 1
        if token is not None:
            assert self._limiter is not None
            self._limiter.release_on_behalf_of(token)
        if self.in_flight == 0 and self._drained is not None:
            self._drained.set()

    def failed(
        self,
        error: KovaError,
        tries: int,
        retry: RetryConfig,
        telemetry: tuple[TurnEmitter, int] | None = None,
    ) -> float | None:
        """An attempt failed with ``error`` after ``tries`` earlier failures: the gate closes
        on a rate limit, and ``retry`` decides. The delay before the next attempt, or
        ``None``: give up (also once the incarnation has ended). With ``telemetry`` (the
        turn's event stream and the model call's span id) a retry is reported there as a
        ``ModelCallRetrying``."""
        if isinstance(error, RateLimited) and error.retry_after is not None:
            self.rate_limited(error.retry_after, retry)
        if self.closed or not retry.should_retry(tries, error):
            return None
        delay = retry.delay(tries, error)
        error_class = error.error_class.value if isinstance(error, ProviderError) else None
        # info: retrying is the policy working (ModelCallRetrying carries it too); the
        # error the host must act on is the one raised when the retries run out.
        log.info(
            "provider.request.retrying",
            provider=self.name,
            attempt=tries + 1,
            delay=delay,
            error_class=error_class,
            error=str(error),
        )
        if telemetry is not None:  # the turn's event stream (its subscribers never raise here)
            emitter, span_id = telemetry
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

    def rate_limited(self, retry_after: float, retry: RetryConfig) -> None:
        """A rate limit asked to wait ``retry_after`` seconds (an attempt's, or a stream's
        after its content began, which is never retried): the gate closes (:meth:`pause`)
        so every caller of the provider backs off."""
        if self.pause(retry_after, retry):
            log.info(
                "provider.rate_limit.paused",
                provider=self.name,
                actor=self.actor,
                retry_after=retry_after,
                paused_for=self.paused_until - trio.current_time(),
            )

    def pause(self, retry_after: float, retry: RetryConfig) -> bool:
        """A rate limit asked to wait ``retry_after`` seconds: close the gate (never
        shortening a longer pause); whether it moved.

        One rate limit is not believed past ``retry.max_unconfirmed_pause``: a hostile or
        mistaken server would otherwise hold every caller of the provider for
        ``max_retry_after``. A second one while the first one's delay has not passed
        confirms it: the gate closes for up to ``retry.max_retry_after``.
        """
        if not retry_after > 0:  # now, or NaN: nothing to close the gate for
            return False
        now = trio.current_time()
        bound = retry.max_retry_after
        confirmed = now < self._claimed_until
        self._claimed_until = max(self._claimed_until, now + min(retry_after, bound))
        if not confirmed:
            bound = min(bound, retry.max_unconfirmed_pause)
        until = now + min(retry_after, bound)
        if until <= self.paused_until:
            return False
        self.paused_until = until
        return True

    async def close(self, *, drain: bool) -> None:
        """No new attempt through this admission; with ``drain``, wait for the admitted ones
        to leave."""
        self.closed = True
        if drain and self.in_flight:
            self._drained = trio.Event()
            await self._drained.wait()


class GetAdmission(Record, Call[Admission]):
    """Call: the actor's current :class:`Admission` (answered at once)."""


class StreamLease(Record):
    """What a stream's caller holds: the first batch with content (and any usage-only
    batches before it) and the rest of that one response's batches, read in the caller's
    task."""

    first: tuple[StreamEvent, ...]
    rest: EventBatches

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__
