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


def test_the_demo_model_names_the_cities_it_knows() -> None:
    from kova import Message, ToolResult
    from kova.cli._main import _demo_model
    from kova.providers import ChatRequest
    from kova.testing import ScriptRequest

    def asked(*messages: Message) -> str:
        request = ScriptRequest(request=ChatRequest(messages=messages), stream=False)
        return _demo_model(request).text

    assert asked(Message.user("will it rain?")).endswith("This demo knows Oslo, Lisbon, Tokyo.")
    call = _demo_model(
        ScriptRequest(
            request=ChatRequest(messages=(Message.user("weather in Paris?"),)), stream=False
        )
    ).tool_uses[0]
    no_data = Message.tool_results(
        [ToolResult(tool_use_id=call.id, content="no data for that city")]
    )
    answer = asked(Message.user("weather in Paris?"), Message.assistant([call]), no_data)
    assert answer == "I have no weather data for Paris; this demo knows Oslo, Lisbon, Tokyo."
