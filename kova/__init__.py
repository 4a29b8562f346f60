"""kova: an LLM agent SDK on a trio actor runtime.

Public names are re-exported here; heavy optional parts (MCP, Bedrock, OpenTelemetry) live in
subpackages that import their dependencies only when used.
"""

import typing as _typing

from ._errors import ActorError as ActorError
from ._errors import ActorFailed as ActorFailed
from ._errors import AgentLoopError as AgentLoopError
from ._errors import BuildError as BuildError
from ._errors import ConfigError as ConfigError
from ._errors import ContextBudgetExceededError as ContextBudgetExceededError
from ._errors import ContextOverflow as ContextOverflow
from ._errors import InvalidRequest as InvalidRequest
from ._errors import InvalidResponse as InvalidResponse
from ._errors import KovaConnectionError as KovaConnectionError
from ._errors import KovaError as KovaError
from ._errors import KovaIOError as KovaIOError
from ._errors import KovaTimeoutError as KovaTimeoutError
from ._errors import MailboxClosed as MailboxClosed
from ._errors import MaxIterationsError as MaxIterationsError
from ._errors import McpCallInterruptedError as McpCallInterruptedError
from ._errors import McpError as McpError
from ._errors import McpUnavailableError as McpUnavailableError
from ._errors import ModelNotFound as ModelNotFound
from ._errors import ProviderAuthError as ProviderAuthError
from ._errors import ProviderError as ProviderError
from ._errors import ProviderErrorClass as ProviderErrorClass
from ._errors import ProviderOverloaded as ProviderOverloaded
from ._errors import RateLimited as RateLimited
from ._errors import SerializationError as SerializationError
from ._errors import StreamError as StreamError
from ._errors import StructuredOutputError as StructuredOutputError
from ._errors import ToolError as ToolError
from ._errors import ToolExecutionError as ToolExecutionError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._errors import TurnCancelled as TurnCancelled
from ._lazy import lazy_names as _lazy_names
from ._models import Audio as Audio
from ._models import ContentBlock as ContentBlock
from ._models import Document as Document
from ._models import File as File
from ._models import Image as Image
from ._models import InferenceConfig as InferenceConfig
from ._models import JSONObject as JSONObject
from ._models import JSONValue as JSONValue
from ._models import MediaOutput as MediaOutput
from ._models import Message as Message
from ._models import RedactedThinking as RedactedThinking
from ._models import ResponseFormat as ResponseFormat
from ._models import Role as Role
from ._models import SignedThinking as SignedThinking
from ._models import StopKind as StopKind
from ._models import StopReason as StopReason
from ._models import Text as Text
from ._models import TextDelta as TextDelta
from ._models import Thinking as Thinking
from ._models import ThinkingDelta as ThinkingDelta
from ._models import ToolAnnotations as ToolAnnotations
from ._models import ToolDefinition as ToolDefinition
from ._models import ToolResult as ToolResult
from ._models import ToolUse as ToolUse
from ._models import Usage as Usage
from ._models import messages_from_dicts as messages_from_dicts
from ._models import messages_from_json as messages_from_json
from ._models import messages_to_dicts as messages_to_dicts
from ._models import messages_to_json as messages_to_json
from ._secret import Secret as Secret
from ._secret import SecretHeaders as SecretHeaders

if _typing.TYPE_CHECKING:
    from .actors import open_runtime as open_runtime
    from .agent import Agent as Agent
    from .agent import AgentBuilder as AgentBuilder
    from .agent import AgentResponse as AgentResponse
    from .agent import CancelToken as CancelToken
    from .agent import RetryConfig as RetryConfig
    from .tools import Tool as Tool
    from .tools import ToolRegistry as ToolRegistry
    from .tools import tool as tool

__version__ = "0.1.0"

# The agent, the actor runtime and the tool layer load on first use, so `import kova` stays
# as cheap as the data model (`kova.AgentBuilder` imports kova.agent the first time).
_LAZY = {
    "Agent": "kova.agent",
    "AgentBuilder": "kova.agent",
    "AgentResponse": "kova.agent",
    "CancelToken": "kova.agent",
    "RetryConfig": "kova.agent",
    "Tool": "kova.tools",
    "ToolRegistry": "kova.tools",
    "open_runtime": "kova.actors",
    "tool": "kova.tools",
}


# Names that left the top level (docs/changes.md): the error says where they went.
_MOVED = {
    **{
        name: f"kova.providers.{name}"
        for name in (
            "ChatRequest",
            "ErrorEvent",
            "ModelInfo",
            "ModelResponse",
            "StopEvent",
            "StreamEvent",
            "ToolUseDelta",
            "ToolUseEnd",
            "ToolUseStart",
            "UsageEvent",
        )
    },
    "Cancelled": "kova.TurnCancelled",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY, _MOVED)


__all__ = [
    "ActorError",
    "ActorFailed",
    "Agent",
    "AgentBuilder",
    "AgentLoopError",
    "AgentResponse",
    "Audio",
    "BuildError",
    "CancelToken",
    "ConfigError",
    "ContentBlock",
    "ContextBudgetExceededError",
    "ContextOverflow",
    "Document",
    "File",
    "Image",
    "InferenceConfig",
    "InvalidRequest",
    "InvalidResponse",
    "JSONObject",
    "JSONValue",
    "KovaConnectionError",
    "KovaError",
    "KovaIOError",
    "KovaTimeoutError",
    "MailboxClosed",
    "MaxIterationsError",
    "McpCallInterruptedError",
    "McpError",
    "McpUnavailableError",
    "MediaOutput",
    "Message",
    "ModelNotFound",
    "ProviderAuthError",
    "ProviderError",
    "ProviderErrorClass",
    "ProviderOverloaded",
    "RateLimited",
    "RedactedThinking",
    "ResponseFormat",
    "RetryConfig",
    "Role",
    "Secret",
    "SecretHeaders",
    "SerializationError",
    "SignedThinking",
    "StopKind",
    "StopReason",
    "StreamError",
    "StructuredOutputError",
    "Text",
    "TextDelta",
    "Thinking",
    "ThinkingDelta",
    "Tool",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolResult",
    "ToolUse",
    "TurnCancelled",
    "Usage",
    "messages_from_dicts",
    "messages_from_json",
    "messages_to_dicts",
    "messages_to_json",
    "open_runtime",
    "tool",
]
