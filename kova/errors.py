"""Every error kova raises on purpose, in one place: ``from kova.errors import RateLimited``.

The tree (the one copy of it; docs/errors.md says what to catch for what)::

    KovaError
    ├── BuildError                    misconfigured, or used outside its lifecycle (not open yet)
    │   └── ConfigError               a config value out of range, naming it (also a ValueError)
    ├── ProviderError                 the model provider answered with an error (.error_class)
    │   ├── ProviderAuthError         AUTH_INVALID (401), AUTH_FORBIDDEN (403), or no credentials
    │   ├── RateLimited               RATE_LIMITED (429); carries retry_after
    │   ├── ProviderOverloaded        OVERLOADED (408, 5xx, 529)
    │   ├── InvalidRequest            INVALID_REQUEST (400, 413, 422)
    │   │   └── ContextOverflow       the prompt is over the model's context window (any provider)
    │   ├── ModelNotFound             NOT_FOUND (404)
    │   └── InvalidResponse           OTHER: the provider sent something kova cannot read
    ├── KovaConnectionError           refused / reset / dropped (also a builtin ConnectionError)
    │   └── McpUnavailableError       no MCP session is up right now (names the server, since when)
    ├── KovaTimeoutError              connect or read timed out (also a builtin TimeoutError)
    ├── StreamError                   a stream ended in an error event or was cut short
    ├── ToolError                     a kova-side tool fault (tool failures go to the model)
    │   ├── ToolExecutionError
    │   ├── ToolNotFoundError
    │   ├── ToolDefinitionError       @tool cannot describe a function
    │   ├── DuplicateToolError        two tools with one name
    │   └── InvalidToolArguments      arguments do not match a tool's schema
    ├── McpError                      the MCP server reported an error (JSON-RPC) or broke protocol
    │   └── McpCallInterruptedError   the connection died under a tool call that may have run
    ├── WebFetchError                 fetch_text refused (SSRF guard, URL rules) or failed
    ├── AgentLoopError
    │   ├── MaxIterationsError        still calling tools after max_iterations
    │   ├── ContextBudgetExceededError
    │   ├── UsageLimitExceeded        a UsageLimits cap was reached (.limit, .value, .figure)
    │   ├── BudgetExceeded            a shared Budget cannot hold a call (.budget .needed .left)
    │   └── GuardrailTripped          a guard stopped the turn (.guard .reason)
    ├── ApprovalMismatchError         a resume's history or decisions do not fit the paused turn
    ├── StructuredOutputError         the answer did not validate, after every output retry
    ├── TurnCancelled                 a CancelToken cancelled the turn (trio.Cancelled stays itself)
    ├── SerializationError            stored data (history JSON) could not be read (a ValueError)
    ├── SessionError                  a session store cannot be used, or a session cannot do that
    │   └── SessionBusyError          another turn is running on the session (kova.sessions)
    │       └── SessionConflictError  the session changed while the turn ran: nothing appended
    ├── KovaIOError                   a local I/O failure (also a builtin OSError)
    ├── ActorError
    │   ├── ActorFailed               an actor crashed while serving your request (__cause__)
    │   ├── MailboxClosed             the actor is stopped
    │   └── UnknownMessage            an actor was sent a message it does not handle (kova.actors)
    ├── JournalError                  a turn journal cannot be used (kova.durable)
    │   └── TurnClaimedError          another runner holds the turn
    ├── TurnFailedError               a turn run by Temporal failed (.error_type; kova.temporal)
    ├── PayloadTooLargeError          over Temporal's payload limit (kova.temporal)
    └── RemoteAgentError              a remote A2A agent failed or is unreachable (kova.a2a)

Every class in the tree is importable from this module except those that live with their
layer: ``UnknownMessage`` (``kova.actors``), ``JournalError`` and ``TurnClaimedError``
(``kova.durable``), ``TurnFailedError`` and ``PayloadTooLargeError`` (``kova.temporal``, which
needs the ``temporal`` extra), ``RemoteAgentError`` (``kova.a2a``, the ``serve`` extra). The
tool layer's errors are also in ``kova.tools``, most
others also in ``kova`` itself.

Retryability is data: :attr:`KovaError.is_retryable` is true for rate limits, overload,
connection errors and timeouts. Every :class:`ProviderError` carries one
:class:`ProviderErrorClass` value (``.error_class``), the provider-independent kind, and is an
instance of the subclass for that value however it was built
(``ProviderError(..., error_class=RATE_LIMITED)`` is a :class:`RateLimited`), so
``except RateLimited`` and ``error.error_class is ProviderErrorClass.RATE_LIMITED`` agree.

``trio.Cancelled`` is never converted: a caller's cancel scope propagates untouched. Only an
explicit :class:`~kova.agent.CancelToken` raises kova's own :class:`TurnCancelled`.
"""

from ._errors import ActorError as ActorError
from ._errors import ActorFailed as ActorFailed
from ._errors import AgentLoopError as AgentLoopError
from ._errors import ApprovalMismatchError as ApprovalMismatchError
from ._errors import BudgetExceeded as BudgetExceeded
from ._errors import BuildError as BuildError
from ._errors import ConfigError as ConfigError
from ._errors import ContextBudgetExceededError as ContextBudgetExceededError
from ._errors import ContextOverflow as ContextOverflow
from ._errors import GuardrailTripped as GuardrailTripped
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
from ._errors import SessionBusyError as SessionBusyError
from ._errors import SessionConflictError as SessionConflictError
from ._errors import SessionError as SessionError
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
    "BudgetExceeded",
    "BuildError",
    "ConfigError",
    "ContextBudgetExceededError",
    "ContextOverflow",
    "DuplicateToolError",
    "GuardrailTripped",
    "InvalidRequest",
    "InvalidResponse",
    "InvalidToolArguments",
    "KovaConnectionError",
    "KovaError",
    "KovaIOError",
    "KovaTimeoutError",
    "MailboxClosed",
    "MaxIterationsError",
    "McpCallInterruptedError",
    "McpError",
    "McpUnavailableError",
    "ModelNotFound",
    "ProviderAuthError",
    "ProviderError",
    "ProviderErrorClass",
    "ProviderOverloaded",
    "RateLimited",
    "SerializationError",
    "SessionBusyError",
    "SessionConflictError",
    "SessionError",
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
