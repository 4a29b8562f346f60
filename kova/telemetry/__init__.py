"""Telemetry: the metrics collector (counters and fixed-bucket latency histograms)."""

from ._collector import DEFAULT_METRICS_MAILBOX_SIZE as DEFAULT_METRICS_MAILBOX_SIZE
from ._collector import GetSnapshot as GetSnapshot
from ._collector import LlmErrorRecorded as LlmErrorRecorded
from ._collector import LlmRequestRecorded as LlmRequestRecorded
from ._collector import MetricsActor as MetricsActor
from ._collector import MetricsCollector as MetricsCollector
from ._collector import ToolInvocationRecorded as ToolInvocationRecorded
from ._collector import open_metrics as open_metrics
from ._metrics import DEFAULT_BOUNDS_MS as DEFAULT_BOUNDS_MS
from ._metrics import Histogram as Histogram
from ._metrics import HistogramSummary as HistogramSummary
from ._metrics import Metrics as Metrics
from ._metrics import MetricsSnapshot as MetricsSnapshot
from ._metrics import ToolOutcome as ToolOutcome
from ._metrics import exponential_bounds as exponential_bounds

__all__ = [
    "DEFAULT_BOUNDS_MS",
    "DEFAULT_METRICS_MAILBOX_SIZE",
    "GetSnapshot",
    "Histogram",
    "HistogramSummary",
    "LlmErrorRecorded",
    "LlmRequestRecorded",
    "Metrics",
    "MetricsActor",
    "MetricsCollector",
    "MetricsSnapshot",
    "ToolInvocationRecorded",
    "ToolOutcome",
    "exponential_bounds",
    "open_metrics",
]
