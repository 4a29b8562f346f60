"""The error hierarchy: classification, retryability, retry-after parsing."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import kova
import kova._errors
import kova.errors as kova_errors
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


def test_turn_cancelled_has_one_name() -> None:
    import kova.errors

    # Its first name, ``Cancelled``, read too much like ``trio.Cancelled``; it is gone.
    assert kova.TurnCancelled is kova.errors.TurnCancelled
    assert not hasattr(kova, "Cancelled")
    assert not hasattr(kova.errors, "Cancelled")
    with pytest.raises(kova.TurnCancelled):
        raise kova.TurnCancelled("stop")


def _tree(text: str) -> list[tuple[str, str]]:
    """(class, parent) for each line of a tree drawn like the one in kova.errors."""
    start = text.index("KovaError\n")
    lines = text[text.rindex("\n", 0, start) + 1 :].splitlines()
    base = len(lines[0]) - len(lines[0].lstrip())
    pairs: list[tuple[str, str]] = []
    path = ["KovaError"]
    for line in lines[1:]:
        marker = max(line.find("├── "), line.find("└── "))
        if marker < 0:
            break
        depth = (marker - base) // 4 + 1
        name = line[marker + 4 :].split()[0]
        del path[depth:]
        pairs.append((name, path[-1]))
        path.append(name)
    return pairs


def _every_kova_error() -> dict[str, type]:
    # The modules that define the error classes (kova.temporal loads its modules lazily).
    for layer in (
        "kova.actors",
        "kova.durable",
        "kova.mcp",
        "kova.temporal._client",
        "kova.temporal._payloads",
        "kova.tools",
        "kova.a2a",
    ):
        importlib.import_module(layer)
    found: dict[str, type] = {}
    pending: list[type] = [kova_errors.KovaError]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            # kova.serve's PausedTurn is the server's own signal, turned into each protocol's
            # error answer before it reaches a client: not part of the tree users catch.
            if sub.__module__.startswith("kova.") and not sub.__module__.startswith(
                ("kova.testing", "kova.serve")
            ):
                found[sub.__name__] = sub
                pending.append(sub)
    return found


def test_the_error_tree_is_documented_once_and_matches_the_classes() -> None:
    documented = _tree(kova_errors.__doc__ or "")
    classes = _every_kova_error()
    assert sorted(name for name, _ in documented) == sorted(classes)
    for name, parent in documented:
        assert classes[name].__bases__[0].__name__ == parent, name
    # docs/errors.md draws the same tree, line for line.
    docs = (Path(__file__).parent.parent / "docs" / "errors.md").read_text()
    drawn = docs[docs.index("```\nKovaError\n") + 4 :]
    drawn = drawn[: drawn.index("```")]
    docstring = (kova_errors.__doc__ or "").split("::\n\n", 1)[1]
    assert [line.strip() for line in drawn.splitlines()] == [
        line.strip() for line in docstring.splitlines()[: len(drawn.splitlines())]
    ]
    # And no other module draws a tree of its own.
    assert "├──" not in (kova._errors.__doc__ or "")
