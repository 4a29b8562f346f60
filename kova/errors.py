"""Every error kova raises on purpose, in one place: ``from kova.errors import RateLimited``.

The tree (see docs/errors.md for what to catch for what)::

    KovaError
    ├── BuildError                    invalid configuration (raised at build time only)
    ├── ProviderError                 the model provider answered with an error (.error_class)
    │   ├── ProviderAuthError         AUTH_INVALID (401), AUTH_FORBIDDEN (403), no credentials
    │   ├── RateLimited               RATE_LIMITED (429; carries ``retry_after``)
    │   ├── ProviderOverloaded        OVERLOADED (408, 5xx, 529)
    │   ├── InvalidRequest            INVALID_REQUEST (400, 413, 422; "context too long")
    │   ├── ModelNotFound             NOT_FOUND (404)
    │   └── InvalidResponse           OTHER: the provider sent something kova cannot read
    ├── KovaConnectionError           refused / reset / dropped (also a builtin ConnectionError)
    ├── KovaTimeoutError              connect or read timed out (also a builtin TimeoutError)
    ├── StreamError                   a stream ended in an error event or was cut short
    ├── ToolError                     a kova-side tool fault (tool failures go to the model)
    │   ├── ToolExecutionError
    │   ├── ToolNotFoundError
    │   ├── ToolDefinitionError       ``@tool`` cannot describe a function
    │   ├── DuplicateToolError        two tools of one name
    │   └── InvalidToolArguments      arguments do not match the tool's schema
    ├── McpError                      the MCP server reported an error or broke protocol
    ├── WebFetchError                 fetch_text refused (SSRF guard, URL rules) or failed
    ├── AgentLoopError
    │   ├── MaxIterationsError
    │   ├── ContextBudgetExceededError
    │   └── UsageLimitExceeded        a usage limit (requests, tool calls, tokens) was reached
    ├── ApprovalMismatchError         a resume's decisions do not fit the paused turn
    ├── StructuredOutputError         the final answer did not validate (every raw attempt)
    ├── TurnCancelled                 a CancelToken cancelled the turn (alias: Cancelled)
    ├── SerializationError            stored data (history, JSON) could not be read
    ├── KovaIOError                   a local I/O failure (also a builtin OSError)
    └── ActorError
        ├── ActorFailed               an actor crashed while serving a request
        └── MailboxClosed             the actor is gone

:class:`ProviderErrorClass` is the provider-independent kind of a :class:`ProviderError`.
"""

from ._errors import ActorError as ActorError
from ._errors import ActorFailed as ActorFailed
from ._errors import AgentLoopError as AgentLoopError
from ._errors import ApprovalMismatchError as ApprovalMismatchError
from ._errors import BuildError as BuildError
from ._errors import Cancelled as Cancelled
from ._errors import ContextBudgetExceededError as ContextBudgetExceededError
from ._errors import InvalidRequest as InvalidRequest
from ._errors import InvalidResponse as InvalidResponse
from ._errors import KovaConnectionError as KovaConnectionError
from ._errors import KovaError as KovaError
from ._errors import KovaIOError as KovaIOError
from ._errors import KovaTimeoutError as KovaTimeoutError
from ._errors import MailboxClosed as MailboxClosed
from ._errors import MaxIterationsError as MaxIterationsError
from ._errors import McpError as McpError
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
from ._errors import UsageLimitExceeded as UsageLimitExceeded
from .tools._errors import DuplicateToolError as DuplicateToolError
from .tools._errors import InvalidToolArguments as InvalidToolArguments
from .tools._errors import ToolDefinitionError as ToolDefinitionError
from .tools._errors import WebFetchError as WebFetchError

__all__ = [
    "ActorError",
    "ActorFailed",
    "AgentLoopError",
    "ApprovalMismatchError",
    "BuildError",
    "Cancelled",
    "ContextBudgetExceededError",
    "DuplicateToolError",
    "InvalidRequest",
    "InvalidResponse",
    "InvalidToolArguments",
    "KovaConnectionError",
    "KovaError",
    "KovaIOError",
    "KovaTimeoutError",
    "MailboxClosed",
    "MaxIterationsError",
    "McpError",
    "ModelNotFound",
    "ProviderAuthError",
    "ProviderError",
    "ProviderErrorClass",
    "ProviderOverloaded",
    "RateLimited",
    "SerializationError",
    "StreamError",
    "StructuredOutputError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "TurnCancelled",
    "UsageLimitExceeded",
    "WebFetchError",
]
