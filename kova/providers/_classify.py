"""One error classifier for every provider: HTTP statuses, error bodies and error events that
arrive inside a 200 stream all become the same :class:`~kova.ProviderError` classes.

Precedence: a class the codec states explicitly (OpenAI's ``insufficient_quota`` 429 is not
a rate limit) > a type more precise than any status (:data:`PRECISE_TYPES`: AWS sends
``UnrecognizedClientException`` and ``ExpiredTokenException`` with HTTP 403, yet they mean the
credentials are invalid, not that they lack a permission) > the HTTP status, when there is
one > the provider's error *type* (Anthropic ``overloaded_error``, Google
``RESOURCE_EXHAUSTED``, Bedrock ``ThrottlingException``, OpenAI ``rate_limit_exceeded``),
which is all an error inside a 200 stream has. Outside :data:`PRECISE_TYPES` the status wins,
because some types span statuses (OpenAI sends ``invalid_request_error`` with 400, 401 and
404). So an Anthropic ``overloaded_error`` event mid-stream is the same
:class:`~kova.ProviderOverloaded` as HTTP 529, and is retried the same way, as long as no
content has reached the consumer (:attr:`~kova.ProviderError.after_content`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, TypeVar

from .._errors import (
    ContextOverflow,
    KovaError,
    ProviderError,
    ProviderErrorClass,
    classify_status,
    error_for_class,
)
from .._secret import mask_secrets

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .._secret import Secret

__all__ = [
    "ERROR_TYPES",
    "PRECISE_TYPES",
    "classify",
    "is_context_overflow",
    "mask_error",
    "provider_error",
]

ErrorT = TypeVar("ErrorT", bound=KovaError)

_C = ProviderErrorClass

ERROR_TYPES: Mapping[str, ProviderErrorClass] = {
    # Anthropic (error.type)
    "overloaded_error": _C.OVERLOADED,
    "api_error": _C.OVERLOADED,
    "rate_limit_error": _C.RATE_LIMITED,
    "authentication_error": _C.AUTH_INVALID,
    "permission_error": _C.AUTH_FORBIDDEN,
    "not_found_error": _C.NOT_FOUND,
    "invalid_request_error": _C.INVALID_REQUEST,
    "request_too_large": _C.INVALID_REQUEST,
    "timeout_error": _C.OVERLOADED,
    # OpenAI (error.type / error.code)
    "rate_limit_exceeded": _C.RATE_LIMITED,
    "server_error": _C.OVERLOADED,
    "insufficient_quota": _C.OTHER,
    "invalid_api_key": _C.AUTH_INVALID,
    "model_not_found": _C.NOT_FOUND,
    "context_length_exceeded": _C.INVALID_REQUEST,
    # Google (error.status, google.rpc.Code names)
    "RESOURCE_EXHAUSTED": _C.RATE_LIMITED,
    "UNAVAILABLE": _C.OVERLOADED,
    "INTERNAL": _C.OVERLOADED,
    "DEADLINE_EXCEEDED": _C.OVERLOADED,
    "PERMISSION_DENIED": _C.AUTH_FORBIDDEN,
    "UNAUTHENTICATED": _C.AUTH_INVALID,
    "INVALID_ARGUMENT": _C.INVALID_REQUEST,
    "FAILED_PRECONDITION": _C.INVALID_REQUEST,
    "OUT_OF_RANGE": _C.INVALID_REQUEST,
    "NOT_FOUND": _C.NOT_FOUND,
    # AWS Bedrock (x-amzn-ErrorType / __type / :exception-type)
    "ThrottlingException": _C.RATE_LIMITED,
    "ModelNotReadyException": _C.RATE_LIMITED,
    "ValidationException": _C.INVALID_REQUEST,
    "ServiceQuotaExceededException": _C.INVALID_REQUEST,
    "AccessDeniedException": _C.AUTH_FORBIDDEN,
    "UnrecognizedClientException": _C.AUTH_INVALID,
    "ExpiredTokenException": _C.AUTH_INVALID,
    "ResourceNotFoundException": _C.NOT_FOUND,
    "ModelTimeoutException": _C.OVERLOADED,
    "InternalServerException": _C.OVERLOADED,
    "ServiceUnavailableException": _C.OVERLOADED,
    "ModelStreamErrorException": _C.OVERLOADED,
    "ModelErrorException": _C.OVERLOADED,
}
"""Provider error types and their class, for errors that carry no HTTP status (inside a 200
stream, a 200 JSON error body) or a status kova does not classify."""

PRECISE_TYPES: frozenset[str] = frozenset(
    {
        # AWS: an unknown access key / a bad Bedrock API key, and expired temporary
        # credentials; both come with HTTP 403 but are AUTH_INVALID (new credentials fix them,
        # a permission does not).
        "UnrecognizedClientException",
        "ExpiredTokenException",
    }
)
"""Types that name the condition more precisely than the status they come with: their
:data:`ERROR_TYPES` class wins over the status."""


def classify(
    *,
    status_code: int | None = None,
    error_type: str | None = None,
    error_class: ProviderErrorClass | None = None,
) -> ProviderErrorClass:
    """The class of an error from what is known of it (see the module docstring)."""
    if error_class is not None:
        return error_class
    # Bedrock's x-amzn-ErrorType may carry a suffix: "ThrottlingException:http://..."
    name = error_type.split(":", 1)[0] if error_type is not None else None
    if name in PRECISE_TYPES:
        return ERROR_TYPES[name]
    if status_code is not None:
        return classify_status(status_code)
    if error_type is not None:
        known = ERROR_TYPES.get(error_type) or (ERROR_TYPES.get(name) if name else None)
        if known is not None:
            return known
    return _C.OTHER


_OVERFLOW_CODES: Final = frozenset({"context_length_exceeded", "model_context_window_exceeded"})
_OVERFLOW: Final = re.compile(
    "|".join(
        (
            r"prompt is too long",  # Anthropic (also through Bedrock and Vertex)
            r"exceed(?:s|ed)? (?:the )?context (?:limit|window|length)",  # Anthropic, Responses
            r"maximum context length",  # OpenAI and Azure chat completions
            r"context[_ ]length[_ ]exceeded",
            r"input is too long",  # Bedrock
            r"too many input tokens",  # Bedrock
            r"input token count.{0,40}exceeds",  # Gemini, Bedrock
            r"input length exceeds",  # Ollama ("the input length exceeds the context length")
            r"(?:prompt|input) (?:is )?(?:too large|longer than).{0,30}(?:context|model)",
        )
    ),
    re.IGNORECASE,
)


def is_context_overflow(message: str, *types: str | None) -> bool:
    """Whether an error says the prompt is over the model's context window: by a code that
    means it (``context_length_exceeded``), else by the words every provider uses for it."""
    if any(kind in _OVERFLOW_CODES for kind in types):
        return True
    return _OVERFLOW.search(message[:2000]) is not None


def provider_error(
    message: str,
    *,
    provider: str,
    status_code: int | None = None,
    error_type: str | None = None,
    error_class: ProviderErrorClass | None = None,
    retry_after: float | None = None,
    mid_stream: bool = False,
    secrets: Iterable[Secret] = (),
    code: str | None = None,
) -> ProviderError:
    """The classified error, as the subclass its class names (``RateLimited``, ...), with
    every one of ``secrets`` masked wherever the server echoed it (message, type or code).
    An ``INVALID_REQUEST`` that says the prompt is over the context window (by ``code``,
    ``error_type`` or its words) is a :class:`~kova.ContextOverflow`."""
    resolved = classify(status_code=status_code, error_type=error_type, error_class=error_class)
    kind = error_for_class(resolved)
    if resolved is _C.INVALID_REQUEST and is_context_overflow(message, error_type, code):
        kind = ContextOverflow
    error = kind(
        message,
        status_code=status_code,
        provider=provider,
        retry_after=retry_after,
        error_type=error_type,
        error_class=resolved,
        mid_stream=mid_stream,
    )
    return mask_error(error, secrets)


def mask_error(error: ErrorT, secrets: Iterable[Secret]) -> ErrorT:
    """``error`` with every one of ``secrets`` masked in each text it carries (message, error
    type or code, ``str``): a server or proxy may echo the credential it was sent in any of
    them. Classify first (the class is read from the unmasked type), then mask. Every text
    is made printable too (see :func:`_printable`)."""
    found = tuple(secrets)
    if found:
        error._redact(lambda text: _printable(mask_secrets(text, found)))
    else:
        error._redact(_printable)
    return error


def _printable(text: str) -> str:
    """``text`` as it can be printed: a lone surrogate a server sent (a JSON escape of half
    an emoji) as ``\\udXXX``, so ``print(error)`` to a UTF-8 stream never raises."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text
