"""McpTool: an MCP server's tool as a kova :class:`~kova.tools.Tool`."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, TypeAlias

from .._errors import KovaTimeoutError, McpError, McpUnavailableError
from .._log import get_logger
from .._models import ToolAnnotations, ToolDefinition, ToolResult
from .._record import Record, set_field

if TYPE_CHECKING:
    from .._models import JSONObject
    from ..tools import ToolRegistry
    from ._client import McpClient

__all__ = ["PREFIX_SEPARATOR", "McpTool", "ToolFilter", "bind_tools", "mcp_tools"]

log = get_logger(__name__)

ToolFilter: TypeAlias = Collection[str] | Callable[[ToolDefinition], bool]
"""Which of a server's tools to take: their names (the server's own, without the prefix),
or a predicate over the tool definition (name, description, schema, annotations)."""

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


class McpTool(Record, repr_exclude=("client",)):
    """One tool of an MCP server, callable like any native kova tool.

    ``name`` is ``{prefix}__{remote_name}``; ``execute`` calls ``remote_name`` on the server
    through the :class:`McpClient`. A frozen value; ``parameters`` defaults to a fresh
    schema of an object with no properties.
    """

    client: McpClient
    prefix: str
    remote_name: str
    description: str
    parameters: JSONObject
    annotations: ToolAnnotations | None
    """The server's hints (read-only, destructive, idempotent, open-world), for the host."""
    output_schema: JSONObject | None
    """The JSON Schema of the tool's structured result, when the server declares one."""
    defer: bool
    """Found by the model with ``search_tools`` rather than sent up front
    (``AgentBuilder.mcp_client(..., defer=True)``)."""

    def __init__(
        self,
        *,
        client: McpClient,
        prefix: str,
        remote_name: str,
        description: str = "",
        parameters: JSONObject | None = None,
        annotations: ToolAnnotations | None = None,
        output_schema: JSONObject | None = None,
        defer: bool = False,
    ) -> None:
        if not isinstance(defer, bool):
            raise TypeError(f"defer must be a bool, got {type(defer).__name__}")
        set_field(self, "client", client)
        set_field(self, "prefix", prefix)
        set_field(self, "remote_name", remote_name)
        set_field(self, "description", description)
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        set_field(self, "parameters", parameters)
        set_field(self, "annotations", annotations)
        set_field(self, "output_schema", output_schema)
        set_field(self, "defer", defer)

    @property
    def name(self) -> str:
        """The name the model calls it by: ``{prefix}__{remote_name}``."""
        return f"{self.prefix}{PREFIX_SEPARATOR}{self.remote_name}"

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Call the tool on the server.

        The server's JSON-RPC error (an unknown tool, invalid arguments), a timeout, an
        unavailable server and a call interrupted by a lost connection (which may or may not
        have run) come back as an error result the model can read; the server's own
        ``isError`` results pass through unchanged, ``structured`` content included.
        """
        try:
            return await self.client.tools_call(self.remote_name, arguments)
        except (McpError, KovaTimeoutError, McpUnavailableError) as exc:
            return ToolResult.error(f"MCP tool {self.remote_name!r} failed: {exc}")


def _selected(
    definitions: Iterable[ToolDefinition],
    include: ToolFilter | None,
    exclude: ToolFilter | None,
    *,
    strict: bool,
) -> list[ToolDefinition]:
    """The definitions ``include`` lets in and ``exclude`` does not keep out.

    With ``strict``, a name in either list that the server does not have is an error (a
    typo in ``exclude`` would silently hand the model the tool it was meant to hide).
    """
    definitions = list(definitions)
    available = {definition.name for definition in definitions}
    for option, value in (("include", include), ("exclude", exclude)):
        if value is None or callable(value):
            continue
        if isinstance(value, str):
            raise ValueError(f"{option} must be a collection of tool names, not one string")
        unknown = sorted(set(value) - available)
        if strict and unknown:
            raise ValueError(
                f"{option} names tools the server does not have: {', '.join(unknown)} "
                f"(it has: {', '.join(sorted(available)) or 'none'})"
            )

    def matches(rule: ToolFilter, definition: ToolDefinition) -> bool:
        return rule(definition) if callable(rule) else definition.name in rule

    return [
        definition
        for definition in definitions
        if (include is None or matches(include, definition))
        and (exclude is None or not matches(exclude, definition))
    ]


def _wrap(
    client: McpClient, prefix: str, definition: ToolDefinition, defer: bool = False
) -> McpTool:
    return McpTool(
        client=client,
        prefix=prefix,
        remote_name=definition.name,
        description=definition.description,
        parameters=definition.parameters,
        annotations=definition.annotations,
        output_schema=definition.output_schema,
        defer=defer,
    )


async def mcp_tools(
    client: McpClient,
    prefix: str,
    *,
    include: ToolFilter | None = None,
    exclude: ToolFilter | None = None,
    defer: bool = False,
) -> list[McpTool]:
    """Discover the server's tools and wrap each as an :class:`McpTool` named
    ``{prefix}__{tool}``.

    Args:
        client: a connected client.
        prefix: the server's prefix (see :func:`check_prefix`); give each server its own.
        include: only these tools (names, or a predicate over the definition).
        exclude: not these tools (names, or a predicate), e.g. ``exclude=["get-env"]``.
        defer: make every tool deferred (:attr:`McpTool.defer`): the model finds them with
            ``search_tools`` instead of being sent them all up front. A client connected
            with ``lazy=True`` then gives its remembered tools without starting the server.

    Raises:
        ValueError: an invalid prefix, or ``include``/``exclude`` names a tool the server
            does not have.
        McpError, KovaConnectionError, KovaTimeoutError: listing the tools failed.
    """
    check_prefix(prefix)
    # A deferred server's tools may come from the memory of a lazy client: its server then
    # starts only when the model calls one of them.
    listed = await client.tools_list(remembered=defer)
    definitions = _selected(listed, include, exclude, strict=True)
    return [_wrap(client, prefix, definition, defer) for definition in definitions]


def bind_tools(
    client: McpClient,
    prefix: str,
    registry: ToolRegistry,
    tools: Iterable[McpTool],
    *,
    include: ToolFilter | None = None,
    exclude: ToolFilter | None = None,
    defer: bool = False,
) -> Callable[[], None]:
    """Keep ``registry`` in step with the server's tools under ``prefix``.

    ``tools`` are the ones already registered. After each ``tools/list_changed`` the
    client lists the tools again; tools that went away are unregistered, new ones (that
    pass ``include``/``exclude``) registered, changed ones replaced, so an agent using
    ``registry`` sees the new list from its next step on. Returns a function that stops it.
    """
    current: dict[str, McpTool] = {tool.name: tool for tool in tools}

    def update(definitions: tuple[ToolDefinition, ...]) -> None:
        wanted = {
            tool.name: tool
            for tool in (
                _wrap(client, prefix, definition, defer)
                for definition in _selected(definitions, include, exclude, strict=False)
            )
        }
        for name in list(current):
            if wanted.get(name) != current[name]:
                registry.unregister(name)
                del current[name]
        for name, tool in wanted.items():
            if name not in current:
                registry.register(tool)
                current[name] = tool
        log.info("mcp.tools.updated", prefix=prefix, tools=len(current))

    return client.add_tools_listener(update)
