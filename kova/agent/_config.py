"""The agent's configuration: :class:`AgentConfig`, checked as it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import BuildError
from .._models import InferenceConfig
from .._record import Record, set_field
from ._context import ContextPolicy
from ._guards import check_guards
from ._retry import RetryConfig
from ._seal import approval_keys as approval_key_tuple

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._observe import TelemetryHub
    from .._secret import Secret
    from ..actors import Runtime
    from ..providers import Provider
    from ..telemetry import MetricsCollector
    from ..tools import ToolRegistry
    from ._budget import Budget
    from ._cost import Prices
    from ._guards import Guard
    from ._lifecycle import LifecycleHook
    from ._limits import UsageLimits
    from ._tool_pool import ApprovalFunction, ApprovalHandler, DeferPredicate

__all__ = ["DEFAULT_NAME", "AgentConfig", "usage_key"]

DEFAULT_NAME = "kova"
"""The name of an agent not given one (``AgentBuilder.name``). Used as another agent's tool
(``as_tool``), such an agent counts in ``usage_by_agent`` under the tool's name."""


def usage_key(name: str, tool: str | None) -> str:
    """The key of agent ``name`` in ``usage_by_agent`` when it runs as the tool ``tool``
    (``None``: the outer agent): its name, or the tool's if it was left unnamed."""
    return tool if tool is not None and name == DEFAULT_NAME else name


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuildError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise BuildError(f"{name} must be at least 1, got {value}")
    return value


def _not_negative(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuildError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise BuildError(f"{name} must be at least 0, got {value}")
    return value


class AgentConfig(Record):
    """Everything an :class:`Agent` is configured with. :class:`AgentBuilder` fills one in;
    it can also be built directly."""

    provider: Provider
    registry: ToolRegistry
    system_prompt: str | None
    inference: InferenceConfig
    context_budget: int | None
    """Maximum prompt tokens per call, by the heuristic estimate."""
    max_iterations: int
    max_concurrent_tools: int
    retry: RetryConfig
    metrics: MetricsCollector | None
    approval: ApprovalHandler | ApprovalFunction | None
    lifecycle: LifecycleHook | None
    runtime: Runtime | None
    """A runtime the application already runs; without one the agent opens its own."""
    provider_max_in_flight: int | None
    output_retries: int
    """How many times ``run_structured`` re-asks the model after an invalid answer."""
    telemetry: TelemetryHub | None
    """Where the agent's turns report their events; by default a hub of its own."""
    name: str
    """The agent's name in telemetry (``invoke_agent {name}``)."""
    usage_limits: UsageLimits | None
    """Usage limits of every turn (``run(..., limits=...)`` replaces them for one)."""
    defer: DeferPredicate | None
    """Picks the tool calls whose approval is deferred to a person (``defer_approvals``)."""
    tool_search_limit: int
    """How many deferred tools one ``search_tools`` call loads when the model does not say
    (``AgentBuilder.tool_search``; docs/tools.md, "Many tools")."""
    tool_search_native: bool
    """The provider searches the deferred tools itself (``AgentBuilder.tool_search(
    provider_native=True)``: Anthropic, OpenAI Responses) instead of kova's ``search_tools``."""
    prices: Prices | None
    """The caller's own prices, before the ``genai-prices`` sheet (docs/cost.md)."""
    budget: Budget | None
    """A budget in money the agent's model calls reserve and spend (shared with others)."""
    context: ContextPolicy | None
    """What a turn does when a request would overflow the model's context window
    (``AgentBuilder.context``; docs/context.md)."""
    guards: tuple[Guard, ...]
    """Input, output and tool guards every turn runs (``AgentBuilder.guards``;
    docs/guardrails.md)."""
    approval_keys: tuple[Secret, ...]
    """The keys that sign a paused turn's pending approvals (the first signs, every one
    verifies; ``approval_key``). None: ``KOVA_APPROVAL_KEY``, else this process only."""

    def __init__(
        self,
        *,
        provider: Provider,
        registry: ToolRegistry,
        system_prompt: str | None = None,
        inference: InferenceConfig | None = None,
        context_budget: int | None = None,
        max_iterations: int = 10,
        max_concurrent_tools: int = 10,
        retry: RetryConfig | None = None,
        metrics: MetricsCollector | None = None,
        approval: ApprovalHandler | ApprovalFunction | None = None,
        lifecycle: LifecycleHook | None = None,
        runtime: Runtime | None = None,
        provider_max_in_flight: int | None = None,
        output_retries: int = 1,
        telemetry: TelemetryHub | None = None,
        name: str = DEFAULT_NAME,
        usage_limits: UsageLimits | None = None,
        defer: DeferPredicate | None = None,
        tool_search_limit: int = 5,
        tool_search_native: bool = False,
        prices: Prices | None = None,
        budget: Budget | None = None,
        context: ContextPolicy | None = None,
        guards: Sequence[Guard] = (),
        approval_keys: tuple[Secret, ...] = (),
    ) -> None:
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise BuildError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
        if inference is not None and not isinstance(inference, InferenceConfig):
            raise BuildError(
                f"inference must be a kova.InferenceConfig, got {type(inference).__name__}"
            )
        if retry is not None and not isinstance(retry, RetryConfig):
            raise BuildError(f"retry must be a kova.agent.RetryConfig, got {type(retry).__name__}")
        set_field(self, "provider", provider)
        set_field(self, "registry", registry)
        set_field(self, "system_prompt", system_prompt)
        set_field(self, "inference", InferenceConfig() if inference is None else inference)
        set_field(self, "context_budget", context_budget)
        set_field(self, "max_iterations", _positive("max_iterations", max_iterations))
        set_field(
            self, "max_concurrent_tools", _positive("max_concurrent_tools", max_concurrent_tools)
        )
        set_field(self, "retry", RetryConfig() if retry is None else retry)
        set_field(self, "metrics", metrics)
        set_field(self, "approval", approval)
        set_field(self, "lifecycle", lifecycle)
        set_field(self, "runtime", runtime)
        set_field(self, "provider_max_in_flight", provider_max_in_flight)
        set_field(self, "output_retries", _not_negative("output_retries", output_retries))
        set_field(self, "telemetry", telemetry)
        set_field(self, "name", name)
        set_field(self, "usage_limits", usage_limits)
        set_field(self, "defer", defer)
        set_field(self, "tool_search_limit", _positive("tool_search_limit", tool_search_limit))
        if not isinstance(tool_search_native, bool):
            raise TypeError(f"tool_search_native must be a bool, got {tool_search_native!r}")
        set_field(self, "tool_search_native", tool_search_native)
        if prices is not None or budget is not None:
            from ._budget import Budget
            from ._cost import Prices

            if prices is not None and not isinstance(prices, Prices):
                raise BuildError(f"prices must be a kova.agent.Prices, got {type(prices).__name__}")
            if budget is not None and not isinstance(budget, Budget):
                raise BuildError(f"budget must be a kova.agent.Budget, got {type(budget).__name__}")
        set_field(self, "prices", prices)
        set_field(self, "budget", budget)
        if context is not None and not isinstance(context, ContextPolicy):
            raise BuildError(
                f"context must be a kova.agent.ContextPolicy, got {type(context).__name__}"
            )
        set_field(self, "context", context)
        set_field(self, "guards", check_guards(guards))
        set_field(self, "approval_keys", approval_keys and approval_key_tuple(approval_keys))
