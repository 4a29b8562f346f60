"""RetryConfig arithmetic."""

from __future__ import annotations

import math
import random

import pytest

import kova
from kova.agent import RetryConfig


def test_default_is_two_retries_with_exponential_backoff() -> None:
    retry = RetryConfig()
    error = kova.ProviderOverloaded("busy")
    assert retry.max_retries == 2
    assert [retry.delay(n, error) for n in range(3)] == [0.5, 1.0, 2.0]
    assert retry.should_retry(1, error)
    assert not retry.should_retry(2, error)


def test_backoff_is_capped() -> None:
    retry = RetryConfig(initial_backoff=10, multiplier=10, max_backoff=25)
    assert retry.delay(3, kova.KovaConnectionError("x")) == 25


def test_retry_after_wins() -> None:
    error = kova.ProviderError.from_status(429, "slow", retry_after=12.0)
    assert RetryConfig(initial_backoff=1).delay(0, error) == 12.0


def test_jitter_only_shortens_within_its_fraction() -> None:
    retry = RetryConfig(initial_backoff=10, jitter=0.5)
    rng = random.Random(1)
    delays = [retry.delay(0, kova.ProviderOverloaded("x"), rng=rng) for _ in range(200)]
    assert all(5.0 <= d <= 10.0 for d in delays)
    assert len(set(delays)) > 100


def test_only_retryable_errors_are_retried() -> None:
    retry = RetryConfig(max_retries=5)
    assert not retry.should_retry(0, kova.InvalidRequest("bad"))
    assert not retry.should_retry(0, kova.StreamError("cut"))
    assert retry.should_retry(0, kova.KovaTimeoutError("slow"))
    assert not RetryConfig.disabled().should_retry(0, kova.ProviderOverloaded("x"))


@pytest.mark.parametrize("kwargs", [{"max_retries": -1}, {"initial_backoff": -1}, {"jitter": 2}])
def test_invalid_retry_config(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must|jitter|max_retries"):
        RetryConfig(**kwargs)  # type: ignore[arg-type]


def test_a_retry_after_beyond_the_bound_is_not_retried() -> None:
    retry = RetryConfig(max_retries=5)
    assert retry.max_retry_after == 60.0
    assert retry.should_retry(0, kova.ProviderError.from_status(429, "slow", retry_after=60.0))
    assert not retry.should_retry(0, kova.ProviderError.from_status(429, "slow", retry_after=61))
    assert RetryConfig(max_retry_after=math.inf).should_retry(
        0, kova.ProviderError.from_status(429, "slow", retry_after=3600.0)
    )
    # no retry_after: the backoff decides, whatever the bound
    assert RetryConfig(max_retry_after=0).should_retry(0, kova.ProviderOverloaded("busy"))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"initial_backoff": math.nan}, ValueError),
        ({"max_backoff": math.inf}, ValueError),
        ({"multiplier": math.nan}, ValueError),
        ({"max_retry_after": math.nan}, ValueError),
        ({"max_retry_after": -1}, ValueError),
        ({"max_retries": 1.5}, TypeError),
        ({"max_retries": True}, TypeError),
        ({"initial_backoff": "1"}, TypeError),
    ],
)
def test_a_retry_config_refuses_values_that_would_hang_or_crash(
    kwargs: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error, match="|".join(kwargs)):
        RetryConfig(**kwargs)  # type: ignore[arg-type]
