"""docs/testing.md documents every public name of kova.testing."""

from __future__ import annotations

from pathlib import Path

import pytest

import kova.testing

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
HEADINGS = [line for line in PAGE.splitlines() if line.startswith("### ")]


@pytest.mark.parametrize("name", kova.testing.__all__)
def test_every_public_name_has_a_section(name: str) -> None:
    assert any(f"`{name}`" in heading for heading in HEADINGS), name
