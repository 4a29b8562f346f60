"""Configuration of the Ollama providers (chat and embeddings)."""

from __future__ import annotations

import enum
import os
from typing import TYPE_CHECKING

import attrs

from .._checks import check_bool, check_http_url, check_int, check_non_empty_str, options_map
from .._settings import HttpSettings, optional_seconds_field, seconds_field

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..._models import JSONValue

__all__ = [
    "DEFAULT_BASE_URL",
    "OllamaConfig",
    "OllamaEmbeddingConfig",
    "OllamaThink",
    "default_base_url",
    "parse_host",
]

DEFAULT_BASE_URL = "http://localhost:11434"
DEFAULT_PORT = 11434


class OllamaThink(enum.Enum):
    """The ``think`` field: on, off, or a level (models such as GPT-OSS take only levels)."""

    ENABLED = True
    """``"think": true``."""
    DISABLED = False
    """``"think": false`` (a thinking model otherwise thinks by default)."""
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def wire(self) -> bool | str:
        """The JSON value sent: ``true``/``false`` or the level string."""
        value: bool | str = self.value
        return value


def parse_host(host: str) -> str:
    """An ``OLLAMA_HOST`` value as a base URL: ``host``, ``host:port``, ``:port`` or a full
    URL (no scheme means ``http``; no port without a scheme means 11434); a trailing ``/`` is
    dropped."""
    host = host.strip().rstrip("/")
    if not host:
        return DEFAULT_BASE_URL
    if "://" in host:
        return host
    authority, slash, path = host.partition("/")
    if authority.startswith(":"):
        authority = "localhost" + authority
    bracketed = authority.startswith("[")
    has_port = authority.rsplit("]", 1)[-1].count(":") == 1 if bracketed else ":" in authority
    if not has_port:
        authority = f"{authority}:{DEFAULT_PORT}"
    return f"http://{authority}{slash}{path}"


def default_base_url() -> str:
    """``OLLAMA_HOST`` (parsed) when set, else ``http://localhost:11434``."""
    value = os.environ.get("OLLAMA_HOST")
    return parse_host(value) if value else DEFAULT_BASE_URL


def _base_url(value: str) -> str:
    # As the official client reads its host argument: the OLLAMA_HOST forms.
    return parse_host(value) if isinstance(value, str) else value


def _think(value: OllamaThink | None) -> OllamaThink | None:
    if value is None or isinstance(value, OllamaThink):
        return value
    raise TypeError(f"think takes an OllamaThink (or None), got {value!r}")


def _keep_alive(_instance: object, _attribute: object, value: str | float | None) -> None:
    if value is None or (isinstance(value, str) and value):
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        return
    raise ValueError(f"keep_alive must be a duration string ('5m') or seconds, got {value!r}")


@attrs.frozen(kw_only=True)
class OllamaConfig(HttpSettings):
    """How to reach an Ollama server's native API (``/api/chat``) and what every request asks
    for.

    Example::

        OllamaConfig(model="llama3.2")                                  # local server
        OllamaConfig(model="qwen3", think=OllamaThink.HIGH, keep_alive="10m")
        OllamaConfig(model="llama3.2", extra_options={"num_ctx": 8192, "seed": 7})

    Per-call settings (model, ``max_tokens`` as ``num_predict``, temperature, ``top_p``, stop
    sequences, structured output as ``format``) come from :class:`~kova.InferenceConfig` and
    win over ``extra_options``.

    ``api_key`` is only for ollama.com's hosted API (``Authorization: Bearer``); a local server
    needs none, and none is read from the environment.
    """

    model: str = attrs.field(validator=check_non_empty_str)
    """Model name, ``name[:tag]`` (``llama3.2`` is ``llama3.2:latest``)."""
    base_url: str = attrs.field(
        factory=default_base_url, converter=_base_url, validator=check_http_url
    )
    """``http://localhost:11434`` unless ``OLLAMA_HOST`` is set (read when the config is
    built). Given or from the variable, ``host``, ``host:port``, ``:port`` and full URLs are
    accepted, as the official client accepts them (no scheme means ``http``, no port 11434)."""
    timeout: float = seconds_field(120.0)
    """Read timeout in seconds, the time to a stream's first line and the idle timeout
    between lines. Generous: loading a model on the first request takes a while."""
    total_timeout: float | None = optional_seconds_field(900.0)
    """Deadline for a whole non-streaming request (local inference can be slow)."""
    keep_alive: str | float | None = attrs.field(default=None, validator=_keep_alive)
    """How long the server keeps the model loaded after the call (``"5m"``, ``"1h"``,
    seconds, ``0`` to unload at once); ``None``: the server's default."""
    think: OllamaThink | None = attrs.field(default=None, converter=_think)
    """``think``: ``OllamaThink.ENABLED`` / ``HIGH`` / ``MEDIUM`` / ``LOW`` (serialized as
    ``true`` or the level), ``DISABLED`` (``false``). ``None`` omits the field (thinking
    models then think). Reasoning arrives as thinking, never as text."""
    extra_options: Mapping[str, JSONValue] = attrs.field(factory=dict, converter=options_map)
    """Merged into ``options`` (``num_ctx``, ``seed``, ``top_k``, ``repeat_penalty``, ...)."""

    provider_label = "Ollama"


@attrs.frozen(kw_only=True)
class OllamaEmbeddingConfig(HttpSettings):
    """How to reach an Ollama server's ``/api/embed``.

    Example::

        OllamaEmbeddingConfig(model="nomic-embed-text")
    """

    model: str = attrs.field(validator=check_non_empty_str)
    base_url: str = attrs.field(
        factory=default_base_url, converter=_base_url, validator=check_http_url
    )
    """As :attr:`OllamaConfig.base_url`."""
    dimensions: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )
    """Shorten vectors to this size (models that support it); ``None``: native size."""
    truncate: bool | None = attrs.field(default=None, validator=check_bool)
    """``truncate``: ``False`` makes an over-long input an error instead of cutting it."""
    keep_alive: str | float | None = attrs.field(default=None, validator=_keep_alive)
    batch_size: int = attrs.field(default=256, validator=[check_int, attrs.validators.gt(0)])
    """Texts per request (Ollama sets no hard limit; this bounds one request's size)."""
    timeout: float = seconds_field(120.0)

    provider_label = "Ollama"
