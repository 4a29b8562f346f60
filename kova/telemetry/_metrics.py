"""Metrics state: counters and fixed-bucket histograms, in constant memory.

:class:`Metrics` is plain synchronous state with a single owner. In an application it lives
inside the metrics actor behind :class:`~kova.telemetry.MetricsCollector`, fed by casts; it
can also be used directly wherever one task owns it (a benchmark, a test).

Histograms keep a fixed array of bucket counts plus count, sum, min and max, never the
samples, so memory does not grow with the number of requests. Percentiles are estimated by
linear interpolation inside the bucket that holds the wanted rank.

Accuracy of the estimates. Let the ``q``-quantile be the ``ceil(q * count)``-th smallest
recorded value. The estimate always lies in the same bucket as that value, clamped to the
observed ``[min, max]``, so it is off by at most the bucket's width. The default buckets grow
geometrically by a factor of ``2 ** (1 / 8)`` from 0.01 ms, so above 0.01 ms the error is at
most ``2 ** (1 / 8) - 1``, about 9.1 %, of the true value; below 0.01 ms at most 0.01 ms.
Values above the last bound (about 3 hours) share one overflow bucket whose upper edge is the
maximum seen; estimates there are only bounded by ``[last bound, max]``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from decimal import Decimal
from typing import TYPE_CHECKING

from .._models import Usage
from .._observe import ToolOutcome
from .._record import Record

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_BOUNDS_MS",
    "Histogram",
    "HistogramSummary",
    "Metrics",
    "MetricsSnapshot",
    "ToolOutcome",
    "exponential_bounds",
]


def exponential_bounds(*, start: float, factor: float, count: int) -> tuple[float, ...]:
    """``count`` bucket upper bounds ``start, start * factor, start * factor ** 2, ...``.

    The relative error of a percentile estimate is at most ``factor - 1`` (see the module
    docstring).

    Raises:
        ValueError: ``start <= 0``, ``factor <= 1`` or ``count < 1``.
    """
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("need start > 0, factor > 1 and count >= 1")
    return tuple(start * factor**index for index in range(count))


DEFAULT_BOUNDS_MS = exponential_bounds(start=0.01, factor=2 ** (1 / 8), count=240)
"""Eight buckets per doubling from 0.01 ms to about 1.07e7 ms (3 hours), plus overflow."""


class HistogramSummary(Record):
    """A histogram at one moment: count, sum, extremes and percentile estimates.

    The extremes and statistics are ``None`` while nothing has been recorded.
    """

    count: int = 0
    sum: float = 0.0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class Histogram:
    """Counts of values in fixed buckets, with count, sum, min and max.

    Bucket ``i`` holds values in ``(bounds[i - 1], bounds[i]]`` (the first from 0), and one
    more bucket holds everything above the last bound. Negative values count as 0.

    Mutable state with one owner (a plain slotted class). Two histograms are equal when they
    have the same bounds and have recorded the same counts and extremes.

    Args:
        bounds: the buckets' upper bounds, positive and strictly increasing.

    Raises:
        ValueError: ``bounds`` is empty, not positive or not strictly increasing.
    """

    __slots__ = ("_counts", "bounds", "count", "max", "min", "sum")

    bounds: tuple[float, ...]
    """The buckets' upper bounds (the overflow bucket has none)."""
    count: int
    """How many values were recorded."""
    sum: float
    min: float
    """The smallest value recorded (``inf`` while empty)."""
    max: float
    """The largest value recorded (``-inf`` while empty)."""

    def __init__(self, bounds: Iterable[float] = DEFAULT_BOUNDS_MS) -> None:
        checked = tuple(float(value) for value in bounds)
        if not checked:
            raise ValueError("a histogram needs at least one bucket bound")
        if checked[0] <= 0 or any(low >= high for low, high in itertools.pairwise(checked)):
            raise ValueError("histogram bounds must be positive and strictly increasing")
        self.bounds = checked
        self._counts = [0] * (len(checked) + 1)
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf

    def _key(self) -> tuple[object, ...]:
        return (self.bounds, self._counts, self.count, self.sum, self.min, self.max)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Histogram)
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable: equal histograms may differ later

    def __repr__(self) -> str:
        return (
            f"Histogram(count={self.count}, sum={self.sum!r}, min={self.min!r}, "
            f"max={self.max!r}, buckets={len(self._counts)})"
        )

    @property
    def bucket_count(self) -> int:
        """The number of buckets (the bounds plus overflow); fixed for the histogram's life."""
        return len(self._counts)

    def bucket_counts(self) -> tuple[int, ...]:
        """The count of every bucket, the overflow bucket last."""
        return tuple(self._counts)

    def record(self, value: float) -> None:
        """Add one value.

        Raises:
            ValueError: ``value`` is NaN.
        """
        if math.isnan(value):
            raise ValueError("cannot record NaN")
        value = max(value, 0.0)
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self.count += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def quantile(self, q: float) -> float | None:
        """The estimated ``q``-quantile (``0 < q <= 1``), ``None`` when empty.

        Raises:
            ValueError: ``q`` is outside ``(0, 1]``.
        """
        if not 0 < q <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {q}")
        if self.count == 0:
            return None
        rank = max(1, math.ceil(q * self.count - 1e-9))  # 1-based; the epsilon absorbs 0.9*10
        below = 0
        for index, in_bucket in enumerate(self._counts):
            if in_bucket and below + in_bucket >= rank:
                lower = self.bounds[index - 1] if index > 0 else 0.0
                upper = self.bounds[index] if index < len(self.bounds) else self.max
                lower = max(lower, self.min)
                upper = min(upper, self.max)
                estimate = lower + (upper - lower) * ((rank - below) / in_bucket)
                return min(estimate, upper)  # rounding must not step past the bucket's top
            below += in_bucket
        raise AssertionError("bucket counts do not add up to count")  # pragma: no cover

    def summary(self) -> HistogramSummary:
        """The current :class:`HistogramSummary`."""
        if self.count == 0:
            return HistogramSummary()
        return HistogramSummary(
            count=self.count,
            sum=self.sum,
            min=self.min,
            max=self.max,
            mean=self.sum / self.count,
            p50=self.quantile(0.5),
            p90=self.quantile(0.9),
            p99=self.quantile(0.99),
        )


_NO_SAMPLES = HistogramSummary()


class MetricsSnapshot(Record):
    """All metrics at one moment. A frozen value: safe to keep, compare and pass around."""

    llm_request_count: int = 0
    """Provider calls that returned a response (failed ones count in ``error_count``)."""
    error_count: int = 0
    """Provider calls that failed."""
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    """The providers' own totals, summed (normally input plus output)."""
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Decimal = Decimal(0)
    """USD of the provider calls that had a known price (docs/cost.md)."""
    unpriced_llm_request_count: int = 0
    """Provider calls that reported tokens but had no known price (not in ``cost``)."""
    tool_success_count: int = 0
    tool_error_count: int = 0
    tool_denied_count: int = 0
    llm_latency_ms: HistogramSummary = _NO_SAMPLES
    """Latency of successful provider calls, in milliseconds."""
    tool_duration_ms: HistogramSummary = _NO_SAMPLES
    """Duration of tool calls that ran (denied calls have none), in milliseconds."""
    dropped_records: int = 0
    """Records lost because the metrics actor's mailbox was full or closed."""

    @property
    def tool_invocation_count(self) -> int:
        """Tool calls of every outcome, denied ones included."""
        return self.tool_success_count + self.tool_error_count + self.tool_denied_count


class Metrics:
    """Counters and histograms for LLM requests and tool calls. Single owner, synchronous.

    Args:
        latency_bounds: bucket bounds (ms) of the LLM latency histogram.
        duration_bounds: bucket bounds (ms) of the tool duration histogram.
    """

    __slots__ = (
        "_cost",
        "_llm_errors",
        "_llm_latency",
        "_llm_requests",
        "_tool_duration",
        "_tools",
        "_unpriced",
        "_usage",
    )

    def __init__(
        self,
        *,
        latency_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
        duration_bounds: Sequence[float] = DEFAULT_BOUNDS_MS,
    ) -> None:
        self._llm_latency = Histogram(latency_bounds)
        self._tool_duration = Histogram(duration_bounds)
        self._llm_requests = 0
        self._llm_errors = 0
        self._usage = Usage()
        self._cost = Decimal(0)
        self._unpriced = 0
        self._tools: dict[ToolOutcome, int] = dict.fromkeys(ToolOutcome, 0)

    def record_llm_request(self, latency_ms: float, usage: Usage | None = None) -> None:
        """One provider call that returned, with its latency and token usage.

        Raises:
            ValueError: ``latency_ms`` is NaN.
        """
        self._llm_latency.record(latency_ms)
        self._llm_requests += 1
        if usage is not None:
            self._usage = self._usage + usage
            cost = usage.cost
            if cost is not None:
                self._cost += cost
            elif usage.total_tokens or usage.input_tokens or usage.output_tokens:
                self._unpriced += 1

    def record_llm_error(self) -> None:
        """One provider call that failed."""
        self._llm_errors += 1

    def record_tool_invocation(self, duration_ms: float | None, outcome: ToolOutcome | str) -> None:
        """One tool call and how it ended.

        Args:
            duration_ms: how long it ran; ``None`` when it did not run (denied).
            outcome: success, error or denied (a :class:`ToolOutcome` or its value).

        Raises:
            ValueError: ``duration_ms`` is NaN, or ``outcome`` is not an outcome.
        """
        if duration_ms is not None:
            self._tool_duration.record(duration_ms)
        self._tools[ToolOutcome(outcome)] += 1

    def snapshot(self) -> MetricsSnapshot:
        """Everything recorded so far, as a frozen value."""
        usage = self._usage
        return MetricsSnapshot(
            llm_request_count=self._llm_requests,
            error_count=self._llm_errors,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cost=self._cost,
            unpriced_llm_request_count=self._unpriced,
            tool_success_count=self._tools[ToolOutcome.SUCCESS],
            tool_error_count=self._tools[ToolOutcome.ERROR],
            tool_denied_count=self._tools[ToolOutcome.DENIED],
            llm_latency_ms=self._llm_latency.summary(),
            tool_duration_ms=self._tool_duration.summary(),
        )
