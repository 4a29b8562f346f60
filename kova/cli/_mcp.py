"""The MCP servers the CLI starts (``kova chat --mcp``, ``kova mcp tools``): a command that
does not exist, or a server that exits before it answers, is one clear message naming the
command, with the last lines the server wrote to its stderr."""

from __future__ import annotations

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
    from collections.abc import AsyncIterator, Sequence

    from ..mcp import McpClient

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


def _ending(log: TextIO) -> tuple[str | None, list[str]]:
    """The exit status the watcher wrote (``None`` if it wrote none) and the last lines of
    the server's own stderr."""
    log.flush()
    log.seek(0)
    lines = [line.rstrip() for line in log.read().splitlines() if line.strip()]
    status = None
    if lines and lines[-1].startswith(_STATUS_MARK):
        status = lines.pop().removeprefix(_STATUS_MARK).rstrip("]")
    return status, lines[-_TAIL_LINES:]


@asynccontextmanager
async def connect_stdio(
    argv: Sequence[str], *, name: str | None = None
) -> AsyncIterator[McpClient]:
    """An MCP client over stdio for ``argv``, its stderr kept in a temporary file.

    Raises:
        CliError: the command does not exist, or the server closed the connection before
            the handshake finished (the message quotes the end of its stderr).
    """
    from ..mcp import McpClient, StdioTransport

    program = argv[0]
    if shutil.which(program) is None:
        raise CliError(f"MCP server command not found: {program} (in `{shlex.join(argv)}`)")
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as log:
        transport = StdioTransport(sys.executable, args=["-c", _WATCHER, *argv], stderr=log)
        entered = False
        try:
            with lone_exceptions():
                async with McpClient.connect(transport, name=name) as client:
                    entered = True
                    yield client
        except KovaError as exc:
            if entered:
                raise
            status, said = _ending(log)
            command = shlex.join(argv)
            if status is not None:
                message = f"the MCP server `{command}` exited with status {status}"
                message += " before it answered"
            elif "Connection closed" in str(exc):  # its stdout closed
                message = f"the MCP server `{command}` closed its output before it answered"
            else:
                message = f"the MCP server `{command}` did not start: {exc}"
            if said:
                message += "; the end of its stderr:\n  " + "\n  ".join(said)
            raise CliError(message) from exc
