"""Telemetry: the metrics collector (counters and fixed-bucket latency histograms)."""

from ._metrics import DEFAULT_BOUNDS_MS as DEFAULT_BOUNDS_MS
from ._metrics import Histogram as Histogram
from ._metrics import HistogramSummary as HistogramSummary
from ._metrics import Metrics as Metrics
from ._metrics import MetricsSnapshot as MetricsSnapshot
from ._metrics import ToolOutcome as ToolOutcome
from ._metrics import exponential_bounds as exponential_bounds

__all__ = [
    "DEFAULT_BOUNDS_MS",
    "Histogram",
    "HistogramSummary",
    "Metrics",
    "MetricsSnapshot",
    "ToolOutcome",
    "exponential_bounds",
]
