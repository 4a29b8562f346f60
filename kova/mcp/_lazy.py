"""Starting an MCP server when it is first needed (``McpClient.connect(..., lazy=True)``).

A lazy client enters its block without starting the server (no process, no HTTP session).
Its first request starts the connection actor, once however many requests come at once. An
agent that defers the server's tools takes their definitions from the tool memory
(:mod:`kova.mcp._tool_memory`) instead of listing them, so a server none of whose tools the
model chooses never runs. When the server does start, its tool list and reported version are
compared with the remembered ones: a change is saved, and the agents that took the
remembered list are told the new one (as after ``notifications/tools/list_changed``, which
also updates the memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._log import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import trio

    from .._models import ToolDefinition
    from ..actors import ActorRef
    from ._state import SharedState
    from ._tool_memory import McpToolMemory, RememberedTools

__all__ = ["LazyStart"]

log = get_logger(__name__)


class LazyStart:
    """What a lazy client needs to start its server once, and to keep the memory of its
    tools up to date.

    Owned by one :class:`~kova.mcp.McpClient`; changed only by the tasks that use that
    client, between checkpoints.
    """

    __slots__ = (
        "closed",
        "given",
        "key",
        "label",
        "memory",
        "pending",
        "recalled",
        "spawn",
        "starting",
        "version",
    )

    def __init__(
        self,
        spawn: Callable[[], Awaitable[ActorRef]],
        memory: McpToolMemory,
        key: tuple[str, str] | None,
    ) -> None:
        self.spawn = spawn
        self.memory = memory
        self.key = key
        """The server's key in the memory and a readable label (``None``: not remembered)."""
        self.starting: trio.Event | None = None
        """Set when the start under way ends (``None``: none under way)."""
        self.recalled: RememberedTools | None = None
        """What the memory held when it was read."""
        self.given: tuple[ToolDefinition, ...] | None = None
        """The remembered tools handed out (to an agent) before the server started."""
        self.version: str | None = None
        """The version the running server reported."""
        self.pending: tuple[ToolDefinition, ...] | None = None
        """A tool list the server announced (``list_changed``) that is not saved yet."""
        self.closed = False

    async def recall(self) -> RememberedTools | None:
        """The remembered tool list, if there is one."""
        if self.key is None:
            return None
        if self.recalled is None:
            self.recalled = await self.memory.recall(self.key[0])
        return self.recalled

    async def saw(self, version: str, tools: tuple[ToolDefinition, ...]) -> None:
        """The started server's version and tools: saved if they are not what the memory
        holds."""
        self.version = version
        recalled = self.recalled
        if recalled is not None and recalled.version == version and recalled.tools == tools:
            return
        await self._save(tools)

    def listed(self, tools: tuple[ToolDefinition, ...]) -> None:
        """A tools listener: the server's list changed (saved at the client's next request,
        or when its block ends)."""
        if self.key is not None and self.version is not None:
            self.pending = tools

    async def flush(self) -> None:
        """Save a list the server announced, if one waits."""
        tools, self.pending = self.pending, None
        if tools is not None and (self.recalled is None or self.recalled.tools != tools):
            await self._save(tools)

    async def _save(self, tools: tuple[ToolDefinition, ...]) -> None:
        key = self.key
        version = self.version
        if key is None or version is None:
            return
        await self.memory.remember(key[0], server=key[1], version=version, tools=tools)
        self.recalled = None  # read again if asked: another process may write too
        log.info("mcp.tool_memory.saved", server=key[1], version=version, tools=len(tools))

    def tell(self, shared: SharedState, tools: tuple[ToolDefinition, ...]) -> None:
        """Tell the listeners that took the remembered tools the server's real list, if it
        differs."""
        given = self.given
        if given is None or given == tools:
            return
        self.given = None
        log.info("mcp.tool_memory.stale", server=shared.name, tools=len(tools))
        shared.tell_tools(tools)
