"""What the CLI says when something around it is wrong: one line naming the problem and,
where there is one, the fix; never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kova.cli import main
from kova.cli._providers import ProviderSelectionError, select_provider

ROOT = Path(__file__).resolve().parents[2]


def _kova(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kova", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=str(ROOT),
        env=env,
    )


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from kova import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"kova {__version__}"


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_a_missing_key_is_named_as_the_environment_variable(name: str, variable: str) -> None:
    with pytest.raises(ProviderSelectionError) as raised:
        select_provider(name, None, None, environ={})
    message = str(raised.value)
    assert f"set the environment variable {variable}" in message
    assert f"export {variable}=" in message
    assert "Config(" not in message  # not the Python spelling


def test_a_key_is_not_demanded_where_the_provider_has_other_ways() -> None:
    # Gemini's second variable, Bedrock's AWS chain, a base URL of one's own (a local server).
    assert select_provider("gemini", None, None, environ={"GOOGLE_API_KEY": "k"}).name == "gemini"
    assert select_provider("bedrock", None, None, environ={}).name == "bedrock"
    assert select_provider("openai", None, "http://127.0.0.1:9", environ={}).name == "openai"


def test_chat_without_a_key_says_export() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    result = _kova("chat", "--provider", "anthropic", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "kova: no API key for anthropic: set the environment variable ANTHROPIC_API_KEY "
        "(export ANTHROPIC_API_KEY=...)"
    )


def test_an_mcp_command_that_does_not_exist_is_named() -> None:
    result = _kova("mcp", "tools", "--", "kova-no-such-command", "--flag")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "kova: MCP server command not found: kova-no-such-command "
        "(in `kova-no-such-command --flag`)"
    )


def test_chat_with_an_mcp_command_that_does_not_exist_is_named() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "OPENAI_API_KEY": "k"}
    result = _kova("chat", "--provider", "openai", "--mcp", "kova-no-such-command", env=env)
    assert result.returncode == 2
    assert "MCP server command not found: kova-no-such-command" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_mcp_server_that_exits_shows_its_status_and_stderr() -> None:
    code = "import sys; print('starting', file=sys.stderr); sys.exit('bad config: no token')"
    result = _kova("mcp", "tools", "--", sys.executable, "-c", code)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("kova: the MCP server `")
    assert lines[0].endswith("exited with status 1 before it answered; the end of its stderr:")
    assert lines[1:] == ["  starting", "  bad config: no token"]
    assert "Connection closed" not in result.stderr


def test_serve_on_a_busy_port_says_so_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--demo", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"kova: port {port} on 127.0.0.1 is already in use; pass --port 0 to use any free port"
    )
