"""Configuration of the OpenAI-compatible providers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

import attrs

from .._auth import bearer_auth, header_auth
from .._checks import (
    at_least,
    check_flag,
    check_http_url,
    check_non_empty_str,
    check_number,
    check_optional_str,
    check_path,
)
from .._settings import HttpSettings, seconds_field

if TYPE_CHECKING:
    import httpx2

    from ..._secret import Secret

__all__ = ["OpenAiConfig"]

DEFAULT_BASE_URL = "https://api.openai.com"


def _query_params(api_version: str | None) -> dict[str, str]:
    return {"api-version": api_version} if api_version is not None else {}


def endpoint_path(base_url: str, path: str) -> str:
    """``path`` as sent under ``base_url``, tolerating the official SDK's habit of putting
    ``/v1`` in the base URL: ``https://api.openai.com/v1`` with ``/v1/models`` is
    ``/models``, not ``/v1/v1/models``."""
    if base_url.rstrip("/").endswith("/v1") and path.startswith("/v1/"):
        return path[len("/v1") :]
    return path


@attrs.frozen(kw_only=True)
class OpenAiConfig(HttpSettings):
    """How to reach an OpenAI Chat Completions endpoint (OpenAI, Azure, vLLM, Ollama ``/v1``,
    DeepSeek, OpenRouter, ...).

    Example::

        OpenAiConfig(model="gpt-4.1")                                   # OpenAI
        OpenAiConfig(base_url="http://localhost:11434", model="qwen3")  # Ollama /v1
        OpenAiConfig(                                                   # Azure (classic)
            base_url="https://my-resource.openai.azure.com",
            model="gpt-4.1",
            chat_completions_path="/openai/deployments/my-gpt41/chat/completions",
            api_version="2024-10-21",
        )
    """

    model: str = attrs.field(validator=check_non_empty_str)
    """Default model; ``InferenceConfig.model`` overrides it per call."""
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    """Scheme and host (and optional prefix); the paths below are appended. A base URL that
    already ends in ``/v1`` (as the official SDK's does) is fine: the paths' own ``/v1`` is
    then not repeated."""
    timeout: float = seconds_field(30.0)
    """Read timeout in seconds (also write and pool), the time to a stream's response head,
    and the idle timeout between stream events."""
    max_tokens: int | None = attrs.field(default=None, validator=at_least(1))
    """Output limit used when ``InferenceConfig.max_tokens`` is unset."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = attrs.field(
        default="max_completion_tokens",
        validator=attrs.validators.in_(("max_completion_tokens", "max_tokens")),
    )
    """The request field carrying the limit: OpenAI deprecated ``max_tokens`` (reasoning models
    reject it); some older compatible servers only know ``max_tokens``."""
    temperature: float | None = attrs.field(default=None, validator=check_number)
    """Temperature used when ``InferenceConfig.temperature`` is unset."""
    chat_completions_path: str = attrs.field(default="/v1/chat/completions", validator=check_path)
    models_path: str = attrs.field(default="/v1/models", validator=check_path)
    api_version: str | None = attrs.field(default=None, validator=check_optional_str)
    """Azure's ``api-version`` query parameter. When set, the key goes in the ``api-key``
    header instead of ``Authorization: Bearer``."""
    reasoning_effort: str | None = attrs.field(default=None, validator=check_optional_str)
    """``reasoning_effort`` for reasoning models (``"low"``, ``"medium"``, ``"high"``, ...)."""
    echo_reasoning: bool = attrs.field(default=False, validator=check_flag)
    """Keep ``reasoning_content`` in history and send it back. DeepSeek's thinking mode
    requires the assistant turn's ``reasoning_content`` to be echoed during a tool loop; with
    this on, the reasoning arrives as a :class:`~kova.Thinking` block in the response content
    (and as ``SignedThinking`` at the end of a stream) and goes back as ``reasoning_content``
    on that assistant message. Off (the default), reasoning is display text only."""

    audio_voice: str | None = attrs.field(default=None, validator=check_optional_str)
    """Ask for spoken answers in this voice (``"alloy"``, ``"coral"``, ...; an audio model
    such as ``gpt-4o-audio-preview``): sends ``modalities: ["text", "audio"]`` and
    ``audio: {voice, format}``. The answer's speech comes back as an :class:`~kova.Audio`
    block after its transcript's text (a streamed answer carries the transcript only)."""
    audio_format: Literal["wav", "mp3", "flac", "opus", "pcm16"] = attrs.field(
        default="wav", validator=attrs.validators.in_(("wav", "mp3", "flac", "opus", "pcm16"))
    )
    """The format of spoken answers (with :attr:`audio_voice`)."""

    key_variables = ("OPENAI_API_KEY",)
    provider_label = "OpenAI"

    def query_params(self) -> dict[str, str]:
        """Query parameters sent with every request."""
        return _query_params(self.api_version)


class _Keyed(Protocol):
    """What :func:`openai_auth` reads of a config (a chat or an embedding one)."""

    @property
    def api_key(self) -> Secret | None: ...

    @property
    def api_version(self) -> str | None: ...


def openai_auth(config: _Keyed) -> httpx2.Auth | None:
    """The auth flow of a config: Azure (an ``api_version`` is set) takes the key in
    ``api-key``, everyone else as a bearer token; no key (local servers), no header."""
    key: Secret | None = config.api_key
    if key is None:
        return None
    if config.api_version is not None:
        return header_auth("api-key", key)
    return bearer_auth(key)
