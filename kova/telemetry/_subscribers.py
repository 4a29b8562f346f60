"""Subscribers kova ships: the metrics collector's adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._observe import (
    ModelCallFallback,
    ModelCallFinished,
    ModelCallRetrying,
    TelemetryEvent,
    ToolFinished,
)

if TYPE_CHECKING:
    from ._collector import MetricsCollector

__all__ = ["MetricsSubscriber"]


class MetricsSubscriber:
    """Feeds a :class:`~kova.telemetry.MetricsCollector` from the event stream.

    Every failed provider attempt counts one error (a retried one included, as the seed's
    ``record_llm_error`` does, and one a fallback provider took over from); a call that
    returned counts one request with its latency (on trio's clock, retries included) and
    usage; every tool call that ended counts one
    invocation with its outcome (denied calls without a duration). Cancelled calls are not
    counted. The collector never waits, so neither does this.
    """

    __slots__ = ("_collector",)

    def __init__(self, collector: MetricsCollector) -> None:
        self._collector = collector

    def on_event(self, event: TelemetryEvent) -> None:
        """Record ``event`` if it is one the collector counts."""
        match event:
            case ModelCallFinished(outcome="ok", latency=latency, usage=usage):
                self._collector.record_llm_request(latency * 1000.0, usage)
            case ModelCallFinished(outcome="error", retried=False) | ModelCallRetrying():
                self._collector.record_llm_error()
            case ModelCallFallback(error_type=str()):  # the provider before it failed
                self._collector.record_llm_error()
            case ToolFinished(outcome=outcome, duration=duration) if outcome != "cancelled":
                self._collector.record_tool_invocation(
                    None if duration is None else duration * 1000.0, outcome
                )
            case _:
                pass
