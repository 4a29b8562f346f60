"""MCP (Model Context Protocol) client: supervised connections to MCP servers.

Importing this package imports the ``mcp`` SDK (``pip install kova-sdk[mcp]``); ``import
kova`` alone never does.
"""

# ruff: noqa: E402 (the extra is checked before the imports that need it)
from .._extras import require_extra as _require_extra

_require_extra("mcp", "kova.mcp")  # one line naming the extra, not a bare ModuleNotFoundError

from ._auth import TokenProvider as TokenProvider
from ._client import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from ._client import DEFAULT_REQUEST_TIMEOUT as DEFAULT_REQUEST_TIMEOUT
from ._client import McpClient as McpClient
from ._tool import PREFIX_SEPARATOR as PREFIX_SEPARATOR
from ._tool import McpTool as McpTool
from ._tool import ToolFilter as ToolFilter
from ._tool import mcp_tools as mcp_tools
from ._tool_memory import McpToolMemory as McpToolMemory
from ._tool_memory import RememberedTools as RememberedTools
from ._transports import InProcessTransport as InProcessTransport
from ._transports import SseTransport as SseTransport
from ._transports import StdioTransport as StdioTransport
from ._transports import StreamableHttpTransport as StreamableHttpTransport
from ._transports import Transport as Transport
from ._types import ConnectionStatus as ConnectionStatus
from ._types import ElicitationHandler as ElicitationHandler
from ._types import ElicitationRequest as ElicitationRequest
from ._types import ElicitationResponse as ElicitationResponse
from ._types import LogHandler as LogHandler
from ._types import McpConnectionState as McpConnectionState
from ._types import McpLogMessage as McpLogMessage
from ._types import McpProgress as McpProgress
from ._types import McpPrompt as McpPrompt
from ._types import McpPromptArgument as McpPromptArgument
from ._types import McpPromptResult as McpPromptResult
from ._types import McpResource as McpResource
from ._types import McpResourceContents as McpResourceContents
from ._types import McpResourceTemplate as McpResourceTemplate
from ._types import McpRoot as McpRoot
from ._types import McpServerInfo as McpServerInfo
from ._types import ProgressHandler as ProgressHandler
from ._types import ReconnectPolicy as ReconnectPolicy
from ._types import ResourceUpdatedHandler as ResourceUpdatedHandler
from ._types import StateChangeHandler as StateChangeHandler

__all__ = [
    "ConnectionStatus",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "InProcessTransport",
    "LogHandler",
    "McpClient",
    "McpConnectionState",
    "McpLogMessage",
    "McpProgress",
    "McpPrompt",
    "McpPromptArgument",
    "McpPromptResult",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
    "McpRoot",
    "McpServerInfo",
    "McpTool",
    "McpToolMemory",
    "PREFIX_SEPARATOR",
    "ProgressHandler",
    "ReconnectPolicy",
    "RememberedTools",
    "ResourceUpdatedHandler",
    "SseTransport",
    "StateChangeHandler",
    "StdioTransport",
    "StreamableHttpTransport",
    "TokenProvider",
    "ToolFilter",
    "Transport",
    "mcp_tools",
]
