"""Telemetry: one typed event stream for everything kova does, its subscribers (the
metrics collector, OpenTelemetry, your own), and :class:`TelemetryConfig`.

See ``docs/telemetry.md``.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from .._observe import ActorRestarted as ActorRestarted
from .._observe import GuardFinished as GuardFinished
from .._observe import GuardStarted as GuardStarted
from .._observe import McpRequestFinished as McpRequestFinished
from .._observe import McpRequestStarted as McpRequestStarted
from .._observe import ModelCallFallback as ModelCallFallback
from .._observe import ModelCallFinished as ModelCallFinished
from .._observe import ModelCallRetrying as ModelCallRetrying
from .._observe import ModelCallStarted as ModelCallStarted
from .._observe import ModelFirstToken as ModelFirstToken
from .._observe import Outcome as Outcome
from .._observe import Subscriber as Subscriber
from .._observe import Subscription as Subscription
from .._observe import SupervisorGaveUp as SupervisorGaveUp
from .._observe import TelemetryEvent as TelemetryEvent
from .._observe import TelemetryHub as TelemetryHub
from .._observe import ToolExecutionStarted as ToolExecutionStarted
from .._observe import ToolFinished as ToolFinished
from .._observe import ToolOutcome as ToolOutcome
from .._observe import ToolStarted as ToolStarted
from .._observe import TurnFinished as TurnFinished
from .._observe import TurnStarted as TurnStarted

__all__ = [
    "ActorRestarted",
    "DEFAULT_BOUNDS_MS",
    "ExporterConfig",
    "GuardFinished",
    "GuardStarted",
    "Histogram",
    "HistogramSummary",
    "McpRequestFinished",
    "McpRequestStarted",
    "Metrics",
    "MetricsCollector",
    "MetricsSnapshot",
    "MetricsSubscriber",
    "ModelCallFallback",
    "ModelCallFinished",
    "ModelCallRetrying",
    "ModelCallStarted",
    "ModelFirstToken",
    "OtlpProtocol",
    "Outcome",
    "Subscriber",
    "Subscription",
    "SupervisorGaveUp",
    "TelemetryConfig",
    "TelemetryConfigBuilder",
    "TelemetryEvent",
    "TelemetryHandle",
    "TelemetryHub",
    "ToolExecutionStarted",
    "ToolFinished",
    "ToolOutcome",
    "ToolStarted",
    "TurnFinished",
    "TurnStarted",
    "exponential_bounds",
    "open_metrics",
]

if _TYPE_CHECKING:
    from ._collector import MetricsCollector as MetricsCollector
    from ._collector import open_metrics as open_metrics
    from ._config import ExporterConfig as ExporterConfig
    from ._config import OtlpProtocol as OtlpProtocol
    from ._config import TelemetryConfig as TelemetryConfig
    from ._config import TelemetryConfigBuilder as TelemetryConfigBuilder
    from ._config import TelemetryHandle as TelemetryHandle
    from ._metrics import DEFAULT_BOUNDS_MS as DEFAULT_BOUNDS_MS
    from ._metrics import Histogram as Histogram
    from ._metrics import HistogramSummary as HistogramSummary
    from ._metrics import Metrics as Metrics
    from ._metrics import MetricsSnapshot as MetricsSnapshot
    from ._metrics import exponential_bounds as exponential_bounds
    from ._subscribers import MetricsSubscriber as MetricsSubscriber

# The metrics collector, its subscriber and TelemetryConfig load on first use: an agent
# program that never collects metrics or installs telemetry does not pay for them at import
# (the events and the hub above are what every agent needs).
_LAZY = {
    "MetricsCollector": "._collector",
    "open_metrics": "._collector",
    "ExporterConfig": "._config",
    "OtlpProtocol": "._config",
    "TelemetryConfig": "._config",
    "TelemetryConfigBuilder": "._config",
    "TelemetryHandle": "._config",
    "DEFAULT_BOUNDS_MS": "._metrics",
    "Histogram": "._metrics",
    "HistogramSummary": "._metrics",
    "Metrics": "._metrics",
    "MetricsSnapshot": "._metrics",
    "exponential_bounds": "._metrics",
    "MetricsSubscriber": "._subscribers",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
