"""``kova serve``'s command line (the page itself is tested in tests/web/test_browser.py)."""

from __future__ import annotations

import pytest

from kova.cli import main


def test_serve_without_a_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve"])
    assert exited.value.code == 2
    assert "--demo" in capsys.readouterr().err


def test_serve_help_names_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    for flag in ("--demo", "--host", "--port", "--system", "--yes"):
        assert flag in help_text
