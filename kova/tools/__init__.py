"""Tools: the :class:`Tool` protocol, the ``@tool`` decorator, argument validation, the
:class:`ToolRegistry`, and the built-in file, shell and web tools (:func:`builtin_tools`)
confined by a :class:`ToolPolicy`."""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names
from ._context import ToolContext as ToolContext
from ._context import current_tool_context as current_tool_context
from ._decorator import FunctionTool as FunctionTool
from ._decorator import tool as tool
from ._errors import DuplicateToolError as DuplicateToolError
from ._errors import InvalidToolArguments as InvalidToolArguments
from ._errors import ToolDefinitionError as ToolDefinitionError
from ._errors import WebFetchError as WebFetchError
from ._registry import ToolRegistry as ToolRegistry
from ._tool import Tool as Tool
from ._tool import annotations_of as annotations_of
from ._tool import definition as definition
from ._validate import ArgumentValidator as ArgumentValidator
from ._validate import argument_problems as argument_problems
from ._validate import validate_arguments as validate_arguments

if _TYPE_CHECKING:
    from ._builtin import builtin_tools as builtin_tools
    from ._policy import ToolPolicy as ToolPolicy
    from ._policy import WebPolicy as WebPolicy
    from ._web import FetchedText as FetchedText
    from ._web import fetch_text as fetch_text

# The built-in tools and their policies load on first use: an agent program that defines its
# own tools never pays for the file, shell and web modules at import.
_LAZY = {
    "builtin_tools": "._builtin",
    "ToolPolicy": "._policy",
    "WebPolicy": "._policy",
    "FetchedText": "._web",
    "fetch_text": "._web",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)


__all__ = [
    "ArgumentValidator",
    "DuplicateToolError",
    "FetchedText",
    "FunctionTool",
    "InvalidToolArguments",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolPolicy",
    "ToolRegistry",
    "WebFetchError",
    "WebPolicy",
    "annotations_of",
    "argument_problems",
    "builtin_tools",
    "current_tool_context",
    "definition",
    "fetch_text",
    "tool",
    "validate_arguments",
]
