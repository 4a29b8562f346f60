"""The ``shell`` tool: one command under ``/bin/sh``, confined in time, output and environment.

The command runs as the leader of a new session (``start_new_session=True``), so it and
everything it starts share one process group, and the whole group is killed with ``SIGKILL``
when the call times out, when it is cancelled, and also when the command finishes (a
background child left behind would otherwise outlive the call and keep our pipes open). A
process that starts its own session (``setsid``, a daemon) leaves the group and is out of
reach; run untrusted commands in a container if that matters.

The environment is built from nothing: ``PATH``, ``HOME`` (the workspace), ``LANG``,
``TERM`` and ``PWD``, then the policy's ``shell_env``. Nothing of the host's environment (API
keys, tokens) is passed on unless the policy names it.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import attrs
import trio

from .._models import ToolAnnotations, ToolResult

if TYPE_CHECKING:
    from .._models import JSONObject
    from ._policy import ToolPolicy

__all__ = ["Shell", "shell_environment"]

_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_REAP_GRACE = 5.0  # seconds to wait for the killed leader to be reaped
_DRAIN_GRACE = 2.0  # seconds to read what is left in the pipes after the group is killed


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


@attrs.define
class _Capture:
    """The first ``limit`` bytes of a stream, and how many more there were."""

    limit: int
    data: bytearray = attrs.field(factory=bytearray)
    dropped: int = 0

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


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@attrs.frozen
class Shell:
    """``shell``: run a command in the workspace (see the module docstring)."""

    policy: ToolPolicy

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
