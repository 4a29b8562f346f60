"""Retry policy for provider calls: exponential backoff, jitter, the provider's
``retry_after`` winning over the computed delay, and the bound past which a server's delay is
not waited for."""

from __future__ import annotations

import math
import random

from .._errors import ConfigError, KovaError, ProviderError
from .._record import Record

__all__ = ["RetryConfig", "server_delay"]


class RetryConfig(Record):
    """How the agent retries a failed provider call.

    Only retryable errors (:attr:`kova.KovaError.is_retryable`: rate limits, overload,
    connection errors, timeouts) are retried. The delay before retry ``n`` (0-based) is
    ``min(max_backoff, initial_backoff * multiplier**n)``, shortened by up to ``jitter`` of
    itself at random; a ``retry_after`` the provider sent replaces it exactly, unless it is
    longer than ``max_retry_after``: then the call is not retried and fails at once with the
    provider's error (its ``retry_after`` says how long the server asked for). A stream is never
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
    max_retry_after: float = 60.0
    """The longest server-requested delay (``retry_after``) that is waited for, in seconds.
    A rate limit asking for longer fails the call at once, and closes the provider's shared
    rate-limit gate for at most this long (``math.inf``: always wait as asked)."""
    max_unconfirmed_pause: float = 5.0
    """How long one rate limit closes the provider's shared gate at most, in seconds, until
    another confirms it: a second rate limit while the first one's delay (bounded by
    :attr:`max_retry_after`) has not passed closes it for up to :attr:`max_retry_after`. So
    one hostile or mistaken ``Retry-After: 3600`` holds the other callers of the provider for
    5 seconds, not a minute; the caller that received it follows its own delay (or fails)."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or isinstance(self.max_retries, bool):
            raise TypeError(f"max_retries must be an int, got {self.max_retries!r}")
        if self.max_retries < 0:
            raise ValueError(f"'max_retries' must be >= 0: {self.max_retries}")
        for name in (
            "initial_backoff",
            "multiplier",
            "max_backoff",
            "jitter",
            "max_retry_after",
            "max_unconfirmed_pause",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise TypeError(f"{name} must be a number of seconds, got {value!r}")
            # ``not >=`` also refuses NaN, which would make a delay (and a retry) never end.
            if not value >= 0:
                raise ConfigError(f"RetryConfig.{name} must not be negative or NaN, got {value}")
            if name not in ("max_retry_after", "max_unconfirmed_pause") and not math.isfinite(
                value
            ):
                raise ConfigError(f"RetryConfig.{name} must be finite, got {value}")
        if self.jitter > 1:
            raise ConfigError(
                f"RetryConfig.jitter is a fraction between 0 and 1, got {self.jitter}"
            )

    @classmethod
    def disabled(cls) -> RetryConfig:
        """Never retry."""
        return cls(max_retries=0)

    def delay(self, retry: int, error: KovaError, *, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based) after ``error`` (never
        negative: a provider's negative ``retry_after`` means "now")."""
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return server_delay(error.retry_after)
        delay = min(self.max_backoff, self.initial_backoff * self.multiplier**retry)
        if self.jitter:
            delay *= 1.0 - (rng or random).random() * self.jitter
        return delay

    def should_retry(self, retry: int, error: KovaError) -> bool:
        """Whether to retry after ``retry`` retries already happened: a retryable error, a
        retry left, and no server delay beyond :attr:`max_retry_after`."""
        if not error.is_retryable or retry >= self.max_retries:
            return False
        retry_after = error.retry_after if isinstance(error, ProviderError) else None
        return retry_after is None or server_delay(retry_after) <= self.max_retry_after


def server_delay(retry_after: float) -> float:
    """A provider's ``retry_after`` as a wait: a negative one (a clock skewed past an HTTP
    date, a provider's arithmetic) is no wait, NaN (which every comparison refuses) is an
    unbounded one, so it is never waited for."""
    if retry_after != retry_after:  # NaN
        return math.inf
    return retry_after if retry_after > 0 else 0.0
