"""The ``shell`` tool: one command under ``/bin/sh``, confined in time, output and environment.

The command runs as the leader of a new session (``start_new_session=True``), and
everything it started is killed with ``SIGKILL`` when the call times out, when it is
cancelled, and also when the command finishes (a background child left behind would
otherwise outlive the call and keep our pipes open): its process group, and on Linux every
process of its session (a child that moved to a process group of its own) and every
descendant of those by parent pid (a child that started its own session while its parent is
alive). What is out of reach: a process that starts its own session *and* whose parent has
already exited (a daemon's double fork after the command ended); only a container or a
cgroup bounds that.

The environment is built from nothing: ``PATH``, ``HOME`` (the workspace), ``LANG``,
``TERM`` and ``PWD``, then the policy's ``shell_env``. Nothing of the host's environment (API
keys, tokens) is passed on unless the policy names it. That is not a sandbox: the command
runs as the same user as the agent, so it can read whatever that user can, including the
agent process's own environment (``/proc/<agent pid>/environ`` on Linux, where exported API
keys are), credential files in the user's home (``~/.aws``, ``~/.config``), and the network.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import trio

from .._models import ToolAnnotations, ToolResult
from .._record import Record, set_field

if TYPE_CHECKING:
    from .._models import JSONObject
    from ._policy import ToolPolicy

__all__ = ["Shell", "shell_environment"]

_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_REAP_GRACE = 5.0  # seconds to wait for the killed leader to be reaped
_DRAIN_GRACE = 2.0  # seconds to read what is left in the pipes after the group is killed
_KILL_ROUNDS = 20  # /proc scans per kill, each stopping what forked before the last one


def shell_environment(policy: ToolPolicy, cwd: Path) -> dict[str, str]:
    """The complete environment ``shell`` gives its command."""
    env = {
        "PATH": _PATH,
        "HOME": str(cwd),
        "PWD": str(cwd),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
    }
    env.update(policy.shell_env)
    return env


class _Capture:
    """The first ``limit`` bytes of a stream, and how many more there were."""

    __slots__ = ("data", "dropped", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        # Keep reading past the limit (and drop it): a child blocked on a full pipe would
        # otherwise hang until the timeout.
        while chunk := await stream.receive_some(65536):
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[... {self.dropped} more bytes not shown]"
        return text


def _process_table() -> dict[int, tuple[int, int, int]] | None:
    """``pid -> (parent pid, process group, session)`` of every live process (zombies left
    out), from ``/proc``; ``None`` where there is no ``/proc`` (macOS)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    table: dict[int, tuple[int, int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                line = file.read()
        except OSError:  # gone since the listing
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        fields = line[line.rfind(b")") + 2 :].split()
        if len(fields) < 4 or fields[0] == b"Z":
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def _kill_group(leader: int) -> None:
    """SIGKILL everything the command started.

    The command leads its own session (``start_new_session=True``), so its session id and
    process group id are its pid. Everything is stopped first (``SIGSTOP``: a stopped process
    neither forks nor exits, so no child is orphaned out of reach while the tree is being
    found): the group, then, from ``/proc`` and until no new one turns up, every process still
    in the session (a child that moved to a process group of its own, as a shell with job
    control puts each background job), and every descendant of those or of the leader by
    parent pid (a child that started a session of its own while its parent lives). Then all
    of them are killed.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGSTOP)
    me = os.getpid()
    known: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        table = _process_table()
        if table is None:  # no /proc: the group is all that can be reached
            break
        found = _tree(table, leader, known) - known - {me}
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        known |= found
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)
    for pid in known:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _tree(table: dict[int, tuple[int, int, int]], leader: int, known: set[int]) -> set[int]:
    """The processes of ``leader``'s session or group, and the descendants of those, of the
    leader and of ``known``."""
    members = {pid for pid, (_, group, session) in table.items() if leader in (group, session)}
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    # The leader's children by parent pid only while the leader is alive (it leads its
    # session): once it is reaped its pid may belong to a stranger.
    frontier = [*members, *known]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in members:
                members.add(child)
                frontier.append(child)
    return members


class Shell(Record):
    """``shell``: run a command in the workspace (see the module docstring)."""

    policy: ToolPolicy

    def __init__(self, policy: ToolPolicy) -> None:
        set_field(self, "policy", policy)

    name: ClassVar[str] = "shell"
    description: ClassVar[str] = (
        "Run a command with /bin/sh -c in the workspace directory and return its exit code, "
        "stdout and stderr (long output is cut off). There is no terminal and no input; "
        "commands that run too long are killed with everything they started."
    )
    parameters: ClassVar[JSONObject] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "The shell command."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before it is killed (capped by the policy).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    annotations: ClassVar[ToolAnnotations] = ToolAnnotations(
        read_only=False, destructive=True, idempotent=False, open_world=True, title="Shell"
    )

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the command; a timeout, a spawn failure or a bad argument is an error result.

        Cancellation kills the process group and waits (shielded, at most a few seconds)
        for the command to be reaped before re-raising.
        """
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolResult.error("'command' must be a non-empty string")
        timeout = self.policy.shell_timeout
        requested = arguments.get("timeout")
        if isinstance(requested, int | float) and not isinstance(requested, bool):
            if not (requested > 0 and math.isfinite(requested)):
                return ToolResult.error("'timeout' must be a positive number of seconds")
            timeout = min(float(requested), timeout)
        cwd = self.policy.workspace_root or Path.cwd()
        if not await trio.Path(cwd).is_dir():
            return ToolResult.error(f"the workspace {cwd} is not a directory")
        try:
            process = await trio.lowlevel.open_process(
                ["/bin/sh", "-c", command],
                cwd=cwd,
                env=shell_environment(self.policy, cwd),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return ToolResult.error(f"could not start /bin/sh: {exc}")
        assert process.stdout is not None
        assert process.stderr is not None
        limit = self.policy.max_output_chars
        stdout, stderr = _Capture(limit), _Capture(limit)
        drained = trio.Event()

        async def drain() -> None:
            assert process.stdout is not None
            assert process.stderr is not None
            async with trio.open_nursery() as streams:
                streams.start_soon(stdout.drain, process.stdout)
                streams.start_soon(stderr.drain, process.stderr)
            drained.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                with trio.move_on_after(timeout) as deadline:
                    await process.wait()
                # Also after a normal exit: background children go with their parent, and
                # their ends of the pipes close, so the drains see end of file...
                _kill_group(process.pid)
                # ...unless a process left the group (setsid) holding them: stop reading.
                with trio.move_on_after(_DRAIN_GRACE):
                    await drained.wait()
                nursery.cancel_scope.cancel(reason="shell command finished")
        finally:
            with trio.CancelScope(shield=True):
                _kill_group(process.pid)
                with trio.move_on_after(_REAP_GRACE):
                    await process.wait()
                await process.stdout.aclose()
                await process.stderr.aclose()
        output = f"stdout:\n{stdout.text()}\nstderr:\n{stderr.text()}"
        if deadline.cancelled_caught:
            return ToolResult.error(
                f"timed out after {timeout:g} s; the command and its children were killed\n{output}"
            )
        code = process.returncode
        status = f"killed by signal {-code}" if code is not None and code < 0 else f"{code}"
        return ToolResult(content=f"exit code: {status}\n{output}")
