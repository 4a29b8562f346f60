"""What every driver of an open agent's turns uses: :class:`DriverContext`.

An agent builds one when its ``async with`` block starts and drops it when the block ends.
The in-process loop, the journal, agents used as tools, the asyncio bridge and the Temporal
worker all reach the agent through it (:func:`~kova.agent._agent.driver_context`), never
through the agent's private names: the provider reference (with the agent's retry policy),
the tool runner, the telemetry emitter of a new turn, the approval policy, the
inference settings, and the turn cores it starts or resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._models import Message
from ._budget import Meter
from ._cost import Pricer
from ._limits import UsageLimits
from ._signing import Decisions, Signer
from ._tool_pool import Approver, ToolRunner
from ._tool_search import ToolSearch
from ._turn import Turn, new_turn_id

if TYPE_CHECKING:
    from .._models import InferenceConfig
    from .._observe import Deliver, TelemetryHub, TurnEmitter
    from ._approvals import PendingApprovals
    from ._config import AgentConfig
    from ._context import ContextPolicy
    from ._provider_ref import ProviderRef

__all__ = ["DriverContext", "check_limits"]


def check_limits(limits: object) -> None:
    """Raises ``TypeError`` unless ``limits`` is a :class:`UsageLimits` or ``None``."""
    if limits is not None and not isinstance(limits, UsageLimits):
        raise TypeError(f"limits must be a kova.agent.UsageLimits, got {type(limits).__name__}")


class DriverContext:
    """One open agent as its drivers see it (built once per ``async with agent``).

    Its state changes only between checkpoints (the last turn's input tokens), so every task
    of the agent shares it.
    """

    __slots__ = (
        "_merged",
        "approver",
        "config",
        "decisions",
        "last_input_tokens",
        "meter",
        "model",
        "name",
        "prefix",
        "provider",
        "runner",
        "signer",
        "subscribers",
        "telemetry",
    )

    def __init__(self, config: AgentConfig, telemetry: TelemetryHub, model: str | None) -> None:
        self.config = config
        self.name = config.name
        """The agent's name."""
        self.provider: ProviderRef
        """The agent's provider, with its retry policy (set by :meth:`opened`)."""
        self.runner: ToolRunner
        """Runs the tool steps of every turn of the agent (one capacity limit for all)."""
        self.approver: Approver
        """The agent's own approval policy (inactive when it has neither a handler nor a
        defer predicate)."""
        self.telemetry = telemetry
        # The metrics collector and a lifecycle hook are subscribers of this agent's turns
        # only (a shared hub may serve other agents, with collectors of their own).
        subscribers: tuple[Deliver, ...] = ()
        if config.metrics is not None:
            from ..telemetry import MetricsSubscriber

            subscribers = (MetricsSubscriber(config.metrics).on_event,)
        if config.lifecycle is not None:
            from ._lifecycle import LifecycleSubscriber

            subscribers = (*subscribers, LifecycleSubscriber(config.lifecycle).on_event)
        self.subscribers = subscribers
        """The subscribers of this agent's turns only, besides the hub's (for its emitter)."""
        self.model = model
        """The model the provider sends when the request names none (for telemetry)."""
        self.prefix = (Message.system(config.system_prompt),) if config.system_prompt else ()
        """The system message every turn starts with (empty without a system prompt)."""
        self.signer = Signer(config.approval_keys)
        """Signs the pending approvals of the agent's paused turns, and checks them."""
        self.decisions = Decisions()
        """The decided pauses this agent has resumed (each runs once)."""
        self.meter = Meter(Pricer(config.prices, config.provider), config.budget, config.provider)
        """Prices each model call, and reserves it against the agent's budget."""
        self.last_input_tokens: int | None = None
        """Input tokens of the last model call of the latest finished turn."""
        # The last per-call overrides and the config they make: a caller passing the same
        # InferenceConfig object turn after turn (the usual case) merges it once.
        self._merged: tuple[InferenceConfig | None, InferenceConfig] = (None, config.inference)

    def opened(self, provider: ProviderRef) -> None:
        """The agent's ``async with`` opened ``provider``: retries are decided with the
        agent's policy (a turn that is observed carries its event stream, where the
        provider's admission reports each retry), and a tool runner of its own."""
        config = self.config
        self.provider = provider.with_retry(config.retry)
        self.approver = Approver(config.approval, config.defer)
        self.runner = ToolRunner(config.registry, self.approver, config.max_concurrent_tools)

    def emitter(self) -> TurnEmitter | None:
        """The telemetry emitter of a new turn (``None`` when nobody listens)."""
        return self.telemetry.emitter(self.subscribers)

    def inference(self, overrides: InferenceConfig | None) -> InferenceConfig:
        """The agent's inference config with ``overrides`` merged in (cached for the last
        overrides object: configs are frozen)."""
        last, merged = self._merged
        if overrides is last:
            return merged
        merged = self.config.inference.merged(overrides)
        self._merged = (overrides, merged)
        return merged

    def start_turn(
        self,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        turn_id: str | None = None,
        context: ContextPolicy | None = None,
    ) -> Turn:
        """A new turn core for ``history`` (already checked), with the agent's tools,
        prompt, limits and context policy (``limits`` and ``context`` replace the agent's)."""
        config = self.config
        if limits is None:
            limits = config.usage_limits
        else:
            check_limits(limits)
        upfront, deferred = config.registry.split_definitions()
        turn = Turn(
            history,
            prefix=self.prefix,
            tools=upfront,
            config=self.inference(overrides),
            system_prompt=config.system_prompt,
            limits=limits,
            max_iterations=config.max_iterations,
            context_budget=config.context_budget,
            turn_id=turn_id or new_turn_id(),
            agent=config.name,
            search=ToolSearch(
                deferred, limit=config.tool_search_limit, native=config.tool_search_native
            )
            if deferred
            else None,
        )
        if context is not None or config.context is not None:
            self.use_context(turn, context, overrides)
        return turn

    def resume_turn(
        self,
        history: tuple[Message, ...],
        pending: PendingApprovals,
        overrides: InferenceConfig | None,
        context: ContextPolicy | None = None,
        limits: UsageLimits | None = None,
    ) -> Turn:
        """The turn core of a paused turn, with ``pending``'s decisions (checked here), under
        ``limits`` (default: the agent's)."""
        config = self.config
        if limits is None:
            limits = config.usage_limits
        else:
            check_limits(limits)
        turn = Turn.resume(
            history,
            pending,
            tools=config.registry.definitions(),
            config=self.inference(overrides),
            system_prompt=config.system_prompt,
            limits=limits,
            max_iterations=config.max_iterations,
            context_budget=config.context_budget,
            agent=config.name,
        )
        self.use_context(turn, context, overrides)
        return turn

    def use_context(
        self, turn: Turn, context: ContextPolicy | None, overrides: InferenceConfig | None
    ) -> None:
        """Give ``turn`` the call's context policy, else the agent's."""
        policy = context if context is not None else self.config.context
        if policy is not None:
            model = (overrides.model if overrides is not None else None) or self.model
            turn.set_context(policy, model=model, provider=self.provider.name)
