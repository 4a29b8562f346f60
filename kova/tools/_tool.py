"""The :class:`Tool` protocol: what the agent loop needs from a tool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._models import ToolAnnotations, ToolDefinition

if TYPE_CHECKING:
    from .._models import JSONObject, ToolResult

__all__ = ["Tool", "annotations_of", "definition", "is_deferred"]


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

    A tool may also have a ``defer`` attribute, ``True`` for a tool the model finds with
    ``search_tools`` instead of being sent its definition up front (read with
    :func:`is_deferred`; docs/tools.md, "Many tools").

    A tool may also have an ``annotations`` attribute, a :class:`~kova.ToolAnnotations` (or
    ``None``): hints such as "read-only" that approval handlers and UIs read. It is optional,
    and deliberately not a member of the protocol, so tools written before it existed stay
    tools; kova reads it with :func:`annotations_of`.
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


def annotations_of(tool: Tool) -> ToolAnnotations | None:
    """``tool``'s :class:`~kova.ToolAnnotations`, or ``None`` when it declares none.

    Raises:
        TypeError: the tool's ``annotations`` attribute is neither ``None`` nor a
            ``ToolAnnotations`` (a programming error, reported where the tool is used).
    """
    hints = getattr(tool, "annotations", None)
    if hints is None or isinstance(hints, ToolAnnotations):
        return hints
    raise TypeError(
        f"tool {tool.name!r}: annotations must be a kova.ToolAnnotations or None, "
        f"not {type(hints).__name__}"
    )


def definition(tool: Tool) -> ToolDefinition:
    """The :class:`~kova.ToolDefinition` a provider sends to the model for ``tool``.

    Its ``annotations`` are the tool's own (see :func:`annotations_of`); providers never send
    them to the model.
    """
    return ToolDefinition(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        annotations=annotations_of(tool),
    )


def is_deferred(tool: Tool) -> bool:
    """Whether ``tool`` is deferred: offered only once ``search_tools`` finds it.

    Raises:
        TypeError: the tool's ``defer`` attribute is not a bool (a programming error,
            reported where the tool is registered).
    """
    defer = getattr(tool, "defer", False)
    if isinstance(defer, bool):
        return defer
    raise TypeError(f"tool {tool.name!r}: defer must be a bool, not {type(defer).__name__}")
