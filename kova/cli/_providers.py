"""Which provider the CLI talks to: one small table keyed by name.

A provider that lands later (gemini, ollama, bedrock) is one more :class:`ProviderChoice` in
:data:`PROVIDERS`: how to build it from ``--model`` / ``--base-url`` and which environment
variables hold its key and defaults. Nothing else in the CLI names a provider.
"""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import TYPE_CHECKING

from .._record import Record
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..providers import Provider

__all__ = [
    "PROVIDERS",
    "ProviderChoice",
    "ProviderSelectionError",
    "SelectedProvider",
    "select_provider",
]


class ProviderChoice(Record):
    """How the CLI builds one provider."""

    build: Callable[[str, str | None, str | None], Provider]
    """``build(model, base_url, api_key)``; ``None`` means the provider's own default."""
    default_model: str
    key_env: str | None
    """The environment variable holding the API key (``None``: the provider needs none)."""
    base_url_env: str | None = None
    other_key_env: str | None = None
    """A second variable the provider reads the key from (Gemini's ``GOOGLE_API_KEY``)."""
    key_optional: bool = False
    """The provider has other credentials (Bedrock: the AWS chain), so a missing key is
    not an error here."""


def _openai(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.openai import OpenAiCompatibleProvider, OpenAiConfig

    if base_url is None:
        return OpenAiCompatibleProvider(OpenAiConfig(model=model, api_key=api_key))
    return OpenAiCompatibleProvider(OpenAiConfig(model=model, base_url=base_url, api_key=api_key))


def _openai_responses(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.openai import OpenAiResponsesConfig, OpenAiResponsesProvider

    if base_url is None:
        return OpenAiResponsesProvider(OpenAiResponsesConfig(model=model, api_key=api_key))
    return OpenAiResponsesProvider(
        OpenAiResponsesConfig(model=model, base_url=base_url, api_key=api_key)
    )


def _anthropic(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.anthropic import AnthropicConfig, AnthropicProvider

    if base_url is None:
        return AnthropicProvider(AnthropicConfig(model=model, api_key=api_key))
    return AnthropicProvider(AnthropicConfig(model=model, base_url=base_url, api_key=api_key))


def _gemini(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.gemini import GeminiConfig, GeminiProvider

    if base_url is None:
        return GeminiProvider(GeminiConfig(model=model, api_key=api_key))
    return GeminiProvider(GeminiConfig(model=model, base_url=base_url, api_key=api_key))


def _ollama(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.ollama import OllamaConfig, OllamaProvider

    del api_key  # a local server needs none
    if base_url is None:  # OllamaConfig reads OLLAMA_HOST itself
        return OllamaProvider(OllamaConfig(model=model))
    return OllamaProvider(OllamaConfig(model=model, base_url=base_url))


def _bedrock(model: str, base_url: str | None, api_key: str | None) -> Provider:
    from ..providers.bedrock import BedrockConfig, BedrockProvider

    # Credentials come from the AWS chain (or AWS_BEARER_TOKEN_BEDROCK); the region from
    # the usual variables.
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return BedrockProvider(
        BedrockConfig(region=region, model_id=model, endpoint_url=base_url, api_key=api_key)
    )


PROVIDERS: Mapping[str, ProviderChoice] = MappingProxyType(
    {
        "anthropic": ProviderChoice(
            build=_anthropic,
            default_model="claude-sonnet-4-5",
            key_env="ANTHROPIC_API_KEY",
            base_url_env="ANTHROPIC_BASE_URL",
        ),
        "openai": ProviderChoice(
            build=_openai,
            default_model="gpt-4.1",
            key_env="OPENAI_API_KEY",
            base_url_env="OPENAI_BASE_URL",
        ),
        "openai-responses": ProviderChoice(
            build=_openai_responses,
            default_model="gpt-5.4",
            key_env="OPENAI_API_KEY",
            base_url_env="OPENAI_BASE_URL",
        ),
        "gemini": ProviderChoice(
            build=_gemini,
            default_model="gemini-2.5-flash",
            key_env="GEMINI_API_KEY",
            other_key_env="GOOGLE_API_KEY",
        ),
        "ollama": ProviderChoice(build=_ollama, default_model="llama3.2", key_env=None),
        "bedrock": ProviderChoice(
            build=_bedrock,
            default_model="anthropic.claude-sonnet-4-20250514-v1:0",
            key_env="AWS_BEARER_TOKEN_BEDROCK",
            key_optional=True,
        ),
    }
)
"""Every provider ``--provider`` accepts, by name."""


class SelectedProvider(Record):
    name: str
    model: str
    provider: Provider


class ProviderSelectionError(CliError):
    """The flags and environment do not name a usable provider (shown to the user as is)."""


def select_provider(
    name: str | None,
    model: str | None,
    base_url: str | None,
    *,
    environ: Mapping[str, str] | None = None,
) -> SelectedProvider:
    """The provider chosen by flags, then environment.

    ``name``: ``--provider``, else ``KOVA_PROVIDER``, else the first provider in the table
    whose key variable is set. ``model``: ``--model``, else ``KOVA_MODEL``, else the provider's
    default. ``base_url``: ``--base-url``, else the provider's own variable
    (``OPENAI_BASE_URL``, ...).

    Raises:
        ProviderSelectionError: an unknown name, nothing to go on, no key in the environment
            for a provider's own endpoint (said as the variable to set), or a value the
            provider's config refuses (a base URL without a scheme, say).
    """
    env = os.environ if environ is None else environ
    chosen = name or env.get("KOVA_PROVIDER") or None
    if chosen is None:
        chosen = next(
            (
                key
                for key, choice in PROVIDERS.items()
                if choice.key_env and env.get(choice.key_env)
            ),
            None,
        )
    if chosen is None:
        names = ", ".join(PROVIDERS)
        keys = ", ".join(dict.fromkeys(c.key_env for c in PROVIDERS.values() if c.key_env))
        raise ProviderSelectionError(
            f"no provider chosen: pass --provider ({names}) or set one of {keys}"
        )
    choice = PROVIDERS.get(chosen)
    if choice is None:
        raise ProviderSelectionError(
            f"unknown provider {chosen!r}; known providers: {', '.join(PROVIDERS)}"
        )
    model = model or env.get("KOVA_MODEL") or choice.default_model
    if base_url is None and choice.base_url_env:
        base_url = env.get(choice.base_url_env) or None
    api_key = env.get(choice.key_env) if choice.key_env else None
    if choice.key_env and not api_key and not choice.key_optional:
        other = env.get(choice.other_key_env) if choice.other_key_env else None
        # With a base URL of its own (a proxy, a local server) a key may not be needed:
        # the server says so if it is.
        if not other and base_url is None:
            raise ProviderSelectionError(
                f"no API key for {chosen}: set the environment variable {choice.key_env} "
                f"(export {choice.key_env}=...)"
            )
    try:
        provider = choice.build(model, base_url, api_key or None)
    except (TypeError, ValueError) as exc:  # the provider's config refused a flag's value
        message = str(exc)
        if api_key and choice.key_env and message.startswith("api_key "):
            # The key came from the environment: name the variable to fix.
            message = f"the {choice.key_env} environment variable{message[len('api_key') :]}"
        raise ProviderSelectionError(f"{chosen}: {message}") from exc
    return SelectedProvider(name=chosen, model=model, provider=provider)
