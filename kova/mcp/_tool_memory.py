"""McpToolMemory: the tool lists of MCP servers, remembered between runs.

A client connected with ``lazy=True`` does not start its server until a request needs it. An
agent that defers the server's tools (``AgentBuilder.mcp_client(..., defer=True)``) still
needs their definitions to search them; this memory gives them without starting the server,
from the last time it ran.

Where: one SQLite file, by default ``~/.kova/mcp-tools.db`` beside the session store of
``kova chat`` (``$KOVA_MCP_TOOLS_DB`` names another). SQLite rather than a JSON file because
several processes (a fleet of agents, two shells) write it at once: each server is one row
written in one transaction, so two writers never lose each other's servers, and a crash
mid-write leaves the last complete row (WAL journal). Every operation runs in a worker
thread.

What: one row per server, keyed by a digest of how it is reached (a stdio command with its
arguments and working directory, or a URL; never the environment or headers, which may hold
secrets), holding the version the server reported in ``initialize`` and its tool list. The
row is replaced whenever the server runs and reports another version or another list, and
after a ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .._json import loads
from .._log import get_logger
from .._record import Record
from .._requests import tool_from_json, tool_to_json
from .._wal import use_wal
from ._transports import InProcessTransport, SseTransport, StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from .._models import ToolDefinition
    from ._transports import Transport

__all__ = ["McpToolMemory", "RememberedTools", "default_memory_path", "server_key"]

log = get_logger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_tool_lists (
    server_key TEXT PRIMARY KEY,
    server TEXT NOT NULL,
    version TEXT NOT NULL,
    tools TEXT NOT NULL,
    saved_at REAL NOT NULL
)
"""

_BUSY_TIMEOUT = 10.0


def default_memory_path() -> Path:
    """``$KOVA_MCP_TOOLS_DB``, else ``~/.kova/mcp-tools.db``."""
    named = os.environ.get("KOVA_MCP_TOOLS_DB")
    return Path(named) if named else Path.home() / ".kova" / "mcp-tools.db"


def server_key(transport: Transport) -> tuple[str, str] | None:
    """How the memory names a server: (a digest of how it is reached, a readable label), or
    ``None`` for a transport it cannot name from one run to the next."""
    match transport:
        case StdioTransport(command=command, args=args, cwd=cwd):
            identity: list[str | None] = [
                "stdio",
                command,
                *args,
                None if cwd is None else str(cwd),
            ]
            label = " ".join((command, *args))
        case StreamableHttpTransport(url=url) | SseTransport(url=url):
            identity = [type(transport).__name__, url]
            label = url.split("?", 1)[0]
        case InProcessTransport(server=server):
            name = getattr(server, "name", None)
            if not isinstance(name, str):
                return None
            identity = ["in-process", name]
            label = f"in-process {name}"
        case _:
            return None
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    return digest, label[:200]


class RememberedTools(Record):
    """A server's tool list as the memory holds it."""

    server: str
    """A readable name of the server (its command or URL without the query)."""
    version: str
    """The version the server reported in ``initialize`` when the list was saved."""
    tools: tuple[ToolDefinition, ...]
    saved_at: float
    """When the list was saved (seconds since the epoch)."""


class McpToolMemory:
    """The MCP servers' tool lists kova remembers, in one SQLite file.

    Args:
        path: the file (made, with its folder, on the first write); by default
            :func:`default_memory_path` (``$KOVA_MCP_TOOLS_DB``, else ``~/.kova/mcp-tools.db``).

    A memory that cannot be read (a damaged file, a row written by something else) is
    treated as empty: the server is then started to list its tools, as without a memory.
    """

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is not None and not isinstance(path, str | os.PathLike):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        self._path = Path(path) if path is not None else default_memory_path()

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    def __repr__(self) -> str:
        return f"McpToolMemory({str(self._path)!r})"

    async def recall(self, key: str) -> RememberedTools | None:
        """The tool list saved under ``key`` (see :func:`server_key`), if any."""
        if not self._path.exists():
            return None
        try:
            return await trio.to_thread.run_sync(self._recall, key)
        except (sqlite3.Error, OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("mcp.tool_memory.unreadable", path=str(self._path), error=repr(exc))
            return None

    async def remember(
        self, key: str, *, server: str, version: str, tools: tuple[ToolDefinition, ...]
    ) -> None:
        """Save (replace) the tool list under ``key``. A failed write is logged, not raised:
        the memory only saves starting a server later. What the server reported is saved as
        it is, a lone surrogate too (see :func:`_column`), and reads back the same."""
        try:
            listed = json.dumps([tool_to_json(tool) for tool in tools])  # lone surrogates escaped
            row = (key, _column(server), _column(version), listed, time.time())
            await trio.to_thread.run_sync(
                self._execute,
                "INSERT OR REPLACE INTO mcp_tool_lists "
                "(server_key, server, version, tools, saved_at) VALUES (?, ?, ?, ?, ?)",
                row,
            )
        except (sqlite3.Error, OSError, ValueError) as exc:
            log.warning("mcp.tool_memory.unwritable", path=str(self._path), error=repr(exc))

    async def forget(self, key: str) -> None:
        """Drop the tool list saved under ``key``."""
        if self._path.exists():
            statement = "DELETE FROM mcp_tool_lists WHERE server_key = ?"
            await trio.to_thread.run_sync(self._execute, statement, (key,))

    # -- in a worker thread ---------------------------------------------------------------

    def _execute(self, statement: str, parameters: tuple[object, ...]) -> Any:
        """``statement`` on a connection of its own (closed after it); its first row."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT, isolation_level=None)
        try:
            use_wal(connection, _BUSY_TIMEOUT)
            connection.execute(_SCHEMA)
            return connection.execute(statement, parameters).fetchone()
        finally:
            connection.close()

    def _recall(self, key: str) -> RememberedTools | None:
        row = self._execute(
            "SELECT server, version, tools, saved_at FROM mcp_tool_lists WHERE server_key = ?",
            (key,),
        )
        if row is None:
            return None
        server, version, tools, saved_at = row
        listed = loads(tools)  # too deep: JsonNestingError, a ValueError (unreadable)
        if not isinstance(listed, list):
            raise ValueError("the stored tool list is not a JSON array")
        return RememberedTools(
            server=_from_column(server),
            version=_from_column(version),
            tools=tuple(tool_from_json(item) for item in listed),
            saved_at=float(saved_at),
        )


def _column(text: str) -> str | bytes:
    """``text`` as the memory stores it: as text, or text UTF-8 cannot hold (a lone surrogate
    in a server's name or version: SQLite cannot store it as text) as its bytes with the
    surrogate kept, which :func:`_from_column` reads back as the same text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def _from_column(value: object) -> str:
    if isinstance(value, bytes):  # undecodable bytes: ValueError, an unreadable memory
        return value.decode("utf-8", "surrogatepass")
    return str(value)
