"""The MCP servers the CLI starts (``kova chat --mcp``, ``kova mcp tools``): a command that
does not exist, or a server that exits before it answers, is one clear message naming the
command, with the last lines the server wrote to its stderr."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import sys
import tempfile
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TextIO

from .._errors import KovaError
from .._groups import lone_exceptions
from ._errors import CliError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from ..mcp import McpClient, McpConnectionState

__all__ = ["connect_stdio"]

_TAIL_LINES = 5

_STATUS_MARK = "[kova: MCP server exit status "
_WATCHER = (
    "import subprocess, sys\n"
    "status = subprocess.call(sys.argv[1:])\n"
    f"sys.stderr.write({_STATUS_MARK!r} + str(status) + ']\\n')\n"
    "sys.exit(status if status >= 0 else 128 - status)\n"
)
"""Runs the server as its child and writes its exit status to the shared stderr when it
ends (a negative status: killed by that signal). The server keeps the watcher's stdin and
stdout, and the transport stops the whole process group, so the watcher changes nothing
else."""


def _ending(log: TextIO, start: int = 0) -> tuple[int | None, list[str], int]:
    """What one run of the server left in ``log`` from position ``start``: the exit status
    the watcher wrote (``None`` if it wrote none), the last lines of the server's own
    stderr, and the position after that run's status (where the next run's lines begin)."""
    log.flush()
    log.seek(start)
    lines: list[str] = []
    status: int | None = None
    while line := log.readline():
        if line.startswith(_STATUS_MARK):
            with contextlib.suppress(ValueError):
                status = int(line.removeprefix(_STATUS_MARK).strip().rstrip("]"))
            break
        if line.strip():
            lines.append(line.rstrip())
    return status, lines[-_TAIL_LINES:], log.tell()


def _with_tail(message: str, said: list[str]) -> str:
    if said:
        message += "; the end of its stderr:\n  " + "\n  ".join(said)
    return message


@asynccontextmanager
async def connect_stdio(
    argv: Sequence[str],
    *,
    name: str | None = None,
    on_lost: Callable[[str], object] | None = None,
) -> AsyncIterator[McpClient]:
    """An MCP client over stdio for ``argv``, its stderr kept in a temporary file.

    ``on_lost`` is told, in one message, when the server ends after it answered: the
    command, its exit status and the last lines of its stderr. The client's connection
    starts it again meanwhile (its calls in flight are answered with errors the model
    reads).

    Raises:
        CliError: the command does not exist, or the server closed the connection before
            the handshake finished (the message quotes the end of its stderr).
    """
    from ..mcp import McpClient, StdioTransport
    from ..mcp._stdio import describe_exit

    program = argv[0]
    command = shlex.join(argv)
    if shutil.which(program) is None:
        raise CliError(f"MCP server command not found: {program} (in `{command}`)")
    # Append mode: the server shares this file's offset, and reading the tail must not
    # move where it writes.
    with tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace") as log:
        transport = StdioTransport(sys.executable, args=["-c", _WATCHER, *argv], stderr=log)
        run_start = 0  # where the running server's stderr begins in the file
        up = False

        def changed(state: McpConnectionState) -> None:
            nonlocal run_start, up
            if state.status == "connected":
                up = True
                return
            if not up or state.error is None:
                return
            # The session was lost: the watcher has exited (its stdout, which the server
            # shares, has ended), so that run's status and stderr are in the file.
            up = False
            status, said, run_start = _ending(log, run_start)
            ended = "closed its output" if status is None else describe_exit(status)
            who = f"the MCP server `{command}`" + (f" ({name})" if name else "")
            if on_lost is not None:
                on_lost(_with_tail(f"{who} {ended}; starting it again", said))

        entered = False
        try:
            with lone_exceptions():
                async with McpClient.connect(
                    transport, name=name, on_state_change=changed
                ) as client:
                    entered = True
                    yield client
        except KovaError as exc:
            if entered:
                raise
            status, said, _ = _ending(log)
            if status is not None:
                message = f"the MCP server `{command}` {describe_exit(status)} before it answered"
            elif "Connection closed" in str(exc):  # its stdout closed
                message = f"the MCP server `{command}` closed its output before it answered"
            else:
                message = f"the MCP server `{command}` did not start: {exc}"
            raise CliError(_with_tail(message, said)) from exc
