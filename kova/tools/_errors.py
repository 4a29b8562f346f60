"""Errors of the tool layer. All but :class:`WebFetchError` are :class:`~kova.ToolError`,
so kova-side faults.

A tool that *fails* (raises, gets bad arguments from the model) is not one of these: its
failure goes back to the model in-band as an error :class:`~kova.ToolResult`. These errors
mark mistakes of the program that defines or registers tools, except
:class:`WebFetchError`, which :func:`~kova.tools.fetch_text` raises to its direct callers
(``fetch_webpage`` turns it into an error result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import KovaError, ToolError

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["DuplicateToolError", "InvalidToolArguments", "ToolDefinitionError", "WebFetchError"]


class ToolDefinitionError(ToolError):
    """A tool is defined wrongly: ``@tool`` cannot build a schema for a parameter, a name is
    not usable, or a tool's JSON Schema is itself invalid."""


class DuplicateToolError(ToolError):
    """A registry already holds a tool of this name. ``AgentBuilder`` reports it as
    :class:`~kova.BuildError`."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        super().__init__(f"a tool named {tool_name!r} is already registered")


class InvalidToolArguments(ToolError):
    """Arguments do not match a tool's JSON Schema.

    The message lists every problem, one per line, and is written for the model: the agent
    loop sends it back in-band as an error tool result so the model can correct its call.
    """

    def __init__(self, problems: Iterable[str], *, tool_name: str | None = None) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        """One line per schema violation, each starting with the JSON path it concerns."""
        self.tool_name = tool_name
        subject = f"tool {tool_name!r}" if tool_name else "the tool"
        lines = "\n".join(f"- {problem}" for problem in self.problems)
        super().__init__(f"invalid arguments for {subject}:\n{lines}")


class WebFetchError(KovaError):
    """:func:`~kova.tools.fetch_text` was refused by the policy (the SSRF guard, the URL
    rules) or failed (DNS, connection, protocol, too many redirects, the time limit, binary
    content). The message says which and why."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url
        """The URL of the hop that failed (a redirect target, possibly)."""
