"""The telemetry of one provider call of a turn: :class:`ModelCall` emits its
ModelCallStarted, ModelFirstToken and ModelCallFinished events, and hands the turn's event
stream and the call's span to the provider ref, so that the provider actor reports each retry
it decides (ModelCallRetrying) and the ref each move to a fallback provider
(ModelCallFallback) on the same stream.

The agent loop builds one per call only when somebody listens to the turn's events; with
nobody listening the loop calls the provider directly and builds no event at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._errors import TurnCancelled
from .._observe import (
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelFirstToken,
    new_span_id,
)

if TYPE_CHECKING:
    from .._models import InferenceConfig, ModelResponse
    from .._observe import Outcome, TurnEmitter
    from ._cost import Pricer
    from ._provider_ref import ProviderRef

__all__ = ["ModelCall", "outcome_of"]


class ModelCall:
    """One observed provider call: its span id, start time and events."""

    __slots__ = (
        "_emitter",
        "_inference",
        "_model",
        "_pricer",
        "_provider",
        "_started",
        "span_id",
    )

    def __init__(
        self,
        emitter: TurnEmitter,
        provider: ProviderRef,
        inference: InferenceConfig,
        model: str | None,
        pricer: Pricer | None = None,
    ) -> None:
        self._pricer = pricer
        self._emitter = emitter
        self._provider = provider
        self._inference = inference
        self._model = model
        self._started = 0.0
        self.span_id = new_span_id()

    def start(self, *, streamed: bool) -> ProviderRef:
        """Emit ModelCallStarted; the provider ref whose retries and fallbacks report to this
        call."""
        emitter, inference = self._emitter, self._inference
        self._started = trio.current_time()
        emitter.emit(
            ModelCallStarted(
                turn_id=emitter.turn_id,
                span_id=self.span_id,
                parent_id=emitter.turn_id,
                time=self._started,
                provider=self._provider.name,
                model=self._model,
                max_tokens=inference.max_tokens,
                temperature=inference.temperature,
                streamed=streamed,
            )
        )
        # Retries (decided in the provider actor) and fallbacks (in this task) go to the
        # same event stream, under this call's span.
        return self._provider.observed(self._emitter, self.span_id)

    def first_token(self) -> None:
        """Emit ModelFirstToken (a streamed call's accumulator calls it once)."""
        now = trio.current_time()
        self._emitter.emit(
            ModelFirstToken(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                latency=now - self._started,
            )
        )

    def finished(self, response: ModelResponse) -> None:
        now = trio.current_time()
        self._emitter.emit(
            ModelCallFinished(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                outcome="ok",
                latency=now - self._started,
                usage=response.usage,
                stop_reason=response.stop_reason.kind.value,
                response_model=response.model,
                response_id=response.id,
            )
        )

    def retrying(self, exc: BaseException, attempt: int, wait: float) -> None:
        """Attempt ``attempt`` failed with ``exc`` and another one follows in ``wait``
        seconds (decided outside the provider actor: Temporal's retry policy): a
        ModelCallRetrying, then the call finished with ``retried``."""
        error_class = getattr(exc, "error_class", None)
        self._emitter.emit(
            ModelCallRetrying(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=trio.current_time(),
                attempt=attempt,
                error_type=type(exc).__name__,
                error_class=None if error_class is None else error_class.value,
                wait=wait,
            )
        )
        self.failed(exc, retried=True)

    def failed(self, exc: BaseException, *, retried: bool = False) -> None:
        now = trio.current_time()
        outcome, error_type = outcome_of(exc)
        self._emitter.emit(
            ModelCallFinished(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                outcome=outcome,
                latency=now - self._started,
                error_type=error_type,
                retried=retried,
            )
        )


def outcome_of(exc: BaseException) -> tuple[Outcome, str | None]:
    """How an exception ends a turn or call: cancelled (trio's, kova's, or the consumer
    leaving the stream) or an error of that type."""
    if isinstance(exc, trio.Cancelled | TurnCancelled | GeneratorExit):
        return "cancelled", None
    return "error", type(exc).__name__
