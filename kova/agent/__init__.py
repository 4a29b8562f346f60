"""The agent: AgentBuilder, Agent, streamed events, retries, cancellation.

Every event class ``agent.stream()`` yields is importable from here (``TextDelta`` and
``ThinkingDelta`` are the provider's own classes, also in :mod:`kova`).
"""

from .._models import TextDelta as TextDelta
from .._models import ThinkingDelta as ThinkingDelta
from ._agent import Agent as Agent
from ._builder import AgentBuilder as AgentBuilder
from ._cancel import CancelToken as CancelToken
from ._config import AgentConfig as AgentConfig
from ._events import AgentEvent as AgentEvent
from ._events import AgentResponse as AgentResponse
from ._events import ToolCallFinished as ToolCallFinished
from ._events import ToolCallStarted as ToolCallStarted
from ._events import TurnCompleted as TurnCompleted
from ._provider_ref import ProviderRef as ProviderRef
from ._provider_ref import spawn_provider as spawn_provider
from ._retry import RetryConfig as RetryConfig
from ._structured import StructuredStream as StructuredStream
from ._tool_pool import ApprovalHandler as ApprovalHandler
from ._tool_pool import LifecycleHook as LifecycleHook

__all__ = [
    "Agent",
    "AgentBuilder",
    "AgentConfig",
    "AgentEvent",
    "AgentResponse",
    "ApprovalHandler",
    "CancelToken",
    "LifecycleHook",
    "ProviderRef",
    "RetryConfig",
    "StructuredStream",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnCompleted",
    "spawn_provider",
]
