"""The provider actor's messages, and the leases it hands out.

Commands the actor serves (:class:`ChatCompletion`, :class:`LeaseCall`, :class:`OpenStream`,
:class:`LeaseStream`, :class:`CountTokens`, :class:`ListModels`), the reports a caller sends
back about an attempt it ran itself (:class:`AttemptFailed`, :class:`AttemptCrashed`,
:class:`RateLimitObserved`), and what an admitted caller receives (:class:`CallLease`,
:class:`StreamGrant`, :class:`StreamLease`). The actor is in ``_provider_actor``, the caller
side (:class:`~kova.agent.ProviderRef`) in ``_provider_ref``; see ``_provider_actor`` for
what a lease may touch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import trio

from .._errors import KovaError
from .._record import Record
from ..actors import Call
from ._retry import RetryConfig

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from contextlib import AbstractAsyncContextManager

    from .._models import (
        ChatRequest,
        ModelInfo,  # noqa: F401 (named in ListModels' Call[...] string)
        ModelResponse,
        StreamEvent,
    )
    from ..providers import EventBatches

__all__ = [
    "AttemptCrashed",
    "AttemptFailed",
    "CallLease",
    "ChatCompletion",
    "CountTokens",
    "ErrorHook",
    "LeaseCall",
    "LeaseStream",
    "ListModels",
    "OpenStream",
    "RateLimitObserved",
    "RetryHook",
    "StreamGrant",
    "StreamLease",
]

ErrorHook: TypeAlias = Callable[[KovaError], None]
"""Called in the actor for every failed attempt of a request, retried or not (the metrics
hook: ``MetricsCollector.record_llm_error``). It must not block or raise."""

RetryHook: TypeAlias = Callable[[int, KovaError, float], None]
"""Called in the actor when the retry policy decides to try a request again, with the
attempt that failed (1 for the first), its error and the wait before the next attempt. The
agent's telemetry uses it to put ``ModelCallRetrying`` on the turn's event stream. Only
values cross: the actor's limiter, gate and provider stay its own. It must not block or
raise; ``None`` (nobody listens) costs nothing."""


_DEFAULT_RETRY = RetryConfig()  # a frozen value: one serves every message


class _Completion(Record):
    """The fields of a completion request to the actor. ``tries`` counts the attempts already
    failed (for the retry policy)."""

    request: ChatRequest
    retry: RetryConfig = _DEFAULT_RETRY
    on_error: ErrorHook | None = None
    on_retry: RetryHook | None = None
    tries: int = 0


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

    error: KovaError
    tries: int
    retry: RetryConfig = _DEFAULT_RETRY
    on_error: ErrorHook | None = None
    on_retry: RetryHook | None = None


class AttemptCrashed(Record, Call[None]):
    """Call: a leased attempt raised something that is not a request error (a provider bug).
    The actor crashes with it, as if its own task had raised it; the caller gets
    :class:`~kova.ActorFailed`."""

    error: Exception


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

    request: ChatRequest


class StreamGrant(_Admission):
    """A stream admitted at once: ``open()`` is the provider's stream of that one request.
    What it may touch: that one response (see :class:`_Admission`)."""

    __slots__ = ("open",)

    def __init__(self, open: Callable[[], AbstractAsyncContextManager[EventBatches]]) -> None:
        super().__init__()
        self.open = open


class CountTokens(Record, Call[int]):
    """Call: prompt tokens for a request."""

    request: ChatRequest
    retry: RetryConfig = _DEFAULT_RETRY
    on_error: ErrorHook | None = None


class ListModels(Record, Call["list[ModelInfo]"]):
    """Call: the provider's models."""

    retry: RetryConfig = _DEFAULT_RETRY
    on_error: ErrorHook | None = None


class RateLimitObserved(Record):
    """Cast: a leased stream was rate limited after its content began; pause new requests
    for ``retry_after`` seconds."""

    retry_after: float


class StreamLease(Record):
    """What a stream's caller receives: the first batch with content (and any usage-only
    batches before it) and the rest of that one response's batches. See ``_provider_actor``
    for what a lease may touch."""

    first: tuple[StreamEvent, ...]
    rest: EventBatches

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__
