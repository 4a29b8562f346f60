"""Public packages export exactly what their ``__all__`` says, sorted, and nothing private."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = [
    "kova",
    "kova.actors",
    "kova.agent",
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
