"""Configuration of the Bedrock provider."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from ..._secret import Secret, SecretHeaders
from .._checks import (
    at_least,
    check_flag,
    check_json_object,
    check_optional_str,
    header_map,
)
from .._settings import HttpSettings, seconds_field

if TYPE_CHECKING:
    from ..._models import JSONObject

__all__ = ["DEFAULT_TIMEOUT", "BedrockConfig"]

DEFAULT_TIMEOUT = 60.0
"""The seed's request timeout for Bedrock, in seconds."""


def _non_empty(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string")


def _secret(value: str | Secret | None) -> Secret | None:
    return Secret.of(value)


def _headers(value: Mapping[str, str]) -> SecretHeaders:
    headers = header_map(value)
    lowered = {name.lower(): header for name, header in headers.items()}
    return SecretHeaders(lowered, public=headers.public)


def _fields(value: Mapping[str, object] | None) -> JSONObject | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(
            f"additional_model_request_fields must be a mapping, got {type(value).__name__}"
        )
    if not isinstance(value, dict):
        value = dict(value)
    return value  # type: ignore[return-value]  # JSON by contract, sent as given


def _positive_or_none(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{attribute.name} must be positive, got {value}")


def _url_or_none(
    _instance: object, attribute: attrs.Attribute[str | None], value: str | None
) -> None:
    if value is not None and (
        not isinstance(value, str) or not value.startswith(("http://", "https://"))
    ):
        raise ValueError(f"{attribute.name} must be an http(s) URL, got {value!r}")


@attrs.frozen(kw_only=True)
class BedrockConfig(HttpSettings):
    """How to reach Amazon Bedrock's Converse API and what every request asks for.

    Credentials, first match wins: ``api_key`` (a Bedrock API key, sent as ``Authorization:
    Bearer``) > ``access_key_id``/``secret_access_key``/``session_token`` > the named
    ``profile`` > the ``AWS_BEARER_TOKEN_BEDROCK`` environment variable > botocore's default
    chain (environment, shared files, SSO, ``credential_process``, container, IMDS). The
    variable is read when the config is built, the rest once per provider (re-construct the
    provider to rotate them).

    Per-call settings (model, ``max_tokens``, sampling, stop sequences, structured output) come
    from :class:`~kova.InferenceConfig` and take precedence over these defaults.
    """

    region: str = attrs.field(validator=_non_empty)
    """AWS region, e.g. ``us-east-1`` (endpoints and the SigV4 scope)."""
    model_id: str = attrs.field(validator=_non_empty)
    """A base model id (``anthropic.claude-3-5-haiku-20241022-v1:0``), a cross-region inference
    profile (``us.``/``eu.``/``apac.``/``global.`` prefix) or an ARN."""
    profile: str | None = attrs.field(default=None, validator=check_optional_str)
    """A named profile of the shared AWS config/credentials files."""
    access_key_id: Secret | None = attrs.field(default=None, converter=_secret)
    """Explicit access key id (a ``str`` is wrapped in a masked :class:`~kova.Secret`)."""
    secret_access_key: Secret | None = attrs.field(default=None, converter=_secret)
    """Explicit secret access key (masked)."""
    session_token: Secret | None = attrs.field(default=None, converter=_secret)
    """STS session token of temporary credentials (masked)."""
    timeout: float = seconds_field(DEFAULT_TIMEOUT)
    """Seconds: the read timeout, the time to a stream's response head and the idle timeout
    between stream events (connect: at most 10 s)."""
    endpoint_url: str | None = attrs.field(default=None, validator=_url_or_none)
    """Replaces ``https://bedrock-runtime.{region}.amazonaws.com`` (LocalStack, a VPC
    endpoint, tests). Model listing uses it too unless ``control_endpoint_url`` is set."""
    control_endpoint_url: str | None = attrs.field(default=None, validator=_url_or_none)
    """Replaces ``https://bedrock.{region}.amazonaws.com``, the control plane that lists
    models."""
    max_tokens: int | None = attrs.field(default=None, validator=at_least(1))
    """``inferenceConfig.maxTokens`` when the call sets none (``None``: the model's default)."""
    additional_model_request_fields: JSONObject | None = attrs.field(
        default=None, converter=_fields, validator=check_json_object
    )
    """Sent as ``additionalModelRequestFields``: model-specific knobs in the model's own field
    names, e.g. ``{"thinking": {"type": "enabled", "budget_tokens": 4096}}`` for Claude's
    extended thinking or ``{"top_k": 50}``."""
    cache_prompt: bool = attrs.field(default=False, validator=check_flag)
    """Prompt caching: a ``cachePoint`` after the system prompt, after the tools and at the end
    of the conversation, so the stable prefix is cached (models with prompt caching, such as
    Claude and Nova; others answer with a ``ValidationException``)."""
    json_tool_results: bool = attrs.field(default=False, validator=check_flag)
    """Send a tool result whose text is a JSON object as a ``{"json": ...}`` content block
    (models that take structured tool results) instead of ``{"text": ...}``."""
    exact_token_count: bool = attrs.field(default=True, validator=check_flag)
    """:meth:`~BedrockProvider.count_tokens` asks the CountTokens API (falls back to the
    heuristic for models it does not support); false: always the offline heuristic."""
    extra_headers: SecretHeaders = attrs.field(factory=SecretHeaders, converter=_headers)
    """Sent (and signed) on every request, e.g. ``x-amzn-bedrock-guardrailidentifier``."""

    key_variables = ("AWS_BEARER_TOKEN_BEDROCK",)
    default_connect_timeout = 10.0
    provider_label = "Bedrock"

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("access_key_id and secret_access_key go together")
        if self.session_token is not None and self.access_key_id is None:
            raise ValueError("session_token needs access_key_id and secret_access_key")

    def _reads_key_variables(self) -> bool:
        # A Bedrock API key from the environment only when no AWS credentials are configured.
        return self.access_key_id is None and self.profile is None

    @property
    def runtime_url(self) -> str:
        """The data-plane endpoint (Converse, ConverseStream, CountTokens)."""
        if self.endpoint_url is not None:
            return self.endpoint_url.rstrip("/")
        return f"https://bedrock-runtime.{self.region}.{_domain(self.region)}"

    @property
    def control_url(self) -> str:
        """The control-plane endpoint (ListFoundationModels, ListInferenceProfiles)."""
        if self.control_endpoint_url is not None:
            return self.control_endpoint_url.rstrip("/")
        if self.endpoint_url is not None:
            return self.endpoint_url.rstrip("/")
        return f"https://bedrock.{self.region}.{_domain(self.region)}"


def _domain(region: str) -> str:
    # The China partition has its own DNS suffix; every other partition Bedrock runs in
    # (aws, aws-us-gov) uses amazonaws.com.
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
