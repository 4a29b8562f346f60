"""kova's one rule for classes that hold data (``kova/_record.py``, docs/contributing.md): a
frozen value is a ``Record``, mutable state a plain slotted class, and attrs is left to the
user-facing configurations whose fields convert what the caller passes. These tests pin it,
so the next class declared with attrs outside that list fails here, naming the rule.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import attrs

import kova

ROOT = Path(kova.__file__).parent

ATTRS_CONFIGS = {
    "kova.mcp._transports": {
        "SseTransport",
        "StdioTransport",
        "StreamableHttpTransport",
        "_HttpFields",  # the two HTTP transports' common fields, converted as theirs are
    },
    "kova.providers._settings": {"HttpSettings"},
    "kova.providers.anthropic._config": {"AnthropicConfig"},
    "kova.providers.bedrock._config": {"BedrockConfig"},
    "kova.providers.gemini._config": {"GeminiConfig", "GeminiEmbeddingConfig"},
    "kova.providers.ollama._config": {"OllamaConfig", "OllamaEmbeddingConfig"},
    "kova.providers.openai._config": {"OpenAiConfig"},
    "kova.providers.openai._embeddings": {"OpenAiEmbeddingConfig"},
    "kova.providers.openai._responses_config": {"OpenAiResponsesConfig"},
    "kova.telemetry._config": {"TelemetryConfig"},
    "kova.tools._policy": {"ToolPolicy", "WebPolicy"},
}
"""Every attrs class in kova, by module: each a configuration whose fields convert input."""

RULE = (
    "kova's rule (kova/_record.py, docs/contributing.md): a frozen value is a Record, "
    "mutable state a plain class with __slots__; attrs only for a user-facing config whose "
    "fields convert what the caller passes (then list it in ATTRS_CONFIGS)"
)


def _attrs_classes(source: str) -> set[str]:
    """The classes of a module's source that an attrs decorator makes (an import under
    ``if TYPE_CHECKING:`` makes nothing: ``Record`` shows mypy's attrs plugin an attrs view)."""
    tree = ast.parse(source)
    hidden = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for sub in ast.walk(statement)
    }
    from_attrs = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in {"attrs", "attr"}
        if id(node) not in hidden
        for alias in node.names
    }
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            name = ast.unparse(target)
            if name.split(".")[0] in {"attrs", "attr"} or name in from_attrs:
                found.add(node.name)
    return found


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _kova_attrs_classes() -> dict[str, set[str]]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        classes = _attrs_classes(source) if "attr" in source else set()
        if classes:
            found[_module_name(path)] = classes
    return found


def test_attrs_declares_only_the_listed_configs() -> None:
    found = _kova_attrs_classes()
    extra = {
        f"{module}.{name}"
        for module, names in found.items()
        for name in names - ATTRS_CONFIGS.get(module, set())
    }
    assert not extra, f"attrs classes outside the rule: {sorted(extra)}. {RULE}"
    # And the list holds no class that is no longer one (it would hide the next one).
    assert found == ATTRS_CONFIGS


def test_the_scanner_finds_every_spelling_of_an_attrs_class() -> None:
    source = """
import attrs
import attr
from attrs import define as d, frozen

@attrs.define
class A: ...

@attrs.frozen(kw_only=True)
class B: ...

@attr.s(slots=True)
class C: ...

@d
class D: ...

@frozen(kw_only=True)
class E: ...

@some_other.decorator
class F: ...

class G(A): ...

if TYPE_CHECKING:
    from attrs import frozen as view
else:
    def view(cls): return cls

@view
class H: ...
"""
    assert _attrs_classes(source) == {"A", "B", "C", "D", "E"}


def test_every_listed_config_converts_what_the_caller_passes() -> None:
    for module_name, names in ATTRS_CONFIGS.items():
        module = __import__(module_name, fromlist=["_"])
        for name in names:
            cls = getattr(module, name)
            converting = [field.name for field in attrs.fields(cls) if field.converter]
            assert converting, f"{module_name}.{name} converts nothing: a Record. {RULE}"


def test_import_kova_agent_imports_no_attrs_config() -> None:
    code = (
        "import sys, kova.agent\n"
        f"print(sorted(set(sys.modules).intersection({sorted(ATTRS_CONFIGS)!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stdout
