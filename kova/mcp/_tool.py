"""McpTool: an MCP server's tool as a kova :class:`~kova.tools.Tool`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs

from .._errors import KovaTimeoutError, McpError
from .._models import ToolResult

if TYPE_CHECKING:
    from .._models import JSONObject
    from ._client import McpClient

__all__ = ["PREFIX_SEPARATOR", "McpTool", "mcp_tools"]

PREFIX_SEPARATOR = "__"
"""Between the server prefix and the server's own tool name: ``files__read_file``."""

_PREFIX = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)$")


def check_prefix(prefix: str) -> str:
    """Validate a server prefix.

    A prefix is letters, digits, ``-`` and single ``_``, and neither starts nor ends with
    ``_``. So the first ``__`` of a full name always ends the prefix, and two different
    (prefix, tool) pairs can never produce the same full name.

    Raises:
        ValueError: the prefix breaks these rules.
    """
    if not _PREFIX.match(prefix):
        raise ValueError(
            f"MCP tool prefix {prefix!r} must be letters, digits, '-' and single '_' "
            "(no '__', not starting or ending with '_')"
        )
    return prefix


@attrs.frozen(kw_only=True)
class McpTool:
    """One tool of an MCP server, callable like any native kova tool.

    ``name`` is ``{prefix}__{remote_name}``; ``execute`` calls ``remote_name`` on the server
    through the :class:`McpClient`.
    """

    client: McpClient = attrs.field(repr=False)
    prefix: str
    remote_name: str
    description: str = ""
    parameters: JSONObject = attrs.field(factory=lambda: {"type": "object", "properties": {}})

    @property
    def name(self) -> str:
        """The name the model calls it by: ``{prefix}__{remote_name}``."""
        return f"{self.prefix}{PREFIX_SEPARATOR}{self.remote_name}"

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Call the tool on the server.

        The server's JSON-RPC error (an unknown tool, invalid arguments) and a timeout come
        back as an error result the model can read; the server's own ``isError`` results
        pass through unchanged. A connection that broke twice raises
        :class:`~kova.KovaConnectionError` (the agent loop reports it in-band too).
        """
        try:
            return await self.client.tools_call(self.remote_name, arguments)
        except (McpError, KovaTimeoutError) as exc:
            return ToolResult.error(f"MCP tool {self.remote_name!r} failed: {exc}")


async def mcp_tools(client: McpClient, prefix: str) -> list[McpTool]:
    """Discover the server's tools and wrap each as an :class:`McpTool` named
    ``{prefix}__{tool}``.

    Args:
        client: a connected client.
        prefix: the server's prefix (see :func:`check_prefix`); give each server its own.

    Raises:
        ValueError: an invalid prefix.
        McpError, KovaConnectionError, KovaTimeoutError: listing the tools failed.
    """
    check_prefix(prefix)
    return [
        McpTool(
            client=client,
            prefix=prefix,
            remote_name=definition.name,
            description=definition.description,
            parameters=definition.parameters,
        )
        for definition in await client.tools_list()
    ]
