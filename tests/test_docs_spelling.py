"""The docs show one spelling per call; aliases appear once, in the alias table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kova.agent import AgentBuilder

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ALIASES = ["with_approval_handler", "with_lifecycle_hook"]


@pytest.mark.parametrize("alias", ALIASES)
def test_an_alias_appears_once_in_the_docs(alias: str) -> None:
    pattern = re.compile(re.escape(alias) + r"\b")
    places = [
        f"{path.name}:{number}"
        for path in DOCS
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert len(places) == 1, places


def test_aliases_are_the_same_calls() -> None:
    assert AgentBuilder.with_approval_handler is AgentBuilder.approval_handler
    assert AgentBuilder.with_lifecycle_hook is AgentBuilder.lifecycle_hook
