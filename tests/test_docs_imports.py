"""Every Python snippet in the docs shows its imports: a kova name a snippet uses is imported
(or defined) in that snippet, so it runs when pasted. Signature blocks (``name(arg: T)``,
``Name = A | B``) describe an API rather than run, and are left out."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PACKAGES = [
    "kova",
    "kova.actors",
    "kova.agent",
    "kova.errors",
    "kova.mcp",
    "kova.providers",
    "kova.sessions",
    "kova.telemetry",
    "kova.testing",
    "kova.tools",
    "kova.web",
]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _kova_names() -> set[str]:
    names = {"kova"}
    for package in PACKAGES:
        names.update(importlib.import_module(package).__all__)
    return names


def _is_signature(tree: ast.Module) -> bool:
    """A block that only declares an API: one expression or alias assignment per line."""
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call))
        or (isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp))
        for node in tree.body
    )


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _snippets() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


@pytest.mark.parametrize(("where", "code"), _snippets(), ids=[w for w, _ in _snippets()])
def test_a_doc_snippet_imports_the_kova_names_it_uses(where: str, code: str) -> None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        pytest.skip("not Python on its own (a signature or a fragment)")
    if _is_signature(tree):
        return
    used = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    missing = sorted((used & _kova_names()) - _defined(tree))
    assert not missing, f"{where}: the snippet uses {missing} without importing them"


def _parsed_snippets() -> list[tuple[str, ast.Module]]:
    parsed = []
    for where, code in _snippets():
        try:
            parsed.append((where, ast.parse(code)))
        except SyntaxError:
            continue
    return parsed


def test_every_kova_import_in_the_docs_names_what_its_module_exports() -> None:
    """A name moved or removed (see docs/changes.md) is caught in the docs too."""
    wrong = []
    for where, tree in _parsed_snippets():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module != "kova" and not node.module.startswith("kova."):
                continue
            module = importlib.import_module(node.module)
            wrong.extend(
                f"{where}: from {node.module} import {alias.name}"
                for alias in node.names
                if alias.name != "*" and not hasattr(module, alias.name)
            )
    assert not wrong, wrong
