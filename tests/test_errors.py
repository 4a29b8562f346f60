"""The error hierarchy: classification, retryability, retry-after parsing."""

from __future__ import annotations

import pytest

import kova
from kova import ProviderError, ProviderErrorClass
from kova._errors import parse_retry_after


@pytest.mark.parametrize(
    ("status", "error_class", "error_type", "retryable"),
    [
        (401, ProviderErrorClass.AUTH_INVALID, kova.ProviderAuthError, False),
        (403, ProviderErrorClass.AUTH_FORBIDDEN, kova.ProviderAuthError, False),
        (429, ProviderErrorClass.RATE_LIMITED, kova.RateLimited, True),
        (408, ProviderErrorClass.OVERLOADED, kova.ProviderOverloaded, True),
        (500, ProviderErrorClass.OVERLOADED, kova.ProviderOverloaded, True),
        (503, ProviderErrorClass.OVERLOADED, kova.ProviderOverloaded, True),
        (529, ProviderErrorClass.OVERLOADED, kova.ProviderOverloaded, True),
        (400, ProviderErrorClass.INVALID_REQUEST, kova.InvalidRequest, False),
        (413, ProviderErrorClass.INVALID_REQUEST, kova.InvalidRequest, False),
        (422, ProviderErrorClass.INVALID_REQUEST, kova.InvalidRequest, False),
        (404, ProviderErrorClass.NOT_FOUND, kova.ModelNotFound, False),
        (418, ProviderErrorClass.OTHER, ProviderError, False),
    ],
)
def test_status_classification(
    status: int, error_class: ProviderErrorClass, error_type: type[ProviderError], retryable: bool
) -> None:
    error = ProviderError.from_status(status, "boom", provider="openai")
    assert type(error) is error_type
    assert error.error_class is error_class
    assert error.is_retryable is retryable
    assert error.status_code == status
    assert "boom" in str(error)
    assert isinstance(error, kova.KovaError)


def test_rate_limit_carries_retry_after() -> None:
    error = ProviderError.from_status(429, "slow down", retry_after=2.5)
    assert error.retry_after == 2.5
    assert "retry after 2.5s" in str(error)


def test_special_constructors() -> None:
    invalid = ProviderError.invalid_response("not JSON", provider="x")
    assert isinstance(invalid, kova.InvalidResponse)
    assert not invalid.is_retryable
    auth = ProviderError.credential_failure("no AWS credentials")
    assert auth.error_class is ProviderErrorClass.AUTH_INVALID
    assert auth.status_code is None


def test_transport_errors_are_retryable_and_builtin_compatible() -> None:
    assert kova.KovaConnectionError("reset").is_retryable
    assert isinstance(kova.KovaConnectionError("reset"), ConnectionError)
    timeout = kova.KovaTimeoutError("read timed out", timeout=30)
    assert timeout.is_retryable
    assert isinstance(timeout, TimeoutError)
    assert not kova.StreamError("cut").is_retryable
    assert not kova.BuildError("x").is_retryable


@pytest.mark.parametrize(
    ("retry_after", "retry_after_ms", "expected"),
    [
        ("2", None, 2.0),
        ("1.5", None, 1.5),
        (None, "250", 0.25),
        ("9", "250", 0.25),
        ("Wed, 21 Oct 2015 07:28:10 GMT", None, 10.0),
        ("garbage", None, None),
        ("-1", None, None),
        (None, None, None),
    ],
)
def test_parse_retry_after(
    retry_after: str | None, retry_after_ms: str | None, expected: float | None
) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(retry_after, retry_after_ms, now=now) == expected


def test_every_error_class_is_importable_from_kova_errors() -> None:
    import kova.errors

    for name in kova.errors.__all__:
        value = getattr(kova.errors, name)
        if name != "ProviderErrorClass":
            assert issubclass(value, kova.KovaError), name
    from kova.errors import ProviderErrorClass as Exported
    from kova.errors import RateLimited

    assert RateLimited is kova.RateLimited
    assert Exported is ProviderErrorClass


@pytest.mark.parametrize("error_class", list(ProviderErrorClass))
def test_provider_error_built_for_a_class_is_that_class_subclass(
    error_class: ProviderErrorClass,
) -> None:
    # Providers classify some errors from the body, not the status: the subclass follows.
    error = ProviderError("body says so", status_code=400, error_class=error_class)
    assert error.error_class is error_class
    expected = {
        ProviderErrorClass.AUTH_INVALID: kova.ProviderAuthError,
        ProviderErrorClass.AUTH_FORBIDDEN: kova.ProviderAuthError,
        ProviderErrorClass.RATE_LIMITED: kova.RateLimited,
        ProviderErrorClass.OVERLOADED: kova.ProviderOverloaded,
        ProviderErrorClass.INVALID_REQUEST: kova.InvalidRequest,
        ProviderErrorClass.NOT_FOUND: kova.ModelNotFound,
        ProviderErrorClass.OTHER: ProviderError,
    }[error_class]
    assert type(error) is expected


def test_turn_cancelled_keeps_its_old_name_as_an_alias() -> None:
    import kova.errors

    assert kova.Cancelled is kova.TurnCancelled is kova.errors.Cancelled
    assert kova.TurnCancelled.__name__ == "TurnCancelled"
    with pytest.raises(kova.Cancelled):
        raise kova.TurnCancelled("stop")
