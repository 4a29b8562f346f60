"""The MCP side of kova's event stream: one small hook, kept apart from the connection.

An MCP request made from an observed tool call (the task the tool pool marks, see
:func:`kova._observe.current_scope`) is bracketed by ``McpRequestStarted`` /
``McpRequestFinished`` with the MCP method name; anywhere else it costs one context-variable
read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._observe import observe_mcp_request

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["observe_request"]

_METHODS = {
    "ListTools": "tools/list",
    "CallTool": "tools/call",
    "ListResources": "resources/list",
    "ListResourceTemplates": "resources/templates/list",
    "ReadResource": "resources/read",
    "ListPrompts": "prompts/list",
    "GetPrompt": "prompts/get",
    "Subscribe": "resources/subscribe",
    "SetLogLevel": "logging/setLevel",
    "SetRoots": "notifications/roots/list_changed",
}


def observe_request(connection: str, message: object) -> AbstractContextManager[None]:
    """Events around one request message sent to the connection ``connection``."""
    kind = type(message).__name__
    target = getattr(message, "name", None) or getattr(message, "uri", None)
    return observe_mcp_request(
        connection, _METHODS.get(kind, kind), target if isinstance(target, str) else None
    )
