"""The ``shell`` tool: exit codes, output caps, a clean environment, and no orphans."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import psutil
import trio

from kova.tools import ToolPolicy, builtin_tools

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from kova import JSONValue, ToolResult


async def shell(policy: ToolPolicy, command: str, **extra: JSONValue) -> ToolResult:
    tool = next(tool for tool in builtin_tools(policy) if tool.name == "shell")
    return await tool.execute({"command": command, **extra})


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids: list[int], seconds: float = 5.0) -> list[int]:
    """The pids still alive after up to ``seconds`` (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return alive


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and _alive(process.pid):
                members.append(process.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _wait_group_gone(pgid: int, seconds: float = 5.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (members := _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return members


# Starts a background subshell that starts a sleep (a grandchild), and another sleep; writes
# the shell's own pid (the process group id) and the children's to pids.txt, then waits.
SPAWN_AND_WAIT = (
    "echo $$ > pids.txt; (sleep 300; echo never) & echo $! >> pids.txt; "
    "sleep 300 & echo $! >> pids.txt; echo started; wait"
)


def _read_when_written(path: Path, seconds: float = 5.0) -> int:
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(path.read_text())


def _read_pids(root: Path) -> list[int]:
    return [int(line) for line in (root / "pids.txt").read_text().split()]


async def _descendants_gone(root: Path) -> None:
    pids = _read_pids(root)
    pgid = pids[0]
    # Include the grandchild sleeps: every process still in the group that the test spawned.
    assert await trio.to_thread.run_sync(_wait_gone, pids) == []
    assert await trio.to_thread.run_sync(_wait_group_gone, pgid) == []


async def test_shell_reports_exit_code_and_both_streams(tmp_path: Path) -> None:
    result = await shell(ToolPolicy(workspace_root=tmp_path), "echo out; echo err >&2; exit 3")
    assert not result.is_error
    assert result.text == "exit code: 3\nstdout:\nout\n\nstderr:\nerr\n"


async def test_shell_runs_in_the_workspace(tmp_path: Path) -> None:
    result = await shell(ToolPolicy(workspace_root=tmp_path), "pwd")
    assert result.text.startswith(f"exit code: 0\nstdout:\n{tmp_path}\n")


async def test_shell_output_is_capped(tmp_path: Path) -> None:
    policy = ToolPolicy(workspace_root=tmp_path, max_output_chars=1000)
    result = await shell(policy, "head -c 100000 /dev/zero | tr '\\0' a")
    assert result.text.startswith("exit code: 0\nstdout:\n" + "a" * 1000 + "\n[... 99000 more")
    assert len(result.text) < 1200


async def test_shell_environment_has_no_host_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOVA_TEST_SECRET_TOKEN", "hunter2")
    policy = ToolPolicy(workspace_root=tmp_path, shell_env={"PROJECT_FLAG": "on"})
    result = await shell(policy, "env")
    assert "hunter2" not in result.text
    variables = dict(
        line.split("=", 1) for line in result.text.split("stdout:\n")[1].split("\n") if "=" in line
    )
    assert variables["HOME"] == str(tmp_path)
    assert variables["PROJECT_FLAG"] == "on"
    assert "KOVA_TEST_SECRET_TOKEN" not in variables
    minimal = {"PATH", "HOME", "PWD", "LANG", "LC_ALL", "TERM", "PROJECT_FLAG", "SHLVL", "_"}
    assert set(variables) <= minimal


async def test_shell_timeout_kills_the_whole_process_group(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # The clock jumps only after the children had real time to start.
    mock_clock.autojump_threshold = 1.0
    result = await shell(ToolPolicy(workspace_root=tmp_path, shell_timeout=7), SPAWN_AND_WAIT)
    assert trio.current_time() == 7
    assert result.is_error
    assert result.text.startswith("timed out after 7 s; the command and its children were killed")
    assert "stdout:\nstarted\n" in result.text
    await _descendants_gone(tmp_path)


async def test_shell_timeout_argument_is_capped_by_the_policy(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 1.0
    policy = ToolPolicy(workspace_root=tmp_path, shell_timeout=7)
    await shell(policy, SPAWN_AND_WAIT, timeout=2)
    assert trio.current_time() == 2
    await _descendants_gone(tmp_path)
    await shell(policy, "sleep 300", timeout=1000)
    assert trio.current_time() == 2 + 7


async def test_shell_cancellation_kills_the_whole_process_group(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 1.0
    with trio.move_on_after(3) as scope:
        await shell(ToolPolicy(workspace_root=tmp_path, shell_timeout=100), SPAWN_AND_WAIT)
    assert scope.cancelled_caught
    assert trio.current_time() == 3
    await _descendants_gone(tmp_path)


async def test_shell_background_children_do_not_outlive_the_command(tmp_path: Path) -> None:
    result = await shell(
        ToolPolicy(workspace_root=tmp_path),
        "echo $$ > pids.txt; sleep 300 > /dev/null 2>&1 & echo $! >> pids.txt; echo done",
    )
    assert result.text.startswith("exit code: 0\nstdout:\ndone\n")
    await _descendants_gone(tmp_path)


async def test_shell_reports_death_by_signal(tmp_path: Path) -> None:
    result = await shell(ToolPolicy(workspace_root=tmp_path), "kill -TERM $$")
    assert result.text.startswith("exit code: killed by signal 15\n")


async def test_shell_returns_when_an_escaped_daemon_holds_the_pipes(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # setsid leaves the process group, so the kill cannot reach it; the call still returns.
    mock_clock.autojump_threshold = 1.0
    result = await shell(
        ToolPolicy(workspace_root=tmp_path),
        "setsid sh -c 'echo $$ > daemon.txt; exec sleep 300' & "
        "while [ ! -s daemon.txt ]; do :; done; echo out",
    )
    daemon = await trio.to_thread.run_sync(_read_when_written, tmp_path / "daemon.txt")
    try:
        assert result.text.startswith("exit code: 0\nstdout:\nout\n")
        assert trio.current_time() == 2.0
    finally:
        os.kill(daemon, 9)


async def test_a_child_in_a_process_group_of_its_own_does_not_outlive_the_command(
    tmp_path: Path,
) -> None:
    # `set -m` (job control) gives each background job its own process group, in the same
    # session: killing the command's group alone would miss it.
    result = await shell(
        ToolPolicy(workspace_root=tmp_path),
        "set -m; echo $$ > pids.txt; sleep 300 > /dev/null 2>&1 & echo $! >> pids.txt; echo done",
    )
    assert result.text.startswith("exit code: 0\nstdout:\ndone\n")
    pids = _read_pids(tmp_path)
    assert await trio.to_thread.run_sync(_wait_gone, pids) == []


async def test_a_timeout_reaches_children_in_their_own_group_and_their_own_session(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 1.0
    command = (
        "set -m; echo $$ > pids.txt; sleep 300 > /dev/null 2>&1 & echo $! >> pids.txt; "
        # A child that starts a session of its own while its parent (this shell) lives.
        "setsid sh -c 'echo $$ >> pids.txt; exec sleep 300' > /dev/null 2>&1 & "
        "while [ $(wc -l < pids.txt) -lt 3 ]; do :; done; echo started; wait"
    )
    result = await shell(ToolPolicy(workspace_root=tmp_path, shell_timeout=7), command)
    assert result.is_error
    assert "timed out after 7 s" in result.text
    pids = _read_pids(tmp_path)
    assert len(pids) == 3
    assert await trio.to_thread.run_sync(_wait_gone, pids) == []
