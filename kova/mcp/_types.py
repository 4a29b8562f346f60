"""kova's own values for what an MCP server offers: resources, prompts, elicitation.

Tools are described by :class:`kova.ToolDefinition` and their results are
:class:`kova.ToolResult`, the same values native tools use. The ``mcp`` package's pydantic
models never leave :mod:`kova.mcp`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    from .._models import JSONObject, Message

__all__ = [
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptResult",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
    "McpServerInfo",
]


@attrs.frozen(kw_only=True)
class McpServerInfo:
    """What the server said about itself in ``initialize``."""

    name: str
    version: str = ""
    instructions: str | None = None
    """How to use the server, meant for the model (e.g. appended to a system prompt)."""
    protocol_version: str = ""
    """The MCP protocol version the two sides agreed on."""


@attrs.frozen(kw_only=True)
class McpResource:
    """A resource the server lists (``resources/list``)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    """Size in bytes, when the server knows it."""


@attrs.frozen(kw_only=True)
class McpResourceTemplate:
    """A parameterised resource (``resources/templates/list``), an RFC 6570 URI template."""

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@attrs.frozen(kw_only=True)
class McpResourceContents:
    """One item of a read resource: exactly one of ``text`` or ``blob`` (base64) is set."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@attrs.frozen(kw_only=True)
class McpPromptArgument:
    """An argument a prompt template accepts."""

    name: str
    description: str | None = None
    required: bool = False


@attrs.frozen(kw_only=True)
class McpPrompt:
    """A prompt template the server lists (``prompts/list``)."""

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = ()


@attrs.frozen(kw_only=True)
class McpPromptResult:
    """A rendered prompt (``prompts/get``), as kova messages ready to go into a history."""

    description: str | None = None
    messages: tuple[Message, ...] = ()


@attrs.frozen(kw_only=True)
class ElicitationRequest:
    """The server asks the user for input.

    In form mode, ``requested_schema`` is a flat JSON Schema object describing the fields
    the server wants. In URL mode, ``url`` is a page the user should open (kova never opens
    it); answer ``accept`` once the user agreed to go there.
    """

    message: str
    mode: Literal["form", "url"] = "form"
    requested_schema: JSONObject | None = None
    url: str | None = None


@attrs.frozen(kw_only=True)
class ElicitationResponse:
    """The user's answer: ``accept`` (with ``content`` in form mode), ``decline`` or
    ``cancel`` (dismissed without choosing)."""

    action: Literal["accept", "decline", "cancel"]
    content: JSONObject | None = None


ElicitationHandler: TypeAlias = Callable[[ElicitationRequest], Awaitable[ElicitationResponse]]
"""A host function that asks the user and returns the answer."""
