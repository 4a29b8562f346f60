"""The HTTP settings every provider config shares, and where API keys come from."""

from __future__ import annotations

from typing import Any

import attrs
import httpx2
import pytest

from kova import ProviderAuthError, ProviderError, Secret
from kova.providers import ChatRequest
from kova.providers._http import HttpTransport
from kova.providers._settings import HttpSettings
from kova.providers.anthropic import AnthropicConfig, AnthropicProvider
from kova.providers.bedrock import BedrockConfig
from kova.providers.bedrock._codec import BedrockCodec
from kova.providers.gemini import GeminiConfig, GeminiProvider
from kova.providers.ollama import OllamaConfig
from kova.providers.openai import OpenAiConfig, OpenAiResponsesConfig

CONFIGS: list[HttpSettings] = [
    AnthropicConfig(model="m", api_key="k"),
    OpenAiConfig(model="m", api_key="k"),
    OpenAiResponsesConfig(model="m", api_key="k"),
    GeminiConfig(model="m", api_key="k"),
    OllamaConfig(model="m"),
    BedrockConfig(region="us-east-1", model_id="m", api_key="k"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda config: type(config).__name__)
def test_every_config_checks_the_shared_settings_the_same_way(config: HttpSettings) -> None:
    assert isinstance(config, HttpSettings)
    changes: list[tuple[str, Any]] = [
        ("timeout", 0),
        ("total_timeout", -1.0),
        ("stream_timeout", 0.0),
        ("connect_timeout", -5),
        ("max_response_bytes", 0),
    ]
    for field, value in changes:
        with pytest.raises(ValueError, match=field):
            attrs.evolve(config, **{field: value})
    with pytest.raises(TypeError, match="timeout must be a number"):
        attrs.evolve(config, timeout="30")  # type: ignore[arg-type]


def test_the_provider_defaults_survive_the_shared_base() -> None:
    assert AnthropicConfig(model="m").timeout == 600.0
    assert AnthropicConfig(model="m").total_timeout == 900.0
    assert OpenAiConfig(model="m").timeout == 30.0
    assert OpenAiResponsesConfig(model="m").timeout == 60.0
    assert OllamaConfig(model="m").total_timeout == 900.0
    assert BedrockConfig(region="r", model_id="m").timeout == 60.0
    assert GeminiConfig(model="m").max_response_bytes == 64 * 1024 * 1024


def test_connect_timeouts_follow_the_providers_defaults_unless_given() -> None:
    # Anthropic's SDK connects within 5 s, Bedrock within 10; the others use the read timeout.
    assert AnthropicConfig(model="m").http_options()["connect_timeout"] == 5.0
    assert AnthropicConfig(model="m", timeout=2).http_options()["connect_timeout"] == 2
    assert AnthropicConfig(model="m", connect_timeout=7).http_options()["connect_timeout"] == 7
    assert BedrockConfig(region="r", model_id="m").http_options()["connect_timeout"] == 10.0
    assert OpenAiConfig(model="m").http_options()["connect_timeout"] is None
    options = OllamaConfig(model="m", stream_timeout=30).http_options()
    assert options == {
        "timeout": 120.0,
        "connect_timeout": None,
        "total_timeout": 900.0,
        "stream_timeout": 30,
        "max_response_bytes": 64 * 1024 * 1024,
    }


def test_keys_are_read_from_the_environment_when_the_config_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    config = AnthropicConfig(model="m")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert config.api_key == Secret("from-env")
    assert "from-env" not in repr(config)
    assert AnthropicConfig(model="m", api_key="given").api_key == Secret("given")


@pytest.mark.parametrize(
    ("variable", "make"),
    [
        ("ANTHROPIC_API_KEY", lambda **kw: AnthropicConfig(model="m", **kw)),
        ("OPENAI_API_KEY", lambda **kw: OpenAiConfig(model="m", **kw)),
        ("GEMINI_API_KEY", lambda **kw: GeminiConfig(model="m", **kw)),
    ],
)
def test_an_empty_key_means_none_and_the_environment_is_not_asked(
    monkeypatch: pytest.MonkeyPatch, variable: str, make: type[HttpSettings]
) -> None:
    monkeypatch.setenv(variable, "from-env")
    assert make().api_key == Secret("from-env")
    assert make(api_key="").api_key is None


def test_ollama_reads_no_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", "x")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    assert OllamaConfig(model="m").api_key is None


def test_the_bedrock_bearer_token_is_read_only_without_aws_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "token")
    assert BedrockConfig(region="r", model_id="m").api_key == Secret("token")
    assert BedrockConfig(region="r", model_id="m", profile="p").api_key is None
    explicit = BedrockConfig(region="r", model_id="m", access_key_id="AKIA", secret_access_key="s")
    assert explicit.api_key is None


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        (
            lambda: AnthropicProvider(AnthropicConfig(model="m", base_url="http://127.0.0.1:9")),
            "anthropic: no Anthropic API key: pass AnthropicConfig(api_key=...) or set "
            "ANTHROPIC_API_KEY",
        ),
        (
            lambda: GeminiProvider(GeminiConfig(model="m", base_url="http://127.0.0.1:9")),
            "gemini: no Gemini API key: pass GeminiConfig(api_key=...) or set GEMINI_API_KEY or "
            "GOOGLE_API_KEY",
        ),
    ],
)
async def test_a_missing_key_fails_with_one_line_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch, provider: object, expected: str
) -> None:
    for variable in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    made = provider()  # type: ignore[operator]
    request = ChatRequest.of("hi")

    async def stream() -> None:
        async with made.chat_completion_stream(request):
            pass

    calls = {
        "chat_completion": lambda: made.chat_completion(request),
        "chat_completion_stream": stream,
        "count_tokens": lambda: made.count_tokens(request),
        "list_models": made.list_models,
    }
    async with made.open():
        for name, call in calls.items():
            # The key is checked before anything is sent: the base URL's port 9 is never
            # dialled (a connection error, not the credential error, would say it was).
            with pytest.raises(ProviderAuthError) as caught:
                await call()
            assert str(caught.value).splitlines() == [expected], name


async def test_the_shared_transport_reads_no_provider_header() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            400, json={"message": "m"}, headers={"x-amzn-errortype": "ThrottlingException:x"}
        )

    plain = HttpTransport(
        provider="test", base_url="http://api.test", transport=httpx2.MockTransport(answer)
    )
    codec = BedrockCodec(BedrockConfig(region="r", model_id="m", api_key="k"))
    bedrock = HttpTransport(
        provider="bedrock",
        base_url="http://api.test",
        transport=httpx2.MockTransport(answer),
        header_error_type=codec.header_error_type,
    )
    async with plain.open(), bedrock.open():
        with pytest.raises(ProviderError) as unread:
            await plain.request_json("GET", "/x")
        with pytest.raises(ProviderError) as read:
            await bedrock.request_json("GET", "/x")
    assert unread.value.error_type is None
    assert read.value.error_type == "ThrottlingException"


# A value of the wrong type fails where the config is built, naming the field: before, these
# were accepted and failed (or were sent as given) on every call: an AttributeError from the
# codec (`chat_completions_path=None`, `base_url=5`), a UnicodeEncodeError or a retried
# "connection failed" from a key with a newline or a lone surrogate, a TypeError from json for
# a non-JSON option, or a request the server rejected (`model=3`, `temperature="hot"`).
WRONG_VALUES: list[tuple[type[HttpSettings], dict[str, Any], type[Exception], str]] = [
    (OpenAiConfig, {"model": 3}, TypeError, "model must be a string"),
    (OpenAiConfig, {"model": ""}, ValueError, "model must not be empty"),
    (OpenAiConfig, {"base_url": 5}, TypeError, "base_url must be a string"),
    (OpenAiConfig, {"base_url": "ftp://x"}, ValueError, "base_url must be an http"),
    (OpenAiConfig, {"temperature": "hot"}, TypeError, "temperature must be a number"),
    (OpenAiConfig, {"max_tokens": True}, TypeError, "max_tokens must be an int"),
    (OpenAiConfig, {"max_tokens": 0}, ValueError, "max_tokens must be at least 1"),
    (OpenAiConfig, {"max_tokens_field": "tokens"}, ValueError, "max_tokens_field"),
    (OpenAiConfig, {"chat_completions_path": None}, TypeError, "chat_completions_path"),
    (OpenAiConfig, {"models_path": "v1/models"}, ValueError, "starting with '/'"),
    (OpenAiConfig, {"reasoning_effort": 3}, TypeError, "reasoning_effort must be a string"),
    (OpenAiConfig, {"api_version": ""}, ValueError, "api_version must not be empty"),
    (OpenAiConfig, {"echo_reasoning": "yes"}, TypeError, "echo_reasoning must be True or"),
    (OpenAiResponsesConfig, {"temperature": "hot"}, TypeError, "temperature must be a"),
    (OpenAiResponsesConfig, {"store": None}, TypeError, "store must be True or False"),
    (OpenAiResponsesConfig, {"azure": "yes"}, TypeError, "azure must be a bool"),
    (OpenAiResponsesConfig, {"max_output_tokens": 8}, ValueError, "at least 16"),
    (OpenAiResponsesConfig, {"responses_path": 1}, TypeError, "responses_path"),
    (AnthropicConfig, {"model": 3}, TypeError, "model must be a string"),
    (AnthropicConfig, {"base_url": "api.anthropic.com"}, ValueError, "base_url must be an"),
    (AnthropicConfig, {"cache": "no"}, TypeError, "cache must be True or False"),
    (AnthropicConfig, {"adaptive_thinking": 0}, TypeError, "adaptive_thinking must be"),
    (AnthropicConfig, {"max_tokens": "1000"}, TypeError, "max_tokens must be an int"),
    (OllamaConfig, {"extra_options": {"seed": object()}}, TypeError, "JSON values only"),
    (BedrockConfig, {"additional_model_request_fields": 5}, TypeError, "must be a mapping"),
    (BedrockConfig, {"additional_model_request_fields": {"a": {1, 2}}}, TypeError, "JSON"),
    (BedrockConfig, {"endpoint_url": 5}, ValueError, "endpoint_url must be an http"),
    (BedrockConfig, {"profile": 5}, TypeError, "profile must be a string"),
    (BedrockConfig, {"cache_prompt": "yes"}, TypeError, "cache_prompt must be True"),
]


@pytest.mark.parametrize(
    ("config_type", "values", "error", "message"),
    WRONG_VALUES,
    ids=[f"{case[0].__name__}-{next(iter(case[1]))}" for case in WRONG_VALUES],
)
def test_a_wrong_value_fails_where_the_config_is_built(
    config_type: type[HttpSettings], values: dict[str, Any], error: type[Exception], message: str
) -> None:
    required: dict[str, Any] = (
        {"region": "us-east-1", "model_id": "m"} if config_type is BedrockConfig else {"model": "m"}
    )
    with pytest.raises(error, match=message):
        config_type(**{**required, **values})


@pytest.mark.parametrize("config", CONFIGS, ids=lambda config: type(config).__name__)
def test_a_key_an_http_header_cannot_carry_fails_without_showing_it(config: HttpSettings) -> None:
    for key in ("sk-secret-value\n", "sk-secret\ud83d-value", "sk-secret\x00value"):
        with pytest.raises(ValueError, match=r"api_key holds .* HTTP header") as caught:
            attrs.evolve(config, api_key=key)
        assert "secret" not in str(caught.value)
    with pytest.raises(ValueError, match=r"extra_headers\['x-key'\] holds"):
        attrs.evolve(config, extra_headers={"x-key": "v\r\nx-injected: 1"})


def test_a_key_variable_an_http_header_cannot_carry_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-pasted-with-its-newline\n")
    with pytest.raises(ValueError, match="the OPENAI_API_KEY environment variable holds '\\\\n'"):
        OpenAiConfig(model="m")
