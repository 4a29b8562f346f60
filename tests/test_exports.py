"""Public packages export exactly what their ``__all__`` says, sorted, and nothing private."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "kova",
    "kova.actors",
    "kova.agent",
    "kova.asyncio",
    "kova.errors",
    "kova.mcp",
    "kova.providers",
    "kova.providers.anthropic",
    "kova.providers.bedrock",
    "kova.providers.gemini",
    "kova.providers.ollama",
    "kova.providers.openai",
    "kova.telemetry",
    "kova.testing",
    "kova.tools",
    "kova.web",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_complete_and_public(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for symbol in exported:
        assert not symbol.startswith("_"), f"{name} exports private {symbol}"
        assert hasattr(module, symbol), f"{name}.__all__ names missing {symbol}"
    public = {
        attribute
        for attribute in vars(module)
        if not attribute.startswith("_") and not inspect.ismodule(getattr(module, attribute))
    }
    assert public - set(exported) == set(), f"{name} has public names missing from __all__"


def test_every_agent_event_class_is_importable_from_kova_agent() -> None:
    import typing

    import kova
    import kova.agent

    for event in typing.get_args(kova.agent.AgentEvent):
        assert getattr(kova.agent, event.__name__) is event
        assert event.__name__ in kova.agent.__all__
    for name in ("TextDelta", "ThinkingDelta"):  # and they stay in kova
        assert getattr(kova, name) is getattr(kova.agent, name)


def test_retry_config_has_a_real_signature() -> None:
    from kova.agent import RetryConfig

    parameters = inspect.signature(RetryConfig).parameters
    assert list(parameters) == [
        "max_retries",
        "initial_backoff",
        "multiplier",
        "max_backoff",
        "jitter",
        "max_retry_after",
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert parameters["max_retries"].default == 2
    assert parameters["initial_backoff"].annotation == "float"
