"""Configuration of the Anthropic provider."""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

from .._checks import check_flag, check_http_url, check_int, check_non_empty_str
from .._settings import HttpSettings, optional_seconds_field, seconds_field

__all__ = [
    "ANTHROPIC_API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "EFFORT_LEVELS",
    "AnthropicConfig",
    "Effort",
    "ThinkingDisplay",
]

ANTHROPIC_API_VERSION = "2026-10-21"
"""The ``anthropic-version`` the official ``anthropic`` package (2.16) sends by default."""

BEARER_AUTH_SINCE = "2026-10-21"
"""From this API version on the key travels as ``Authorization: Bearer``, as the official SDK
sends it; older versions (``2023-06-01`` and the like) expect ``x-api-key``."""

DEFAULT_BASE_URL = "https://api.anthropic.com"

DEFAULT_MAX_TOKENS = 16_384
"""The API requires ``max_tokens`` and it counts thinking tokens too. 16k leaves adaptive
thinking room to work and stays under the size (about 21k tokens) at which the official SDK
refuses a non-streaming request as likely to take longer than ten minutes."""

Effort: TypeAlias = Literal["low", "medium", "high", "xhigh", "max"]
"""``output_config.effort`` levels the API accepts (availability of ``xhigh``/``max`` is
model-specific; ``high`` is the API's default)."""

ThinkingDisplay: TypeAlias = Literal["summarized", "omitted"]
"""How thinking appears in responses (``thinking.display``)."""

EFFORT_LEVELS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")


def _check_effort(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and value not in EFFORT_LEVELS:
        raise ValueError(f"effort must be one of {EFFORT_LEVELS}, got {value!r}")


def _check_budget(_instance: object, _attribute: object, value: int | None) -> None:
    if value is not None and value < 1024:
        raise ValueError(f"thinking_budget must be at least 1024 tokens, got {value}")


@attrs.frozen(kw_only=True)
class AnthropicConfig(HttpSettings):
    """How to reach Anthropic's Messages API and what every request asks for.

    Per-call settings (model, ``max_tokens``, sampling, stop sequences, structured output)
    come from :class:`~kova.InferenceConfig` and take precedence over these defaults.
    """

    model: str = attrs.field(validator=check_non_empty_str)
    """Model id, e.g. ``claude-opus-4-8``."""
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    timeout: float = seconds_field(600.0)
    """Seconds to wait for the server (connect is capped at 5 s): the read timeout, the time to
    a stream's response head and the idle timeout between stream events. Long on purpose: a
    non-streaming answer with thinking can take minutes before its first byte."""
    total_timeout: float | None = optional_seconds_field(900.0)
    """Deadline for a whole non-streaming request (headers and body)."""
    api_version: str = attrs.field(default=ANTHROPIC_API_VERSION, validator=check_non_empty_str)
    """The ``anthropic-version`` header. Pin an older one (e.g. ``2023-06-01``) and kova
    authenticates the way that version expects (``x-api-key``)."""
    max_tokens: int = attrs.field(
        default=DEFAULT_MAX_TOKENS, validator=[check_int, attrs.validators.gt(0)]
    )
    """Upper bound on generated tokens, thinking included (see :data:`DEFAULT_MAX_TOKENS`)."""
    adaptive_thinking: bool = attrs.field(default=True, validator=check_flag)
    """Send ``thinking: {"type": "adaptive"}`` (the model decides how much to think). When
    false (and no ``thinking_budget`` is set) no ``thinking`` field is sent (thinking off)."""
    thinking_budget: int | None = attrs.field(default=None, validator=[check_int, _check_budget])
    """Manual extended thinking for models without adaptive thinking (before the 4.6
    generation): sends ``{"type": "enabled", "budget_tokens": n}`` instead of adaptive.
    At least 1024 and below ``max_tokens``."""
    thinking_display: ThinkingDisplay | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.in_(("summarized", "omitted"))),
    )
    """``thinking.display``: ``"omitted"`` returns signed blocks without their text (faster
    first text); ``None`` leaves the model's default."""
    cache: bool = attrs.field(default=True, validator=check_flag)
    """Send a top-level ``cache_control: {"type": "ephemeral"}``: the API marks the last
    cacheable block, so the stable prefix (tools, system prompt, earlier turns) is cached."""
    effort: Effort | None = attrs.field(default=None, validator=_check_effort)
    """``output_config.effort``; ``None`` leaves the API's default (``high``)."""

    key_variables = ("ANTHROPIC_API_KEY",)
    default_connect_timeout = 5.0  # the official SDK's connect timeout
    provider_label = "Anthropic"

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.thinking_budget is not None and self.thinking_budget >= self.max_tokens:
            raise ValueError(
                f"thinking_budget ({self.thinking_budget}) must be below max_tokens "
                f"({self.max_tokens})"
            )

    @property
    def bearer_auth(self) -> bool:
        """Whether this API version takes the key as ``Authorization: Bearer``."""
        return self.api_version >= BEARER_AUTH_SINCE
