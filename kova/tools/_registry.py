"""``ToolRegistry``: tools by name, shared between clones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ToolNotFoundError
from .._requests import check_schema
from ._decorator import FunctionTool
from ._errors import DuplicateToolError, ToolDefinitionError
from ._tool import Tool, definition, is_deferred
from ._validate import ArgumentValidator

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from .._models import ToolDefinition

__all__ = ["ToolRegistry"]


class _Entry:
    __slots__ = ("_definition", "deferred", "fixed", "tool", "validator")

    def __init__(self, tool: Tool, deferred: bool) -> None:
        self.tool = tool
        self.deferred = deferred
        self.fixed = type(tool) is FunctionTool
        """The definition is built once (a ``@tool`` function's never changes)."""
        # Compiled on the first validation, recompiled if the tool's schema object changes.
        self.validator: ArgumentValidator | None = None
        self._definition: ToolDefinition | None = None

    def definition(self) -> ToolDefinition:
        """The tool's definition, built once for a ``@tool`` function (whose name,
        description, schema and annotations never change) and on every read for any other
        tool (whose properties may)."""
        cached = self._definition
        if cached is not None:
            return cached
        built = definition(self.tool)
        if self.fixed:
            self._definition = built
        return built


class _Store:
    __slots__ = ("entries", "split")

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}
        self.split: tuple[tuple[ToolDefinition, ...], tuple[ToolDefinition, ...]] | None = None
        """:meth:`ToolRegistry.split_definitions`, kept until a tool is registered or
        removed (only while every tool's definition is fixed)."""


class ToolRegistry:
    """Tools by name, in registration order.

    A registry and all its :meth:`clone`\\ s share one set of registrations: a tool registered
    through any of them is seen by all (the seed's ``ToolRegistry`` semantics). Pass
    ``ToolRegistry()`` for an independent one.

    There is no lock, and none is needed: kova runs in one thread under trio, and no method
    awaits, so a registration or lookup runs from start to end without another task
    interleaving. (Do not touch a registry from a worker thread.) In an agent the registry is
    shared, not owned by one actor: each turn reads the definitions in its own task, the tool
    pool actor looks tools up and validates their arguments, and an MCP connection registers
    and unregisters its server's tools as they change.

    Args:
        tools: tools to register right away.

    Raises:
        DuplicateToolError: two of ``tools`` share a name.
    """

    __slots__ = ("_store",)

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._store = _Store()
        for item in tools:
            self.register(item)

    def clone(self) -> ToolRegistry:
        """Another handle on the same registrations."""
        clone = ToolRegistry()
        clone._store = self._store
        return clone

    def register(self, tool: Tool) -> None:
        """Add ``tool`` under its name.

        Raises:
            DuplicateToolError: a tool of that name is already registered.
            ToolDefinitionError: ``tool`` does not implement the :class:`Tool` protocol, its
                name is empty, its parameters are not a JSON object JSON can carry
                (nested at most 128 levels deep), or its ``defer`` is not a bool.
        """
        if not isinstance(tool, Tool):
            raise ToolDefinitionError(
                f"{tool!r} is not a Tool (it needs name, description, parameters and an "
                "async execute method)"
            )
        name = tool.name
        if not isinstance(name, str) or not name:
            raise ToolDefinitionError(f"tool {tool!r} has an empty name")
        try:
            check_schema(tool.parameters, f"tool {name!r}: parameters")
            deferred = is_deferred(tool)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(str(exc)) from None
        if name in self._store.entries:
            raise DuplicateToolError(name)
        self._store.entries[name] = _Entry(tool=tool, deferred=deferred)
        self._store.split = None

    def unregister(self, name: str) -> Tool | None:
        """Remove and return the tool called ``name`` (``None`` if there is none)."""
        entry = self._store.entries.pop(name, None)
        if entry is None:
            return None
        self._store.split = None
        return entry.tool

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        entry = self._store.entries.get(name)
        return None if entry is None else entry.tool

    def names(self) -> list[str]:
        """The names of all tools, in registration order."""
        return list(self._store.entries)

    def definitions(self, *, deferred: bool | None = None) -> list[ToolDefinition]:
        """What the provider sends to the model, one per tool, in registration order.

        Args:
            deferred: ``None`` for every tool; ``False`` for the tools offered up front;
                ``True`` for the deferred ones (``@tool(defer=True)``), which the model
                finds with ``search_tools``.
        """
        entries = self._store.entries.values()
        if deferred is None:
            return [entry.definition() for entry in entries]
        return [entry.definition() for entry in entries if entry.deferred is deferred]

    def split_definitions(self) -> tuple[tuple[ToolDefinition, ...], tuple[ToolDefinition, ...]]:
        """``(up front, deferred)``: :meth:`definitions` with ``deferred=False`` and with
        ``deferred=True``, in registration order. An agent reads them at the start of every
        turn: while every tool's definition is fixed (``@tool`` functions), the pair is
        worked out once and kept until a tool is registered or removed."""
        store = self._store
        split = store.split
        if split is not None:
            return split
        upfront: list[ToolDefinition] = []
        deferred: list[ToolDefinition] = []
        fixed = True
        for entry in store.entries.values():
            (deferred if entry.deferred else upfront).append(entry.definition())
            fixed = fixed and entry.fixed
        split = (tuple(upfront), tuple(deferred))
        if fixed:
            store.split = split
        return split

    @property
    def has_deferred(self) -> bool:
        """Whether any tool is deferred (the agent then offers ``search_tools``)."""
        return any(entry.deferred for entry in self._store.entries.values())

    def validate_arguments(self, name: str, arguments: object) -> None:
        """Check ``arguments`` against the schema of the tool called ``name``.

        The schema is compiled once per tool and reused (recompiled only when the tool's
        ``parameters`` returns a different object; a ``@tool`` function's never does).

        Raises:
            ToolNotFoundError: no tool is called ``name``.
            InvalidToolArguments: the arguments do not match; the message lists every
                problem and is meant to go back to the model as an error tool result.
            ToolDefinitionError: the tool's schema is not a valid JSON Schema.
        """
        entry = self._store.entries.get(name)
        if entry is None:
            raise ToolNotFoundError(name)
        validator = entry.validator
        if validator is None or (not entry.fixed and validator.schema is not entry.tool.parameters):
            validator = entry.validator = ArgumentValidator(entry.tool.parameters)
        validator.validate(arguments, tool_name=name)

    def __contains__(self, name: object) -> bool:
        return name in self._store.entries

    def __len__(self) -> int:
        return len(self._store.entries)

    def __iter__(self) -> Iterator[Tool]:
        """The tools in registration order (a snapshot: registering meanwhile is safe)."""
        return iter([entry.tool for entry in self._store.entries.values()])

    def __repr__(self) -> str:
        return f"<ToolRegistry {self.names()!r}>"
