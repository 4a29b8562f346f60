"""``kova serve --sessions-db FILE``: the page's conversations are sessions of that file (the
page lists, opens and continues them: tests/web/test_browser_sessions.py)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from kova.cli._main import main

if TYPE_CHECKING:
    from pathlib import Path


def test_serve_help_names_the_sessions_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--sessions-db" in capsys.readouterr().out


def test_serve_keeps_its_sessions_in_the_file_given(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "web.db"
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "kova.cli._main", "serve", "--demo", "--port", "0"),
            *("--sessions-db", str(path)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        assert f"kova serve: sessions in {path}\n" in lines, lines
        assert any("open http://" in line for line in lines), lines
        with sqlite3.connect(path) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert {"kova_sessions", "kova_session_holds"} <= tables
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "Traceback" not in errors
