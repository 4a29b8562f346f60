"""The CLI's provider table: flags first, then environment."""

from __future__ import annotations

import pytest

from kova.cli._providers import PROVIDERS, ProviderSelectionError, select_provider
from kova.providers.anthropic import AnthropicProvider
from kova.providers.openai import OpenAiCompatibleProvider


def test_the_flag_wins_over_the_environment() -> None:
    env = {"KOVA_PROVIDER": "openai", "OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}
    selected = select_provider("anthropic", None, None, environ=env)
    assert selected.name == "anthropic"
    assert isinstance(selected.provider, AnthropicProvider)
    assert selected.model == PROVIDERS["anthropic"].default_model


def test_the_provider_whose_key_is_set_is_chosen() -> None:
    selected = select_provider(None, None, None, environ={"OPENAI_API_KEY": "k"})
    assert selected.name == "openai"
    assert isinstance(selected.provider, OpenAiCompatibleProvider)


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_provider_in_the_table_builds(name: str) -> None:
    selected = select_provider(name, None, "http://127.0.0.1:9", environ={})
    assert selected.name == name
    assert selected.model == PROVIDERS[name].default_model
    assert selected.provider.name


def test_model_and_base_url_come_from_the_environment() -> None:
    env = {"KOVA_PROVIDER": "openai", "KOVA_MODEL": "m1", "OPENAI_BASE_URL": "http://127.0.0.1:9"}
    selected = select_provider(None, None, None, environ=env)
    assert selected.model == "m1"
    assert selected.provider.config.base_url == "http://127.0.0.1:9"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "message"),
    [(None, f"pass --provider ({', '.join(PROVIDERS)})"), ("gemni", "unknown provider 'gemni'")],
)
def test_no_usable_provider_says_what_to_do(name: str | None, message: str) -> None:
    with pytest.raises(
        ProviderSelectionError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        select_provider(name, None, None, environ={})


@pytest.mark.parametrize("name", ["gemini", "bedrock", "openai", "anthropic"])
def test_a_config_the_provider_refuses_is_a_selection_error(name: str) -> None:
    # A base URL without a scheme: the user sees one line, not a traceback.
    with pytest.raises(ProviderSelectionError, match=f"{name}: .*must be an http"):
        select_provider(name, None, "localhost:8080", environ={"GEMINI_API_KEY": "k"})


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_key_variable_a_header_cannot_carry_is_named(name: str) -> None:
    variable = PROVIDERS[name].key_env
    assert variable is not None
    with pytest.raises(ProviderSelectionError, match=f"{name}: the {variable} environment") as e:
        select_provider(name, None, None, environ={variable: "sk-pasted-with-a-newline\n"})
    assert "pasted" not in str(e.value)
