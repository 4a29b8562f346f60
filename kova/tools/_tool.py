"""The :class:`Tool` protocol: what the agent loop needs from a tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._models import ToolDefinition

if TYPE_CHECKING:
    from .._models import JSONObject, ToolResult

__all__ = ["Tool", "definition"]


@runtime_checkable
class Tool(Protocol):
    """Something the model can call.

    Any object with these four members is a tool: a ``@tool``-decorated function, an MCP
    adapter, or a class of your own. Plain attributes, properties and frozen attrs fields all
    satisfy the read-only members.

    ``execute`` receives arguments that the agent loop has already checked against
    ``parameters``. It returns a :class:`~kova.ToolResult` *without* ``tool_use_id``; the loop
    stamps the id of the call being answered. A failure the model should see (a missing file,
    a refused request) is best returned as ``ToolResult.error(...)``; an exception raised by
    ``execute`` also reaches the model in-band as an error result, with the exception's text.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by (unique within a registry)."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def parameters(self) -> JSONObject:
        """A JSON Schema (``{"type": "object", ...}``) describing the arguments."""
        ...

    async def execute(self, arguments: JSONObject) -> ToolResult:
        """Run the tool.

        Args:
            arguments: the model's arguments, already validated against :attr:`parameters`.

        Returns:
            The outcome; ``is_error=True`` for a failure the model should recover from.

        Cancellation: the agent loop cancels ``execute`` when the turn is cancelled; the tool
        must stop its work (kill a subprocess, close a socket) before it returns.
        """
        ...


def definition(tool: Tool) -> ToolDefinition:
    """The :class:`~kova.ToolDefinition` a provider sends to the model for ``tool``."""
    return ToolDefinition(name=tool.name, description=tool.description, parameters=tool.parameters)
