"""`kova demo` runs a real agent over real HTTP against the scripted fake server."""

from __future__ import annotations

import subprocess
import sys


def test_demo_streams_a_tool_loop_over_http() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kova.cli._main", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "The model is a SCRIPT" in out
    assert 'tool call   get_weather({"city": "Oslo"})' in out
    assert "tool result -3°C, light snow" in out
    assert "Right now in Oslo it is -3°C" in out
    assert "2 model calls over HTTP" in out
    assert "the fake server saw 2 chat completion requests" in out
    assert "[debug" not in out  # the CLI keeps kova's debug events quiet


def test_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kova.cli._main", "version"],
        capture_output=True,
        text=True,
        check=True,
    )
    import kova

    assert result.stdout.strip() == kova.__version__
