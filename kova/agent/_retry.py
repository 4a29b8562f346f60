"""Retry policy for provider calls: exponential backoff, jitter, and the provider's
``retry_after`` winning over the computed delay."""

from __future__ import annotations

import random

from .._errors import KovaError, ProviderError
from .._record import Record

__all__ = ["RetryConfig"]


def _non_negative(name: str, value: float) -> float:
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    return value


class RetryConfig(Record):
    """How the agent retries a failed provider call.

    Only retryable errors (:attr:`kova.KovaError.is_retryable`: rate limits, overload,
    connection errors, timeouts) are retried. The delay before retry ``n`` (0-based) is
    ``min(max_backoff, initial_backoff * multiplier**n)``, shortened by up to ``jitter`` of
    itself at random; a ``retry_after`` the provider sent replaces it exactly. A stream is never
    retried once any of its content has reached the consumer.
    """

    max_retries: int = 2
    """Retries after the first attempt (0 disables retrying)."""
    initial_backoff: float = 0.5
    """Seconds before the first retry."""
    multiplier: float = 2.0
    """Each retry waits this many times longer than the one before."""
    max_backoff: float = 30.0
    """The longest computed wait in seconds (a server's ``retry_after`` is used as sent)."""
    jitter: float = 0.0
    """Fraction (0..1) by which each delay may be shortened at random, to spread retries."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"'max_retries' must be >= 0: {self.max_retries}")
        for name in ("initial_backoff", "multiplier", "max_backoff", "jitter"):
            _non_negative(name, getattr(self, name))
        if self.jitter > 1:
            raise ValueError(f"jitter is a fraction between 0 and 1, got {self.jitter}")

    @classmethod
    def disabled(cls) -> RetryConfig:
        """Never retry."""
        return cls(max_retries=0)

    def delay(self, retry: int, error: KovaError, *, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based) after ``error``."""
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return error.retry_after
        delay = min(self.max_backoff, self.initial_backoff * self.multiplier**retry)
        if self.jitter:
            delay *= 1.0 - (rng or random).random() * self.jitter
        return delay

    def should_retry(self, retry: int, error: KovaError) -> bool:
        """Whether to retry after ``retry`` retries already happened."""
        return error.is_retryable and retry < self.max_retries
