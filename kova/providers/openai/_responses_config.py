"""Configuration of the OpenAI Responses API provider."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

from .._checks import (
    at_least,
    check_bool,
    check_flag,
    check_http_url,
    check_non_empty_str,
    check_number,
    check_optional_str,
    check_path,
)
from .._settings import HttpSettings
from ._config import DEFAULT_BASE_URL

if TYPE_CHECKING:
    from ..._secret import Secret

__all__ = ["OpenAiResponsesConfig"]

_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")


@attrs.frozen(kw_only=True)
class OpenAiResponsesConfig(HttpSettings):
    """How to reach an OpenAI Responses API endpoint (``POST /v1/responses``): OpenAI, Azure
    OpenAI, or a Responses-compatible server.

    kova's history is the caller's, so the provider is stateless by default: ``store: false``,
    the whole conversation sent as ``input`` items on every call, and the model's reasoning
    items (with their ``encrypted_content``) kept on the assistant message and sent back
    unchanged during a tool loop.

    Example::

        OpenAiResponsesConfig(model="gpt-5.4", reasoning_effort="medium")      # OpenAI
        OpenAiResponsesConfig.azure(                                            # Azure, v1 API
            "https://my-resource.openai.azure.com", deployment="my-gpt5", api_key="..."
        )
    """

    model: str = attrs.field(validator=check_non_empty_str)
    """Default model (Azure: the deployment name); ``InferenceConfig.model`` overrides it."""
    base_url: str = attrs.field(default=DEFAULT_BASE_URL, validator=check_http_url)
    """Scheme and host (and optional prefix); the paths below are appended. A base URL ending
    in ``/v1`` (as the official SDK's does) is fine: the paths' ``/v1`` is not repeated."""
    max_output_tokens: int | None = attrs.field(default=None, validator=at_least(16))
    """``max_output_tokens`` (visible plus reasoning tokens, at least 16) used when
    ``InferenceConfig.max_tokens`` is unset."""
    temperature: float | None = attrs.field(default=None, validator=check_number)
    """Temperature used when ``InferenceConfig.temperature`` is unset. Many reasoning models
    take none: it is only sent when set."""
    reasoning_effort: str | None = attrs.field(default=None, validator=check_optional_str)
    """``reasoning.effort`` (``"none"``, ``"minimal"``, ``"low"``, ``"medium"``, ``"high"``,
    ...). Leave unset for models that do not reason (gpt-4.1 answers 400 to it)."""
    reasoning_summary: str | None = attrs.field(default=None, validator=check_optional_str)
    """``reasoning.summary`` (``"auto"``, ``"concise"``, ``"detailed"``): the model's summary
    of its reasoning, streamed as :class:`~kova.ThinkingDelta` and kept as ``thinking``."""
    store: bool = attrs.field(default=False, validator=check_flag)
    """``store``: ``False`` (the default) keeps nothing on OpenAI's side; a reasoning model's
    reasoning items are then round-tripped encrypted (``include:
    ["reasoning.encrypted_content"]``, see ``encrypted_reasoning``)."""
    encrypted_reasoning: bool | None = attrs.field(default=None, validator=check_bool)
    """Ask for ``include: ["reasoning.encrypted_content"]`` (only with ``store: false``).
    ``None`` (default): for the models that reason, by kova's table of known models
    (``o1``/``o3``/``o4-mini``, ``gpt-5`` and its ``-mini``/``-nano``/``-pro``/``-codex``,
    ``gpt-oss``), not for those that do not (``gpt-4o``, ``gpt-4.1``, ``gpt-5-chat-latest``,
    ...), which refuse it with a 400; a model the table does not know is asked, and if the
    API refuses, the request is sent again without it once and the provider remembers that
    for the model. ``True`` / ``False`` force it."""
    strict_tools: bool | None = attrs.field(default=None, validator=check_bool)
    """``strict`` on function tools: ``None`` (default) sends ``true`` for a schema that is
    already strict (every object closed with ``additionalProperties: false`` and all its
    properties required) and ``false`` otherwise, so optional parameters stay optional;
    ``True`` / ``False`` force it."""
    parallel_tool_calls: bool | None = attrs.field(default=None, validator=check_bool)
    """``parallel_tool_calls`` (the API's default is ``true``); sent only when set."""
    prompt_cache_key: str | None = attrs.field(default=None, validator=check_optional_str)
    """Routes requests that share a prefix to the same prompt cache."""
    responses_path: str = attrs.field(default="/v1/responses", validator=check_path)
    input_tokens_path: str = attrs.field(default="/v1/responses/input_tokens", validator=check_path)
    models_path: str = attrs.field(default="/v1/models", validator=check_path)
    api_version: str | None = attrs.field(default=None, validator=check_optional_str)
    """Azure's dated ``api-version`` query parameter (``"2025-04-01-preview"``); Azure's v1
    API needs none."""
    azure: bool | None = attrs.field(default=None, validator=check_bool)
    """Send the key in Azure's ``api-key`` header instead of ``Authorization: Bearer``.
    ``None``: when ``api_version`` is set or the host is an Azure OpenAI one."""

    key_variables = ("OPENAI_API_KEY",)
    provider_label = "OpenAI"

    @classmethod
    def azure_openai(
        cls,
        endpoint: str,
        *,
        deployment: str,
        api_key: str | Secret | None = None,
        api_version: str | None = None,
        **options: object,
    ) -> OpenAiResponsesConfig:
        """An Azure OpenAI resource: ``endpoint`` is ``https://<resource>.openai.azure.com``,
        ``deployment`` the model deployment. Without ``api_version`` the v1 API
        (``/openai/v1/responses``); with one, the dated path
        (``/openai/responses?api-version=...``)."""
        root = endpoint.rstrip("/")
        if api_version is None:
            return cls(
                model=deployment,
                base_url=f"{root}/openai/v1",
                api_key=api_key,
                azure=True,
                **options,  # type: ignore[arg-type]
            )
        return cls(
            model=deployment,
            base_url=root,
            api_key=api_key,
            api_version=api_version,
            responses_path="/openai/responses",
            input_tokens_path="/openai/responses/input_tokens",
            models_path="/openai/models",
            azure=True,
            **options,  # type: ignore[arg-type]
        )

    @property
    def uses_api_key_header(self) -> bool:
        """Whether the key goes in ``api-key`` (Azure) rather than as a bearer token."""
        if self.azure is not None:
            return self.azure
        host = urlsplit(self.base_url).hostname or ""
        return self.api_version is not None or host.endswith(_AZURE_HOSTS)

    def query_params(self) -> dict[str, str]:
        """Query parameters sent with every request."""
        return {"api-version": self.api_version} if self.api_version is not None else {}
