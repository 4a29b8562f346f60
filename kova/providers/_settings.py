"""What every HTTP provider's config shares: timeouts, the body cap, extra headers and the key.

:class:`HttpSettings` is the base of the chat providers' configs (``AnthropicConfig``,
``OpenAiConfig``, ``OpenAiResponsesConfig``, ``GeminiConfig``, ``OllamaConfig``,
``BedrockConfig``): they inherit its fields, so a timeout is declared, checked and documented
once, and a provider hands the transport what it needs in one line::

    super().__init__(codec, base_url=config.base_url, auth=auth, **config.http_options(), ...)

A config redeclares a field only to change its default (Anthropic waits ten minutes for a
non-streaming answer, OpenAI 30 seconds), with the field helpers below so the checks stay the
same. The base URL is each config's own: Bedrock has none (its endpoint follows the region).

**API keys are resolved here, once, when the config is built**: an ``api_key`` given wins,
else the first of the config's :attr:`HttpSettings.key_variables` that is set in the
environment; so a running agent's credentials never change under it (``evolve`` the config,
or build a new one, to rotate a key). A provider whose every call needs a key asks
:meth:`HttpSettings.missing_key_error` for the one-line error naming those variables.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

import attrs

from .._errors import ProviderError, check_seconds
from .._secret import Secret, SecretHeaders
from ._checks import check_header_text, check_int, header_map

if TYPE_CHECKING:
    from .._errors import ProviderAuthError

__all__ = [
    "HttpOptions",
    "HttpSettings",
    "TransportOptions",
    "optional_seconds_field",
    "seconds_field",
]

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be positive, got {value}")


def _seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_seconds(attribute.name, value)


def _optional_seconds(_instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    check_seconds(attribute.name, value, optional=True)


def seconds_field(default: float) -> Any:
    """A required positive, finite number of seconds, ``default`` unless given (typed
    ``Any``: the attrs plugin takes the annotation of the field it is assigned to)."""
    return attrs.field(default=default, validator=_seconds)


def optional_seconds_field(default: float | None) -> Any:
    """Positive, finite seconds or ``None`` (no deadline), ``default`` unless given."""
    return attrs.field(default=default, validator=_optional_seconds)


_NO_KEY = Secret("")
"""What ``api_key=""`` converts to: no key, and none read from the environment (a local
server behind an OpenAI-compatible URL while ``OPENAI_API_KEY`` holds a real key)."""


def _key(value: str | Secret | None) -> Secret | None:
    if isinstance(value, str) and not value:
        return _NO_KEY
    key = Secret.of(value)
    if key is not None:
        check_header_text("api_key", key.reveal())
    return key


class TransportOptions(TypedDict):
    """What the shared transport (``HttpTransport``) takes from a config, by keyword."""

    timeout: float
    connect_timeout: float | None
    total_timeout: float | None
    max_response_bytes: int


class HttpOptions(TransportOptions):
    """What :class:`~kova.providers.HttpProvider` takes from a config, by keyword."""

    stream_timeout: float | None


@attrs.frozen(kw_only=True)
class HttpSettings:
    """The HTTP settings and the key every provider config has (see the module docstring).

    An attrs class, as are the provider configs built on it, by kova's rule for
    configurations whose fields convert what the caller passes (a ``str`` key into a
    :class:`~kova.Secret`, a mapping into :class:`~kova.SecretHeaders`; see
    :mod:`kova._record`).
    """

    key_variables: ClassVar[tuple[str, ...]] = ()
    """Environment variables read, in order, when no ``api_key`` is given."""
    default_connect_timeout: ClassVar[float | None] = None
    """The connect timeout when none is given (capped at ``timeout``); ``None``: ``timeout``."""
    provider_label: ClassVar[str] = "provider"
    """How error messages name the provider (``"Anthropic"``)."""

    api_key: Secret | None = attrs.field(default=None, converter=_key)
    """The API key (a ``str`` is wrapped in a masked :class:`~kova.Secret`). ``None`` reads
    the provider's environment variable when the config is built; ``""``: no key."""
    timeout: float = seconds_field(60.0)
    """Read timeout in seconds (also write and pool), the time to a stream's response head,
    and the idle timeout between stream events."""
    connect_timeout: float | None = optional_seconds_field(None)
    """Connect timeout in seconds; by default the provider's own (capped at ``timeout``)."""
    total_timeout: float | None = optional_seconds_field(600.0)
    """Deadline for a whole non-streaming request (headers and body)."""
    stream_timeout: float | None = optional_seconds_field(None)
    """Optional deadline for a whole stream (``None``: bounded by the idle timeout only)."""
    max_response_bytes: int = attrs.field(
        default=DEFAULT_MAX_RESPONSE_BYTES, validator=[check_int, _positive]
    )
    """The largest non-streaming response body read."""
    extra_headers: SecretHeaders = attrs.field(factory=SecretHeaders, converter=header_map)
    """Sent with every request; values masked in reprs and errors (a
    :class:`~kova.SecretHeaders`), since that is where gateway keys go."""

    def __attrs_post_init__(self) -> None:
        if self.api_key is _NO_KEY:
            object.__setattr__(self, "api_key", None)
        elif self.api_key is None and self._reads_key_variables():
            for variable in self.key_variables:
                found = Secret.of(os.environ.get(variable))
                if found is not None:
                    check_header_text(f"the {variable} environment variable", found.reveal())
                    object.__setattr__(self, "api_key", found)
                    break

    def _reads_key_variables(self) -> bool:
        """Whether the environment is asked for a key (Bedrock: not when AWS credentials or
        a profile are configured)."""
        return True

    def transport_options(self) -> TransportOptions:
        """The settings of one request, as the shared transport takes them."""
        connect = self.connect_timeout
        if connect is None and self.default_connect_timeout is not None:
            connect = min(self.default_connect_timeout, self.timeout)
        return TransportOptions(
            timeout=self.timeout,
            connect_timeout=connect,
            total_timeout=self.total_timeout,
            max_response_bytes=self.max_response_bytes,
        )

    def http_options(self) -> HttpOptions:
        """The transport settings, as :class:`~kova.providers.HttpProvider` takes them."""
        return HttpOptions(**self.transport_options(), stream_timeout=self.stream_timeout)

    def missing_key_error(self, provider: str) -> ProviderAuthError:
        """The error of a call made with no key: names where a key comes from."""
        where = f"pass {type(self).__name__}(api_key=...)"
        if self.key_variables:
            where += " or set " + " or ".join(self.key_variables)
        return ProviderError.credential_failure(
            f"no {self.provider_label} API key: {where}", provider=provider
        )
