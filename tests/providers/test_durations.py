"""A duration kova cannot wait (NaN, infinity, negative, zero where it must be positive) is
refused where the config is made, with a ConfigError naming the field (issue 43, item 5):
every call failed later with a raw ``ValueError`` from trio."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kova import BuildError, ConfigError
from kova.agent import RetryConfig
from kova.providers.anthropic import AnthropicConfig
from kova.providers.bedrock import BedrockConfig
from kova.providers.gemini import GeminiConfig, GeminiEmbeddingConfig
from kova.providers.ollama import OllamaConfig, OllamaEmbeddingConfig
from kova.providers.openai import (
    OpenAiConfig,
    OpenAiEmbeddingConfig,
    OpenAiResponsesConfig,
)
from kova.telemetry import TelemetryConfig
from kova.tools import ToolPolicy, WebPolicy

CONFIGS: dict[str, Any] = {
    "openai": lambda **kw: OpenAiConfig(model="m", api_key="k", **kw),
    "responses": lambda **kw: OpenAiResponsesConfig(model="m", api_key="k", **kw),
    "anthropic": lambda **kw: AnthropicConfig(model="m", api_key="k", **kw),
    "gemini": lambda **kw: GeminiConfig(model="m", api_key="k", **kw),
    "ollama": lambda **kw: OllamaConfig(model="m", **kw),
    "bedrock": lambda **kw: BedrockConfig(region="us-east-1", model_id="m", **kw),
    "openai-embeddings": lambda **kw: OpenAiEmbeddingConfig(api_key="k", **kw),
    "gemini-embeddings": lambda **kw: GeminiEmbeddingConfig(api_key="k", **kw),
    "ollama-embeddings": lambda **kw: OllamaEmbeddingConfig(model="m", **kw),
}
BAD = [math.nan, math.inf, -math.inf, -1.0, 0]


@pytest.mark.parametrize("value", BAD, ids=repr)
@pytest.mark.parametrize("field", ["timeout", "connect_timeout", "total_timeout", "stream_timeout"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_provider_config_refuses_a_duration_it_cannot_wait(
    name: str, field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=field) as info:
        CONFIGS[name](**{field: value})
    assert isinstance(info.value, ValueError)  # as before, for callers catching that
    assert isinstance(info.value, BuildError)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_no_deadline_is_none_and_finite_seconds_are_taken(name: str) -> None:
    config = CONFIGS[name](timeout=2.5, total_timeout=None, stream_timeout=None)
    assert config.timeout == 2.5
    assert config.total_timeout is None
    with pytest.raises(ConfigError, match=r"timeout must be a finite number .*None means no"):
        CONFIGS[name](total_timeout=math.inf)


@pytest.mark.parametrize("value", [math.nan, -0.5, -math.inf], ids=repr)
@pytest.mark.parametrize(
    "field", ["initial_backoff", "multiplier", "max_backoff", "jitter", "max_retry_after"]
)
def test_retry_config_refuses_negative_and_nan(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"RetryConfig.{field}"):
        RetryConfig(**{field: value})


@pytest.mark.parametrize("field", ["initial_backoff", "multiplier", "max_backoff"])
def test_retry_config_refuses_infinite_backoff(field: str) -> None:
    with pytest.raises(ConfigError, match=f"RetryConfig.{field} must be finite"):
        RetryConfig(**{field: math.inf})
    assert RetryConfig(max_retry_after=math.inf).max_retry_after == math.inf  # wait as asked


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_tool_policies_refuse_a_duration_they_cannot_wait(value: float) -> None:
    with pytest.raises(ConfigError, match="shell_timeout"):
        ToolPolicy(workspace_root=None, shell_timeout=value)
    with pytest.raises(ConfigError, match="timeout"):
        WebPolicy(timeout=value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_telemetry_refuses_a_metric_interval_it_cannot_wait(value: float) -> None:
    with pytest.raises(ConfigError, match="metric_interval"):
        TelemetryConfig(metric_interval=value)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_the_http_provider_refuses_a_duration_it_cannot_wait(value: float) -> None:
    from kova.providers import HttpProvider
    from kova.providers.openai import OpenAiCompatibleProvider

    codec = OpenAiCompatibleProvider(OpenAiConfig(model="m", api_key="k")).codec
    for field in ("timeout", "connect_timeout", "total_timeout", "stream_timeout"):
        with pytest.raises(ConfigError, match=field):
            HttpProvider(codec, base_url="http://127.0.0.1:1", **{field: value})


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0], ids=repr)
def test_supervision_refuses_a_delay_it_cannot_wait(value: float) -> None:
    from kova.actors import Backoff
    from kova.actors._spec import check_supervisor_args

    for field in ("initial", "factor", "maximum"):
        with pytest.raises(ConfigError, match=field):
            Backoff(**{field: value})
    with pytest.raises(ConfigError, match="within"):
        check_supervisor_args("one_for_one", 3, value)
