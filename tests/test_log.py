"""kova is quiet unless the application configures logging (kova/_log.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import structlog.testing
import trio

from kova import ActorFailed
from kova.actors import Actor, Backoff, open_runtime

_TURN = textwrap.dedent(
    """
    import trio
    from kova import Message
    from kova.agent import AgentBuilder
    from kova.testing import ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.

        Args:
            a: the first.
            b: the second.
        '''
        return a + b

    async def main() -> None:
        script = [reply_tool_calls(("add", {"a": 1, "b": 2})), reply_text("3")]
        agent = AgentBuilder().provider(ScriptedProvider(script)).tool(add).build()
        async with agent:
            response = await agent.run([Message.user("1+2?")])
            assert response.text == "3", response.text
            %AFTER%

    %SETUP%
    trio.run(main)
    """
)


def _run(*, setup: str = "", after: str = "") -> subprocess.CompletedProcess[str]:
    program = _TURN.replace("%SETUP%", setup).replace("%AFTER%", after)
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_program_that_configures_nothing_prints_nothing_on_a_normal_turn() -> None:
    result = _run()
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""


def test_a_crash_raised_to_the_caller_prints_no_traceback() -> None:
    # The script runs out of replies: the provider actor crashes and the caller gets it.
    after = textwrap.dedent(
        """
            try:
                await agent.run([Message.user("again")])
            except BaseException as exc:
                print("raised", type(exc).__name__)
        """
    ).replace("\n", "\n        ")
    result = _run(after=after)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("raised")
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) <= 1  # at most the one-line actor.crashed warning


def test_standard_logging_at_debug_shows_kova_events() -> None:
    result = _run(setup="import logging; logging.basicConfig(level=logging.DEBUG)")
    assert result.returncode == 0, result.stderr
    assert "actor.started" in result.stderr
    assert "kova.actors._supervisor" in result.stderr


def test_structlog_configured_by_the_application_receives_kova_events() -> None:
    setup = "import structlog; structlog.configure()"
    result = _run(setup=setup)
    assert result.returncode == 0, result.stderr
    assert "actor.started" in result.stdout


class _Broken(Actor):
    async def handle_call(self, message: object) -> object:
        raise RuntimeError("actor bug")


async def test_crash_reported_to_the_caller_is_logged_once_without_traceback() -> None:
    with structlog.testing.capture_logs() as logs:
        async with open_runtime(backoff=Backoff.none()) as runtime:
            ref = await runtime.spawn(_Broken)
            with pytest.raises(ActorFailed):
                await ref.call("anything")
            await trio.testing.wait_all_tasks_blocked()
    crashes = [entry for entry in logs if entry["event"] == "actor.crashed"]
    assert len(crashes) == 1
    assert crashes[0]["log_level"] == "warning"
    assert "exc_info" not in crashes[0]
    assert "actor bug" in crashes[0]["error"]


_RAISING_TOOL = textwrap.dedent(
    """
    import trio
    from kova import Message
    from kova.agent import AgentBuilder, RetryConfig
    from kova.testing import ErrorReply, ScriptedProvider, reply_text, reply_tool_calls
    from kova.tools import tool

    @tool
    def lookup(key: str) -> str:
        '''Look a key up.

        Args:
            key: the key.
        '''
        raise KeyError(key)

    async def main() -> None:
        script = [
            ErrorReply(status_code=503),  # retried
            reply_tool_calls(("lookup", {"key": "x"})),
            reply_text("not found"),
        ]
        provider = ScriptedProvider(script)
        builder = AgentBuilder().provider(provider).tool(lookup)
        agent = builder.retry_config(RetryConfig(initial_backoff=0.001)).build()
        async with agent:
            response = await agent.run([Message.user("x?")])
        assert response.new_messages[1].content[0].is_error
        assert response.text == "not found", response.text

    %SETUP%
    trio.run(main)
    """
)


@pytest.mark.parametrize(
    ("setup", "shown"),
    [
        ("", False),
        ("import logging; logging.basicConfig(level=logging.INFO)", True),
    ],
    ids=["unconfigured", "logging-at-info"],
)
def test_a_raising_tool_and_a_retry_are_info_not_a_terminal_warning(
    setup: str, shown: bool
) -> None:
    program = _RAISING_TOOL.replace("%SETUP%", setup)
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    if not shown:
        assert result.stderr == ""
        return
    lines = result.stderr.splitlines()
    assert any(
        line.startswith("INFO:kova.agent._tool_pool:tool.call.failed tool='lookup'")
        for line in lines
    ), lines
    assert any("provider.request.retrying" in line for line in lines), lines
    assert not [line for line in lines if line.startswith(("WARNING", "ERROR"))], lines


def _warning_events_in_code() -> set[str]:
    """The event names kova logs at warning or error (every ``log.warning("...`` /
    ``log.error("...`` call in kova/)."""
    root = Path(__file__).resolve().parents[1] / "kova"
    call = re.compile(r'log\.(?:warning|error)\(\s*"([a-z_.]+)"')
    return {name for path in root.rglob("*.py") for name in call.findall(path.read_text("utf-8"))}


def test_every_warning_kova_logs_is_in_the_docs_table() -> None:
    # What reaches an unconfigured terminal is documented with what to fix; a new warning
    # (or one moved to info) changes the table in docs/telemetry.md.
    docs = (Path(__file__).resolve().parents[1] / "docs" / "telemetry.md").read_text("utf-8")
    section = docs.split("## Logs", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_.]+)`[^|]*\| (warning|error|warning / error) \|", section, re.M)
    assert {name for name, _ in rows} == _warning_events_in_code()
