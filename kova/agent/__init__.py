"""The agent: AgentBuilder, Agent, streamed events, retries, cancellation, and the turn core
(Turn and its steps) with deferred approvals and usage limits, and what calls cost (Prices,
Budget).

Every event class ``agent.stream()`` yields is importable from here (``TextDelta`` and
``ThinkingDelta`` are the provider's own classes, also in :mod:`kova`).
"""

# Loaded on first use (PEP 562): ``import kova.agent._turn`` (the pure turn core, which the
# Temporal workflow imports) must not load the driver, trio and httpx2 with the package.
from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._lazy import lazy_names as _lazy_names

if _TYPE_CHECKING:
    from .._models import TextDelta as TextDelta
    from .._models import ThinkingDelta as ThinkingDelta
    from ._agent import Agent as Agent
    from ._approvals import DEFER as DEFER
    from ._approvals import ApprovalDecision as ApprovalDecision
    from ._approvals import Deferred as Deferred
    from ._approvals import PendingApprovals as PendingApprovals
    from ._approvals import PendingCall as PendingCall
    from ._budget import Budget as Budget
    from ._builder import AgentBuilder as AgentBuilder
    from ._cancel import CancelToken as CancelToken
    from ._config import AgentConfig as AgentConfig
    from ._context import ClearToolResults as ClearToolResults
    from ._context import Compact as Compact
    from ._context import ContextPolicy as ContextPolicy
    from ._context import ProviderCompaction as ProviderCompaction
    from ._context import SlidingWindow as SlidingWindow
    from ._context import Summarize as Summarize
    from ._cost import Prices as Prices
    from ._counters import Counters as Counters
    from ._events import AgentEvent as AgentEvent
    from ._events import AgentResponse as AgentResponse
    from ._events import Compaction as Compaction
    from ._events import ContextCompacted as ContextCompacted
    from ._events import GuardPassed as GuardPassed
    from ._events import GuardTripped as GuardTripped
    from ._events import ToolCallDeferred as ToolCallDeferred
    from ._events import ToolCallDelta as ToolCallDelta
    from ._events import ToolCallFinished as ToolCallFinished
    from ._events import ToolCallStarted as ToolCallStarted
    from ._events import ToolsAdded as ToolsAdded
    from ._events import ToolsFound as ToolsFound
    from ._events import TurnCompleted as TurnCompleted
    from ._guards import Deny as Deny
    from ._guards import InputGuard as InputGuard
    from ._guards import OutputGuard as OutputGuard
    from ._guards import ToolGuard as ToolGuard
    from ._guards import Trip as Trip
    from ._lifecycle import LifecycleHook as LifecycleHook
    from ._lifecycle import LifecycleSubscriber as LifecycleSubscriber
    from ._limits import UsageLimits as UsageLimits
    from ._provider_ref import ProviderRef as ProviderRef
    from ._provider_ref import spawn_provider as spawn_provider
    from ._retry import RetryConfig as RetryConfig
    from ._structured import StructuredStream as StructuredStream
    from ._tool_pool import ApprovalHandler as ApprovalHandler
    from ._turn import AwaitApproval as AwaitApproval
    from ._turn import CallModel as CallModel
    from ._turn import Finished as Finished
    from ._turn import RunTools as RunTools
    from ._turn import Turn as Turn

__all__ = [
    "Agent",
    "AgentBuilder",
    "AgentConfig",
    "AgentEvent",
    "AgentResponse",
    "ApprovalDecision",
    "ApprovalHandler",
    "AwaitApproval",
    "Budget",
    "CallModel",
    "CancelToken",
    "ClearToolResults",
    "Compact",
    "Compaction",
    "ContextCompacted",
    "ContextPolicy",
    "Counters",
    "DEFER",
    "Deferred",
    "Deny",
    "Finished",
    "GuardPassed",
    "GuardTripped",
    "InputGuard",
    "LifecycleHook",
    "LifecycleSubscriber",
    "OutputGuard",
    "PendingApprovals",
    "PendingCall",
    "Prices",
    "ProviderCompaction",
    "ProviderRef",
    "RetryConfig",
    "RunTools",
    "SlidingWindow",
    "StructuredStream",
    "Summarize",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDeferred",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolGuard",
    "ToolsAdded",
    "ToolsFound",
    "Trip",
    "Turn",
    "TurnCompleted",
    "UsageLimits",
    "spawn_provider",
]

_WHERE: dict[str, str] = {
    "Agent": "._agent",
    "AgentBuilder": "._builder",
    "AgentConfig": "._config",
    "AgentEvent": "._events",
    "AgentResponse": "._events",
    "ApprovalDecision": "._approvals",
    "ApprovalHandler": "._tool_pool",
    "AwaitApproval": "._turn",
    "Budget": "._budget",
    "CallModel": "._turn",
    "CancelToken": "._cancel",
    "Counters": "._counters",
    "ClearToolResults": "._context",
    "Compact": "._context",
    "Compaction": "._events",
    "ProviderCompaction": "._context",
    "ContextCompacted": "._events",
    "ContextPolicy": "._context",
    "DEFER": "._approvals",
    "Deferred": "._approvals",
    "Deny": "._guards",
    "Finished": "._turn",
    "GuardPassed": "._events",
    "GuardTripped": "._events",
    "InputGuard": "._guards",
    "LifecycleHook": "._lifecycle",
    "LifecycleSubscriber": "._lifecycle",
    "OutputGuard": "._guards",
    "PendingApprovals": "._approvals",
    "PendingCall": "._approvals",
    "Prices": "._cost",
    "ProviderRef": "._provider_ref",
    "RetryConfig": "._retry",
    "RunTools": "._turn",
    "SlidingWindow": "._context",
    "StructuredStream": "._structured",
    "Summarize": "._context",
    "TextDelta": ".._models",
    "ThinkingDelta": ".._models",
    "ToolCallDeferred": "._events",
    "ToolCallDelta": "._events",
    "ToolCallFinished": "._events",
    "ToolCallStarted": "._events",
    "ToolGuard": "._guards",
    "ToolsAdded": "._events",
    "ToolsFound": "._events",
    "Trip": "._guards",
    "Turn": "._turn",
    "TurnCompleted": "._events",
    "UsageLimits": "._limits",
    "spawn_provider": "._provider_ref",
}
"""Where each exported name lives."""


__getattr__, __dir__ = _lazy_names(__name__, _WHERE)
