"""Configuration of the Gemini providers (chat and embeddings)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

from .._checks import check_bool, check_http_url, check_int, check_non_empty_str, check_number
from .._settings import HttpSettings

if TYPE_CHECKING:
    from ..._models import JSONValue

__all__ = [
    "API_KEY_VARIABLES",
    "DEFAULT_BASE_URL",
    "GeminiConfig",
    "GeminiEmbeddingConfig",
    "ThinkingLevel",
]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_API_VERSION = "v1beta"

MAX_EMBED_BATCH = 100
"""The most requests one ``batchEmbedContents`` call takes."""

API_KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
"""Environment variables read, in order, when no key is given (the official SDK's order)."""

ThinkingLevel: TypeAlias = Literal["minimal", "low", "medium", "high"]
"""``thinkingConfig.thinkingLevel`` of Gemini 3 models (sent upper-case)."""

THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("minimal", "low", "medium", "high")


def _check_budget(
    _instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    check_int(_instance, attribute, value)
    if value is not None and value < -1:
        raise ValueError(
            f"thinking_budget must be -1 (dynamic), 0 (off) or a positive cap, got {value}"
        )


def _lower(value: ThinkingLevel | None) -> ThinkingLevel | None:
    # The API's spelling ("HIGH", google-genai's ThinkingLevel) is taken too.
    return value.lower() if isinstance(value, str) else value  # type: ignore[return-value]


def _check_level(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None and value not in THINKING_LEVELS:
        raise ValueError(f"thinking_level must be one of {THINKING_LEVELS}, got {value!r}")


@attrs.frozen(kw_only=True)
class GeminiConfig(HttpSettings):
    """How to reach the Gemini API (Generative Language, ``v1beta``) and what every request
    asks for.

    Example::

        GeminiConfig(model="gemini-2.5-flash")                      # key from the environment
        GeminiConfig(model="gemini-2.5-pro", thinking_budget=4096)  # a thinking cap
        GeminiConfig(model="gemini-3-pro-preview", thinking_level="low")

    Per-call settings (model, ``max_tokens``, sampling, stop sequences, structured output) come
    from :class:`~kova.InferenceConfig` and take precedence over these defaults.
    """

    model: str = attrs.field(validator=check_non_empty_str)
    """Model id without the ``models/`` prefix, e.g. ``gemini-2.5-flash``."""
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    """Scheme and host; ``/{api_version}/models/...`` is appended."""
    api_version: str = attrs.field(default=DEFAULT_API_VERSION, validator=check_non_empty_str)
    """The API version path segment (``v1beta``: thinking, structured output and
    ``parametersJsonSchema`` are there first)."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )
    """``maxOutputTokens`` when ``InferenceConfig.max_tokens`` is unset (``None``: the
    model's default)."""
    temperature: float | None = attrs.field(default=None, validator=check_number)
    """Temperature used when ``InferenceConfig.temperature`` is unset."""
    thinking_budget: int | None = attrs.field(default=None, validator=_check_budget)
    """``thinkingConfig.thinkingBudget`` (Gemini 2.5): ``-1`` dynamic, ``0`` off (not on Pro
    models), ``N`` a cap in tokens. ``None`` leaves the model's default."""
    thinking_level: ThinkingLevel | None = attrs.field(
        default=None, converter=_lower, validator=_check_level
    )
    """``thinkingConfig.thinkingLevel`` (Gemini 3 models). Not together with
    ``thinking_budget``."""
    include_thoughts: bool | None = attrs.field(default=None, validator=check_bool)
    """``thinkingConfig.includeThoughts``: thought summaries come back as thinking. ``None``:
    on whenever thinking is configured (a budget other than 0, or a level)."""

    key_variables = API_KEY_VARIABLES
    provider_label = "Gemini"

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.thinking_budget is not None and self.thinking_level is not None:
            raise ValueError(
                "set thinking_budget (Gemini 2.5) or thinking_level (Gemini 3), not both"
            )

    def thinking_config(self) -> dict[str, JSONValue] | None:
        """The ``thinkingConfig`` object, or ``None`` when nothing is configured."""
        config: dict[str, JSONValue] = {}
        if self.thinking_budget is not None:
            config["thinkingBudget"] = self.thinking_budget
        if self.thinking_level is not None:
            config["thinkingLevel"] = self.thinking_level.upper()
        include = self.include_thoughts
        if include is None:
            include = self.thinking_level is not None or (
                self.thinking_budget is not None and self.thinking_budget != 0
            )
        if include:
            config["includeThoughts"] = True
        return config or None


@attrs.frozen(kw_only=True)
class GeminiEmbeddingConfig(HttpSettings):
    """How to reach Gemini's ``:batchEmbedContents``.

    Example::

        GeminiEmbeddingConfig(model="gemini-embedding-001", dimensions=768)
    """

    model: str = attrs.field(default="gemini-embedding-001", validator=check_non_empty_str)
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    api_version: str = attrs.field(default=DEFAULT_API_VERSION, validator=check_non_empty_str)
    dimensions: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )
    """``outputDimensionality``: shorten vectors to this size (``None``: the model's own)."""
    task_type: str | None = None
    """``taskType``, e.g. ``RETRIEVAL_DOCUMENT``, ``RETRIEVAL_QUERY``, ``SEMANTIC_SIMILARITY``."""
    batch_size: int = attrs.field(
        default=MAX_EMBED_BATCH,
        validator=[check_int, attrs.validators.gt(0), attrs.validators.le(MAX_EMBED_BATCH)],
    )
    """Texts per request; the API accepts at most 100."""

    key_variables = API_KEY_VARIABLES
    provider_label = "Gemini"
