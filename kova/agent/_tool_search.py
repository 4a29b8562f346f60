"""Tool search in the turn core: deferred tools and the ``search_tools`` tool that finds them.

An agent with deferred tools (``@tool(defer=True)``, ``mcp_client(..., defer=True)``) does not
send their definitions to the model. It offers one tool instead, ``search_tools``, and the
turn core answers the model's calls to it itself (the search is pure: a BM25 index over the
deferred definitions, :mod:`kova._tool_index`). The tools a search finds are offered from the
turn's next model call on, after the tools offered up front (so a cached prompt prefix of
the up-front tools still matches), and stay offered for the rest of the turn.

Because the core answers the search, every driver gets it unchanged: ``Agent.run`` and
``Agent.stream``, a resumed turn, the journal (the found tools are part of the saved turn)
and Temporal workflows (the search is deterministic). Nothing here does I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from .._messages import ToolResult, ToolUse
from .._requests import ToolAnnotations, ToolDefinition
from .._tool_index import SEARCH_TOOLS, ToolIndex
from ._events import ToolsFound

__all__ = ["NATIVE_TOOL_SEARCH", "SEARCH_TOOLS", "ToolSearch", "search_tools_definition"]

NATIVE_TOOL_SEARCH = frozenset({"anthropic", "openai-responses"})
"""The providers (by ``Provider.name``) with a tool search of their own."""

_MAX_LIMIT = 50
"""The most tools one search returns, whatever the model asks for."""


@functools.lru_cache(maxsize=8)
def search_tools_definition(limit: int) -> ToolDefinition:
    """The definition of ``search_tools`` as the model sees it (one value per limit)."""
    return ToolDefinition(
        name=SEARCH_TOOLS,
        description=(
            "Search the tools that are available but not yet loaded. Describe the action you "
            "need in a few words (for example 'create a calendar event'); the best matches "
            "are loaded and can be called from your next step on. Search again with other "
            "words if none fits."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what the tool should do"},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": _MAX_LIMIT,
                    "description": f"how many tools to load at most (default {limit})",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        annotations=ToolAnnotations(read_only=True),
    )


class ToolSearch:
    """The deferred tools of one turn and which of them the model has found.

    Part of a :class:`~kova.agent.Turn`'s state; pure. ``found`` only grows, in the order
    the tools were found, and is what a saved turn records.
    """

    __slots__ = (
        "_by_name",
        "_definition",
        "_definitions",
        "_found",
        "_index",
        "_limit",
        "_offer",
        "native",
    )

    def __init__(
        self,
        deferred: Sequence[ToolDefinition],
        *,
        limit: int,
        found: Sequence[str] = (),
        native: bool = False,
    ) -> None:
        self.native = native
        """The provider searches (``tool_search(provider_native=True)``): the deferred tools
        go with each request, marked for the provider's own search, and ``search_tools`` is
        not offered."""
        self._definitions = tuple(deferred)
        # Built when first needed: most turns never search (see _names).
        self._by_name: Mapping[str, ToolDefinition] | None = None
        self._limit = limit
        # Names the turn found, kept even when a refreshed list no longer has them (they
        # are then simply not offered: the tool is gone).
        self._found: list[str] = list(found)
        self._index: ToolIndex | None = None  # built on the first search
        self._definition = search_tools_definition(limit)
        # The last offer made (the up-front tools it was made for, and the whole offer).
        self._offer: tuple[tuple[ToolDefinition, ...], tuple[ToolDefinition, ...]] | None = None

    def offer(self, upfront: tuple[ToolDefinition, ...]) -> tuple[ToolDefinition, ...]:
        """What a model call offers: ``upfront``, ``search_tools``, then the tools found (the
        same tuple until something changes)."""
        if self.native:
            return upfront
        cached = self._offer
        if cached is not None and cached[0] is upfront:
            return cached[1]
        offered = (*upfront, self._definition, *self.offered())
        self._offer = (upfront, offered)
        return offered

    @property
    def limit(self) -> int:
        """How many tools a search loads when the model does not say."""
        return self._limit

    @property
    def deferred(self) -> tuple[ToolDefinition, ...]:
        """Every deferred definition, found or not."""
        return self._definitions

    @property
    def found(self) -> tuple[str, ...]:
        """The names found so far in this turn, in the order found."""
        return tuple(self._found)

    def offered(self) -> tuple[ToolDefinition, ...]:
        """The definitions of the found tools that still exist, in the order found."""
        if not self._found:
            return ()
        by_name = self._names()
        return tuple(by_name[name] for name in self._found if name in by_name)

    def replace(self, deferred: Sequence[ToolDefinition]) -> None:
        """A refreshed list of deferred tools (a server's list changed); what was found
        stays found."""
        definitions = tuple(deferred)
        if definitions != self._definitions:
            self._offer = None
            self._definitions = definitions
            self._by_name = None
            self._index = None

    def _names(self) -> Mapping[str, ToolDefinition]:
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = {d.name: d for d in self._definitions}
        return by_name

    def answer(self, call: ToolUse) -> tuple[ToolResult, ToolsFound | None]:
        """Answer one ``search_tools`` call: the result the model gets, and what was found
        (``None`` for a call whose arguments are wrong: the result says what was wrong)."""
        arguments = call.input
        query = arguments.get("query") if isinstance(arguments, Mapping) else None
        limit = arguments.get("limit", self._limit) if isinstance(arguments, Mapping) else None
        if not isinstance(query, str) or not query.strip():
            return _error(call, "search_tools needs a non-empty 'query' string"), None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
            return _error(call, f"'limit' must be an integer from 1 to {_MAX_LIMIT}"), None
        index = self._index
        if index is None:
            index = self._index = ToolIndex(self._definitions)
        matches = index.search(query, limit=limit, exclude=self._found)
        names = tuple(match.name for match in matches)
        if names:
            self._found.extend(names)
            self._offer = None
        found = ToolsFound(query=query, names=names, call_id=call.id)
        if not names:
            text = (
                f"No tool matches {query[:200]!r}. Try other words; the tools already loaded are "
                "still available."
            )
            return ToolResult(tool_use_id=call.id, content=text), found
        lines = [f"Loaded {len(names)} tool(s); call them from your next step on:"]
        for name in names:
            description = self._names()[name].description.strip().splitlines()
            lines.append(f"- {name}: {description[0] if description else ''}".rstrip(": "))
        return ToolResult(tool_use_id=call.id, content="\n".join(lines)), found


def _error(call: ToolUse, text: str) -> ToolResult:
    return ToolResult(tool_use_id=call.id, content=text, is_error=True)
