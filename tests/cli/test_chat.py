"""`kova chat`, `kova models` and `kova mcp tools`, end to end: the real CLI in a
pseudo-terminal (pexpect), a real provider, and kova's fake servers on loopback."""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from kova import Document, ToolResult, messages_from_json
from kova.testing import (
    ScriptRequest,
    StreamReply,
    open_anthropic_server,
    open_gemini_server,
    open_ollama_server,
    open_openai_server,
    open_responses_server,
    reply_text,
    reply_tool_calls,
    with_thinking,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractAsyncContextManager

pexpect = pytest.importorskip("pexpect")

ROOT = Path(__file__).resolve().parents[2]
MCP_SERVER = ROOT / "tests" / "mcp" / "mcp_test_server.py"
TIMEOUT = 30


def _model(request: ScriptRequest) -> Any:
    """The scripted model: answers by the last user message."""
    last = request.messages[-1]
    said = last.text
    if said == "hi":
        return StreamReply(response=reply_text("Hello from the fake model."), chunk_chars=5)
    if said == "stall":
        # Two pieces of text, then the server stalls with the connection open.
        return StreamReply(
            response=reply_text("Partial answer that never ends"), chunk_chars=8, hold_after=2
        )
    if said == "count":
        users = [m.text for m in request.messages if m.role.value == "user"]
        return reply_text(f"I see {len(request.messages)} messages; users said {users}.")
    if said == "add please":
        return reply_tool_calls(("mcp__add", {"a": 2, "b": 3}))
    if said == "crash please":
        return reply_tool_calls(("mcp__exit_now", {"said": "out of memory at step 3"}))
    if said == "pid please":
        return reply_tool_calls(("mcp__pid", {}))
    if said == "think":
        return StreamReply(
            response=with_thinking(reply_text("The answer is 4."), "Two and two.\nMakes four."),
            chunk_chars=6,
        )
    if said == "list docs":
        return reply_tool_calls(("list_dir", {"path": "docs"}), text="Looking.")
    if last.role.value == "tool":
        result = next(block for block in last.content if isinstance(block, ToolResult))
        if "agent.md" in result.text:
            return reply_text("Those are the docs.")
        return reply_text(f"The sum is {result.text}.")
    return reply_text(f"echo: {said}")


def _server(kind: str) -> Callable[[], AbstractAsyncContextManager[Any]]:
    return {
        "openai": lambda: open_openai_server(_model),
        "openai-responses": lambda: open_responses_server(_model),
        "anthropic": lambda: open_anthropic_server(_model),
        "gemini": lambda: open_gemini_server(_model),
        "ollama": lambda: open_ollama_server(_model),
    }[kind]


def _env() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KOVA_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "AWS_"))
    }
    env.update(
        OPENAI_API_KEY="test-key", ANTHROPIC_API_KEY="test-key", GEMINI_API_KEY="test-key",
        NO_COLOR="1",
    )  # fmt: skip
    return env


class Terminal:
    """A pexpect child driven from trio (each blocking call in a worker thread)."""

    def __init__(self, args: list[str]) -> None:
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "kova", *args],
            env=_env(),
            cwd=str(ROOT),
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(40, 200),
        )

    async def expect(self, pattern: str) -> None:
        await trio.to_thread.run_sync(self.child.expect_exact, pattern)

    async def send(self, line: str) -> None:
        await trio.to_thread.run_sync(self.child.sendline, line)

    def interrupt(self) -> None:
        self.child.sendintr()

    async def exit_status(self) -> int:
        await trio.to_thread.run_sync(self.child.expect, pexpect.EOF)
        self.child.close()
        status: int = self.child.exitstatus
        return status


def _chat_args(kind: str, base_url: str, history: Path) -> list[str]:
    model = "gpt-fake" if kind == "openai" else "claude-fake"
    return ["chat", "--provider", kind, "--base-url", base_url, "--model", model,
            "--history", str(history)]  # fmt: skip


@pytest.fixture
async def _guard() -> AsyncIterator[None]:
    # Real time: these tests drive a real subprocess through a pseudo-terminal.
    with trio.fail_after(120):
        yield


@pytest.mark.parametrize("kind", ["openai", "openai-responses", "anthropic", "gemini", "ollama"])
@pytest.mark.usefixtures("_guard")
async def test_chat_streams_cancels_with_ctrl_c_saves_and_resumes(
    kind: str, tmp_path: Path
) -> None:
    history = tmp_path / "history.json"
    async with _server(kind)() as server:
        terminal = Terminal(_chat_args(kind, server.base_url, history))
        await terminal.expect(f"kova chat: {kind}")
        await terminal.expect("you> ")
        await terminal.send("hi")
        await terminal.expect("Hello from the fake model.")
        await terminal.expect("you> ")

        # Ctrl-C mid-stream: the first pieces arrived, the server stalls; only the turn ends.
        await terminal.send("stall")
        await terminal.expect("Partial answer t")
        terminal.interrupt()
        await terminal.expect("[turn stopped: nothing was added to the conversation]")
        await terminal.expect("you> ")

        await terminal.send("count")
        await terminal.expect("I see 3 messages; users said ['hi', 'count'].")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0

        saved = messages_from_json(history.read_text())
        assert [m.text for m in saved] == [
            "hi",
            "Hello from the fake model.",
            "count",
            "I see 3 messages; users said ['hi', 'count'].",
        ]

        # Resume: the saved conversation is sent again; Ctrl-D quits.
        terminal = Terminal(_chat_args(kind, server.base_url, history))
        await terminal.expect(f"resumed 4 messages from {history}")
        await terminal.send("count")
        await terminal.expect("I see 5 messages; users said ['hi', 'count', 'count'].")
        await terminal.expect("you> ")
        terminal.child.sendeof()
        assert await terminal.exit_status() == 0
    assert len(messages_from_json(history.read_bytes())) == 6


@pytest.mark.usefixtures("_guard")
async def test_chat_asks_before_an_mcp_tool_runs(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    async with open_openai_server(_model) as server:
        args = _chat_args("openai", server.base_url, history)
        terminal = Terminal([*args, "--mcp", f"{sys.executable} {MCP_SERVER} stdio"])
        await terminal.expect("tools")
        await terminal.expect("you> ")
        await terminal.send("add please")
        await terminal.expect('[tool] mcp__add {"a": 2, "b": 3}')
        await terminal.expect('allow mcp__add {"a": 2, "b": 3}? [y/N] ')
        await terminal.send("y")
        await terminal.expect("[result] 5")
        await terminal.expect("The sum is 5.")
        await terminal.expect("you> ")
        await terminal.send("add please")
        await terminal.expect("? [y/N] ")
        await terminal.send("n")
        await terminal.expect("denied: the user denied this tool call")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0


@pytest.mark.usefixtures("_guard")
async def test_chat_goes_on_when_an_mcp_server_dies(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    async with open_openai_server(_model) as server:
        args = _chat_args("openai", server.base_url, history)
        server_command = f"{sys.executable} {MCP_SERVER} stdio"
        terminal = Terminal([*args, "--yes", "--mcp", server_command])
        transcript = io.StringIO()
        terminal.child.logfile_read = transcript
        await terminal.expect("you> ")

        # The server dies inside a call: one line naming it, how it ended and what it said
        # last; the call is answered in-band and the model goes on.
        await terminal.send("crash please")
        await terminal.expect(
            f"[mcp] the MCP server `{server_command}` (mcp) exited with status 3; starting it"
            " again; the end of its stderr:"
        )
        await terminal.expect("out of memory at step 3")
        await terminal.expect("[error] MCP tool 'exit_now' failed: the connection to MCP server")
        await terminal.expect("(the MCP server process exited with status 3)")
        await terminal.expect("The sum is ")  # the model's answer to the error
        await terminal.expect("you> ")

        # Killed between turns: the line appears at once and the prompt comes back under it.
        await terminal.send("pid please")
        await terminal.expect("[result] ")
        await trio.to_thread.run_sync(terminal.child.expect, r"(\d+)\r?\n")
        pid = int(terminal.child.match.group(1))
        await terminal.expect("you> ")
        os.kill(pid, signal.SIGKILL)
        await terminal.expect(
            f"[mcp] the MCP server `{server_command}` (mcp) was killed by signal 9 (SIGKILL);"
            " starting it again"
        )
        await terminal.expect("you> ")

        # The restarted server answers the next call.
        await terminal.send("add please")
        await terminal.expect("[result] 5")
        await terminal.expect("The sum is 5.")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0
        shown = transcript.getvalue()
        # One line a death, and no log lines around it.
        assert shown.count("[mcp] ") == 2
        assert "mcp.connection" not in shown


def _kova(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kova", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(),
        cwd=str(ROOT),
    )


@pytest.mark.parametrize("kind", ["openai", "openai-responses", "anthropic", "gemini", "ollama"])
async def test_models_lists_the_provider_models(kind: str) -> None:
    async with _server(kind)() as server:
        result = await trio.to_thread.run_sync(
            lambda: _kova("models", "--provider", kind, "--base-url", server.base_url)
        )
    assert result.returncode == 0, result.stderr
    expected = {
        "openai": "gpt-fake",
        "openai-responses": "gpt-fake",
        "anthropic": "claude",
        "gemini": "gemini-fake",
    }.get(kind, "llama3.2")
    assert expected in result.stdout


def test_mcp_tools_lists_a_server_tools() -> None:
    result = _kova("mcp", "tools", "--", sys.executable, str(MCP_SERVER), "stdio")
    assert result.returncode == 0, result.stderr
    names = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert "add" in names
    assert "echo" in names


def test_chat_without_a_provider_says_how_to_choose_one() -> None:
    env = {k: v for k, v in _env().items() if not k.endswith("_API_KEY")}
    result = subprocess.run(
        [sys.executable, "-m", "kova", "chat"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 2
    assert (
        "pass --provider (anthropic, openai, openai-responses, gemini, ollama, bedrock)"
        in result.stderr
    )


def test_python_dash_m_kova_runs_the_cli() -> None:
    result = _kova("--help")
    assert result.returncode == 0
    for command in ("chat", "models", "mcp", "demo", "version"):
        assert command in result.stdout


@pytest.mark.usefixtures("_guard")
async def test_chat_demo_answers_the_city_asked_about_and_a_denial(tmp_path: Path) -> None:
    terminal = Terminal(["chat", "--demo", "--history", str(tmp_path / "h.json")])
    await terminal.expect("kova chat: demo / scripted-demo-model, 1 tool.")
    await terminal.expect("you> ")
    await terminal.send("What's the weather in Lisbon?")
    await terminal.expect('allow get_weather {"city": "Lisbon"}? [y/N] ')
    await terminal.send("y")
    await terminal.expect("[result] 17°C, sunny")
    await terminal.expect("Right now in Lisbon it is 17°C, sunny.")
    await terminal.expect("you> ")
    await terminal.send("and in Tokyo?")
    await terminal.expect('allow get_weather {"city": "Tokyo"}? [y/N] ')
    await terminal.send("n")
    await terminal.expect("I could not check the weather in Tokyo")
    await terminal.expect("you> ")
    await terminal.send("/tools")
    await terminal.expect("1 tool:")
    await terminal.expect("get_weather  Current weather for a city (demo data).  (asks first)")
    await terminal.expect("you> ")
    await terminal.send("/model")
    await terminal.expect("model: demo / scripted-demo-model")
    await terminal.expect("you> ")
    await terminal.send("/exit")
    assert await terminal.exit_status() == 0


@pytest.mark.usefixtures("_guard")
async def test_chat_model_command_switches_the_model_of_the_next_turn(tmp_path: Path) -> None:
    async with open_openai_server(_model) as server:
        terminal = Terminal(_chat_args("openai", server.base_url, tmp_path / "h.json"))
        await terminal.expect("you> ")
        await terminal.send("/model")
        await terminal.expect("model: openai / gpt-fake")
        await terminal.expect("you> ")
        await terminal.send("/model gpt-other")
        await terminal.expect("(model: gpt-other from the next turn)")
        await terminal.expect("you> ")
        await terminal.send("hi")
        await terminal.expect("Hello from the fake model.")
        await terminal.expect("you> ")
        await terminal.send("/nonsense")
        await terminal.expect("unknown command /nonsense")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0
    body = server.chat_requests()[-1].json()
    assert body["model"] == "gpt-other"


@pytest.mark.usefixtures("_guard")
async def test_chat_thinking_has_its_own_lines_and_results_keep_their_lines(
    tmp_path: Path,
) -> None:
    async with open_anthropic_server(_model) as server:
        terminal = Terminal(_chat_args("anthropic", server.base_url, tmp_path / "h.json"))
        await terminal.expect("you> ")
        await terminal.send("think")
        # On lines of its own, never run into the answer (dimmed with colour on; here,
        # NO_COLOR, labelled).
        await terminal.expect("\r\n[thinking] Two and two.\r\nMakes four.\r\nThe answer is 4.")
        await terminal.expect("you> ")
        await terminal.send("list docs")
        await terminal.expect("Looking.\r\n[tool] list_dir")
        # The directory listing keeps one entry a line, indented under the first.
        await terminal.expect("[result] ")
        await terminal.expect("\r\n         agent.md\r\n")
        await terminal.expect("Those are the docs.")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0


async def _tools_listed(args: list[str]) -> str:
    """What ``/tools`` shows in a ``kova chat`` started with ``args``."""
    terminal = Terminal(args)
    await terminal.expect("you> ")
    await terminal.send("/tools")
    await terminal.expect(" tools:")
    await terminal.expect("you> ")
    shown: str = terminal.child.before
    await terminal.send("/exit")
    assert await terminal.exit_status() == 0
    return shown


@pytest.mark.usefixtures("_guard")
async def test_chat_mcp_include_and_exclude_choose_the_tools(tmp_path: Path) -> None:
    async with open_openai_server(_model) as server:
        args = [*_chat_args("openai", server.base_url, tmp_path / "h.json")]
        mcp = ["--mcp", f"{sys.executable} {MCP_SERVER} stdio"]
        shown = await _tools_listed([*args, *mcp, "--mcp-exclude", "echo", "--yes"])
        assert "mcp__add" in shown
        assert "mcp__echo" not in shown
        assert "read_file" in shown  # the built-in tools stay
        shown = await _tools_listed([*args, *mcp, "--mcp-include", "mcp__a*"])
        assert "mcp__add" in shown
        assert "mcp__echo" not in shown

    result = await trio.to_thread.run_sync(
        lambda: _kova("chat", "--provider", "openai", *mcp, "--mcp-include", "ad")
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        "kova: --mcp-include 'ad' matches no MCP tool (the servers offer: mcp__echo, mcp__add,"
    )


@pytest.mark.usefixtures("_guard")
async def test_chat_attach_sends_a_file_with_the_next_message(tmp_path: Path) -> None:
    invoice = tmp_path / "invoice.pdf"
    invoice.write_bytes(b"%PDF-1.7\n" + b"x" * 3000 + b"\n%%EOF\n")
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2\3")
    async with open_anthropic_server(_model) as server:
        terminal = Terminal(_chat_args("anthropic", server.base_url, tmp_path / "h.json"))
        await terminal.expect("you> ")
        await terminal.send(f"/attach {tmp_path / 'missing.pdf'}")
        await terminal.expect("error: cannot read")
        await terminal.expect("you> ")
        await terminal.send(f"/attach {tmp_path / 'blob.bin'}")
        await terminal.expect("/attach sends PDF, text, image and audio files")
        await terminal.expect("you> ")
        await terminal.send(f"/attach {invoice}")
        await terminal.expect("(attached invoice.pdf (application/pdf, 3 kB)")
        await terminal.expect("you> ")
        await terminal.send("hi")
        await terminal.expect("Hello from the fake model.")
        await terminal.expect("you> ")
        await terminal.send("hi")  # the file went with the first message only
        await terminal.expect("Hello from the fake model.")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0
    first, second = (request.json() for request in server.messages_requests())
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    document = first["messages"][0]["content"][0]
    assert document["type"] == "document"
    assert document["title"] == "invoice.pdf"
    assert base64.b64decode(document["source"]["data"]) == invoice.read_bytes()
    assert [b["type"] for b in second["messages"][-1]["content"]] == ["text"]
    # The history file keeps the document with the message it went with.
    saved = messages_from_json((tmp_path / "h.json").read_text())
    assert isinstance(saved[0].content[0], Document)


async def test_chat_shows_the_cost_of_each_turn_and_of_the_session(tmp_path: Path) -> None:
    pytest.importorskip("genai_prices")
    async with open_openai_server(_model) as server:
        args = _chat_args("openai", server.base_url, tmp_path / "h.json")
        args[args.index("gpt-fake")] = "gpt-4o-mini"  # priced by the sheet: $0.15 / $0.60
        terminal = Terminal(args)
        await terminal.expect("you> ")
        await terminal.send("hi")  # reply_text: 10 tokens in, 5 out
        await terminal.expect("[cost: $0.0000045 this turn, $0.0000045 this session]")
        await terminal.expect("you> ")
        await terminal.send("hi")
        await terminal.expect("[cost: $0.0000045 this turn, $0.000009 this session]")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0


@pytest.mark.usefixtures("_guard")
async def test_ctrl_l_clears_the_screen_and_never_reaches_the_model(tmp_path: Path) -> None:
    """Issue 44, item 11: without line editing a terminal puts Ctrl-L (a form feed) into the
    line; it was sent to the model ("\\x0chi"). It clears the screen instead."""
    async with open_openai_server(_model) as server:
        terminal = Terminal(_chat_args("openai", server.base_url, tmp_path / "h.json"))
        await terminal.expect("you> ")
        await terminal.send("\x0chi")
        await terminal.expect("\x1b[H\x1b[2J")
        await terminal.expect("Hello from the fake model.")
        await terminal.expect("you> ")
        await terminal.send("/exit")
        assert await terminal.exit_status() == 0
    assert [request.messages[-1].text for request in server.chat_requests()] == ["hi"]
