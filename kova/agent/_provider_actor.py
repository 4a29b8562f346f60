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
3. **retries**: the admission decides, for each failed attempt handed to it
   (:meth:`~._provider_messages.Admission.failed`, in the caller's task: no mailbox round
   trip), whether and when the request is tried again (:class:`~kova.agent.RetryConfig`; the
   provider's ``retry_after`` wins over the backoff), and puts a ``ModelCallRetrying`` on the
   turn's event stream when the request carries one.

**One path.** The caller's task does the I/O, always: the actor publishes an
:class:`~._provider_messages.Admission` (the provider it holds open, the cap, the gate) and
each caller (:class:`~kova.agent.ProviderRef`) enters it, sends its request, and hands a
failure to it. With no cap and the gate open, entering costs no scheduler pass; the actor
hears of nothing but a request for the admission of its current incarnation. One retry loop
serves calls (completions, token counts, model lists) and one "until the first content"
loop serves streams, both in ``_provider_ref``.

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

from ..actors import LATER, Actor
from ._provider_messages import Admission, GetAdmission

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    from ..providers import Provider

__all__ = ["ProviderActor"]


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
            admission = Admission(self._provider, self._max_in_flight, actor=self.name)
            self._admission = admission
            try:
                yield
            finally:
                # An orderly stop lets the admitted attempts finish on the open provider;
                # a crash (or a cancelled stop) does not wait for them.
                state = self._kova_state
                orderly = state is not None and state.crash is None
                await admission.close(drain=orderly)

    def handle_now(self, message: Any) -> Any:
        if type(message) is GetAdmission:
            return self._admission
        return LATER
