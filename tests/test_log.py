"""kova is quiet unless the application configures logging (kova/_log.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
