"""AgentBuilder: the seed's fluent builder, a thin layer over :class:`AgentConfig`.

Every configuration error surfaces from :meth:`AgentBuilder.build` (or from the option that
received it) as :class:`~kova.BuildError`, never later at run time.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from .._errors import BuildError
from .._models import InferenceConfig
from .._observe import TelemetryHub
from ..providers import Provider
from ._agent import Agent
from ._config import DEFAULT_NAME, AgentConfig
from ._context import ContextPolicy
from ._guards import check_guards
from ._lifecycle import LifecycleHook
from ._limits import UsageLimits
from ._retry import RetryConfig
from ._tool_pool import ApprovalHandler
from ._tool_search import NATIVE_TOOL_SEARCH, SEARCH_TOOLS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from decimal import Decimal
    from typing import Self

    from .._secret import Secret
    from ..actors import Runtime
    from ..mcp import McpClient, McpTool, ToolFilter
    from ..telemetry import MetricsCollector
    from ..tools import Tool, ToolRegistry
    from ._budget import Budget
    from ._context import ContextStrategy
    from ._cost import Prices
    from ._guards import Guard
    from ._tool_pool import ApprovalFunction, DeferPredicate

__all__ = ["AgentBuilder"]


def _count(option: str, value: object, *, optional: bool = False) -> None:
    """A whole number (``bool`` is not one), or ``None`` where the option allows it."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise BuildError(f"{option} must be an int, got {value!r}")


def _instance(option: str, value: object, kind: type, spelled: str) -> None:
    if not isinstance(value, kind):
        raise BuildError(f"{option} needs a {spelled}, got {type(value).__name__}")


def _check_takes_a_call(what: str, function: Callable[..., object]) -> None:
    """Raise ``BuildError`` unless ``function`` can be called as kova calls it: with the call,
    or the call and the tool's annotations (and ``path=`` when it names that keyword). Before
    this check, ``approval_handler(lambda: True)`` built, and every call was then denied
    in-band with a ``TypeError`` about positional arguments."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to check
        return
    keywords = {"path": ()} if "path" in signature.parameters else {}
    for arguments in ((None,), (None, None)):
        try:
            signature.bind(*arguments, **keywords)
        except TypeError:
            continue
        return
    raise BuildError(
        f"the {what} must take the tool call, or the call and the tool's annotations "
        f"(f(call) or f(call, annotations)); {getattr(function, '__qualname__', function)!r} "
        f"takes {signature}"
    )


class AgentBuilder:
    """Configure an :class:`Agent`::

        agent = (
            AgentBuilder()
            .provider(provider)
            .system_prompt("You are terse.")
            .tool(get_weather)
            .max_iterations(5)
            .build()
        )
        async with agent:
            response = await agent.run(history)

    Each option returns the builder. A value of the wrong type is a :class:`~kova.BuildError`
    from the option that received it; ``build()`` validates the rest and raises
    :class:`~kova.BuildError` on the first problem. Nothing reaches an actor unchecked.
    """

    def __init__(self) -> None:
        self._provider: Provider | None = None
        self._system_prompt: str | None = None
        self._inference = InferenceConfig()
        self._tools: list[Tool] = []
        self._registry: ToolRegistry | None = None
        self._context_budget: int | None = None
        self._max_iterations = 10
        self._max_concurrent_tools = 10
        self._retry = RetryConfig()
        self._metrics: MetricsCollector | None = None
        self._approval: ApprovalHandler | ApprovalFunction | None = None
        self._lifecycle: LifecycleHook | None = None
        self._runtime: Runtime | None = None
        self._max_in_flight: int | None = None
        self._output_retries = 1
        self._mcp_bindings: list[
            tuple[McpClient, str, list[McpTool], ToolFilter | None, ToolFilter | None, bool]
        ] = []
        self._telemetry: TelemetryHub | None = None
        self._name = DEFAULT_NAME
        self._usage_limits: UsageLimits | None = None
        self._approval_keys: tuple[Secret, ...] = ()
        self._defer: DeferPredicate | None = None
        self._tool_search_limit = 5
        self._tool_search_native = False
        self._prices: Prices | None = None
        self._budget: Budget | None = None
        self._context: ContextPolicy | None = None
        self._guards: list[Guard] = []

    def provider(self, provider: Provider, *, max_in_flight: int | None = None) -> Self:
        """The model provider (required): a provider, or a ``ProviderRef`` already running on
        a shared runtime (agents given the same ref share its actor and connection pool).

        Args:
            max_in_flight: cap on concurrent requests to this provider (``None``: no cap).
        """
        _count("max_in_flight", max_in_flight, optional=True)
        self._provider = provider
        self._max_in_flight = max_in_flight
        return self

    def system_prompt(self, prompt: str) -> Self:
        """Prepended to every conversation as a system message (``None``: none)."""
        if prompt is not None and not isinstance(prompt, str):
            raise BuildError(f"system_prompt needs a str, got {type(prompt).__name__}")
        self._system_prompt = prompt
        return self

    def inference_config(self, config: InferenceConfig) -> Self:
        """Model, max_tokens, temperature, ... for every call (per-call overrides merge in)."""
        _instance("inference_config", config, InferenceConfig, "kova.InferenceConfig")
        self._inference = config
        return self

    def tool(self, tool: Tool) -> Self:
        """Add a tool (repeatable; merged with :meth:`tool_registry`)."""
        self._tools.append(tool)
        return self

    def tools(self, *tools: Tool) -> Self:
        """Add several tools."""
        self._tools.extend(tools)
        return self

    def tool_registry(self, registry: ToolRegistry) -> Self:
        """Use this registry; tools added with :meth:`tool` are registered into it at build
        time. The agent sees tools registered into it (or any clone of it) later, too."""
        from ..tools import ToolRegistry

        if not isinstance(registry, ToolRegistry):
            raise BuildError(
                f"tool_registry needs a kova.tools.ToolRegistry, got {type(registry).__name__}"
            )
        self._registry = registry
        return self

    async def mcp_client(
        self,
        client: object,
        prefix: str,
        *,
        include: ToolFilter | None = None,
        exclude: ToolFilter | None = None,
        defer: bool = False,
    ) -> Self:
        """Discover an MCP server's tools now and add them under ``prefix`` (so names from
        several servers never collide). At run time they behave like native tools, and the
        agent follows the server's ``tools/list_changed`` between steps.

        Args:
            client: a connected :class:`kova.mcp.McpClient`.
            prefix: the server's prefix: tools are named ``{prefix}__{tool}``.
            include: only these tools: the server's names, or a predicate over the
                :class:`~kova.ToolDefinition` (annotations included).
            exclude: not these tools, e.g. ``exclude=["get-env"]``.
            defer: don't send the server's tools to the model up front: it finds them
                with ``search_tools`` (docs/tools.md, "Many tools").

        Raises:
            BuildError: not an McpClient, an invalid prefix, or a name in
                ``include``/``exclude`` the server does not have.
            McpError, KovaConnectionError: discovery failed.
        """
        from ..mcp import McpClient, mcp_tools
        from ..mcp._tool import check_prefix

        if not isinstance(client, McpClient):
            raise BuildError(f"mcp_client() needs a kova.mcp.McpClient, got {client!r}")
        if not isinstance(defer, bool):
            raise BuildError(f"mcp_client({prefix!r}): defer must be a bool, got {defer!r}")
        try:
            check_prefix(prefix)
            tools = await mcp_tools(client, prefix, include=include, exclude=exclude, defer=defer)
        except ValueError as exc:
            raise BuildError(f"mcp_client({prefix!r}): {exc}") from exc
        self._tools.extend(tools)
        self._mcp_bindings.append((client, prefix, tools, include, exclude, defer))
        return self

    def context(
        self, *strategies: ContextStrategy, window: int | None = None, reserve: int | None = None
    ) -> Self:
        """What a turn does when its next request would overflow the model's context window:
        ``strategies`` (:class:`~kova.agent.ClearToolResults`,
        :class:`~kova.agent.SlidingWindow`, :class:`~kova.agent.Summarize`) are tried in
        order until it fits; a :class:`~kova.agent.ProviderCompaction` asks the provider's
        own server-side context management where it has one (docs/context.md). Builds a
        :class:`~kova.agent.ContextPolicy`.

        Args:
            window: the model's context size in tokens (known models are looked up).
            reserve: tokens kept for the answer (default: ``max_tokens``, else a tenth of
                the window).

        Raises:
            BuildError: a strategy of another type, or a bad window or reserve.
        """
        self._context = ContextPolicy(*strategies, window=window, reserve=reserve)
        return self

    def guards(self, *guards: Guard) -> Self:
        """Guards every turn runs (docs/guardrails.md): :class:`~kova.agent.InputGuard` (beside
        the first model call, or before it if ``blocking``), :class:`~kova.agent.OutputGuard`
        (on the answer as it streams and when complete), :class:`~kova.agent.ToolGuard`
        (before each tool call). Repeatable: the guards add up.

        Raises:
            BuildError: something that is not one of the three.
        """
        self._guards.extend(check_guards(guards))
        return self

    def tool_search(self, *, provider_native: bool = False, limit: int = 5) -> Self:
        """Tune ``search_tools``, the tool the model finds deferred tools with (any deferred
        tool turns it on: ``@tool(defer=True)``, ``mcp_client(..., defer=True)``).

        Args:
            provider_native: let the provider search instead of kova: the deferred tools
                go with every request marked ``defer_loading``, beside Anthropic's tool
                search tool (BM25) or OpenAI Responses' ``tool_search``, and the model loads
                what it finds within its own answer. Only those two providers have it;
                another is a :class:`~kova.BuildError` at :meth:`build`.
            limit: how many tools one search loads when the model does not say (1-50;
                kova's search only).

        Raises:
            BuildError: ``limit`` out of range, or ``provider_native`` not a bool.
        """
        if not isinstance(provider_native, bool):
            raise BuildError(
                f"tool_search(provider_native=...) must be a bool, got {provider_native!r}"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
            raise BuildError(f"tool_search(limit=...) must be an int from 1 to 50, got {limit!r}")
        self._tool_search_limit = limit
        self._tool_search_native = provider_native
        return self

    def context_budget(self, max_prompt_tokens: int) -> Self:
        """Refuse (before sending) any call whose prompt is estimated over this many tokens."""
        _count("context_budget", max_prompt_tokens)
        self._context_budget = max_prompt_tokens
        return self

    def max_iterations(self, iterations: int) -> Self:
        """Tool-loop iterations per turn (default 10): at most ``iterations + 1`` calls."""
        _count("max_iterations", iterations)
        self._max_iterations = iterations
        return self

    def max_concurrent_tools(self, limit: int) -> Self:
        """Tool calls of one step that may run at once (default 10)."""
        _count("max_concurrent_tools", limit)
        self._max_concurrent_tools = limit
        return self

    def output_retries(self, retries: int) -> Self:
        """How many times ``run_structured`` re-asks the model, with the validation error,
        after an answer that does not parse or validate (default 1; 0 gives up at once)."""
        self._output_retries = retries
        return self

    def retry_config(self, retry: RetryConfig) -> Self:
        """Retries of failed provider calls (default: 2 retries, exponential backoff)."""
        _instance("retry_config", retry, RetryConfig, "kova.agent.RetryConfig")
        self._retry = retry
        return self

    def metrics(self, collector: MetricsCollector) -> Self:
        """Record LLM latency, tokens and errors and tool outcomes into ``collector``."""
        from ..telemetry import MetricsCollector

        if not isinstance(collector, MetricsCollector):
            raise BuildError(
                "metrics needs a kova.telemetry.MetricsCollector (from open_metrics()), got "
                f"{type(collector).__name__}"
            )
        self._metrics = collector
        return self

    def telemetry(self, hub: TelemetryHub) -> Self:
        """Report this agent's turns to ``hub`` (share one between agents; by default each
        agent has its own, ``agent.telemetry``)."""
        if not isinstance(hub, TelemetryHub):
            raise BuildError(f"telemetry needs a kova.telemetry.TelemetryHub, got {hub!r}")
        self._telemetry = hub
        return self

    def name(self, name: str) -> Self:
        """The agent's name in telemetry (``invoke_agent {name}``; default ``kova``) and in
        ``usage_by_agent``; unique among the agents of a tree (``as_tool``). An agent left
        with the default name counts there under the name of the tool it is given as."""
        if not isinstance(name, str) or not name:
            raise BuildError(f"the agent's name must be a non-empty string, got {name!r}")
        self._name = name
        return self

    def approval_handler(self, handler: ApprovalHandler | ApprovalFunction) -> Self:
        """Gate every tool call: an :class:`ApprovalHandler` or a function of the call (sync
        or async) returning True (run), False or a reason string (deny: the model is told).
        A handler that raises denies the call, and the error result names the exception."""
        self._approval = handler
        return self

    with_approval_handler = approval_handler

    def defer_approvals(self, predicate: DeferPredicate | None = None) -> Self:
        """Leave the calls ``predicate`` picks to a person's decision, without a handler: the
        turn runs the step's other calls, then ends with ``response.pending``; continue it
        with ``agent.resume(history, pending)`` once decided, in this process or another.

        Args:
            predicate: a function of the call (and, with a second parameter, the tool's
                :class:`~kova.ToolAnnotations`), sync or async, true for calls to defer.
                Default: every tool not annotated read-only. Calls it does not pick go to the
                approval handler, if any (which may itself return ``DEFER``).
        """
        from ._tool_pool import defer_unless_read_only

        self._defer = defer_unless_read_only if predicate is None else predicate
        return self

    def approval_key(self, key: Secret | Sequence[Secret]) -> Self:
        """The key that signs this agent's pending approvals (``response.pending``), so that
        ``pending.to_json()`` can leave the process and ``agent.resume`` refuses it changed
        (``ApprovalMismatchError``). A list of keys rotates them: the first signs, every one
        verifies. Without one, the agent reads ``KOVA_APPROVAL_KEY``; without that, a
        pending value resumes only in the process that made it. See ``docs/approvals.md``.

        Args:
            key: a :class:`kova.Secret` of at least 16 characters (32 random bytes,
                hex-encoded, say), or a list of them.

        Raises:
            BuildError: not Secrets, an empty list, or a key too short.
        """
        from ._seal import approval_keys

        self._approval_keys = approval_keys(key)
        return self

    def usage_limits(
        self,
        limits: UsageLimits | None = None,
        *,
        requests: int | None = None,
        tool_calls: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
        count_tokens_before_request: bool = False,
        cost: Decimal | None = None,
    ) -> Self:
        """Usage limits for every turn: a :class:`UsageLimits`, or its fields as keywords
        (``.usage_limits(requests=5, total_tokens=20_000)``). ``run(..., limits=...)``
        replaces them for one turn.
        """
        if limits is None:
            try:
                limits = UsageLimits(
                    requests=requests,
                    tool_calls=tool_calls,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    total_tokens=total_tokens,
                    count_tokens_before_request=count_tokens_before_request,
                    cost=cost,
                )
            except (TypeError, ValueError) as exc:
                raise BuildError(str(exc)) from exc
        elif not isinstance(limits, UsageLimits):
            raise BuildError(f"usage_limits needs a kova.agent.UsageLimits, got {limits!r}")
        elif (
            any(
                value is not None
                for value in (requests, tool_calls, input_tokens, output_tokens, total_tokens, cost)
            )
            or count_tokens_before_request
        ):
            raise BuildError("usage_limits takes a UsageLimits or keywords, not both")
        self._usage_limits = limits
        return self

    def prices(self, prices: Prices) -> Self:
        """Prices of the caller's own models and gateways (a :class:`~kova.agent.Prices`),
        used before the ``genai-prices`` sheet to price every model call (docs/cost.md)."""
        from ._cost import Prices

        _instance("prices", prices, Prices, "kova.agent.Prices")
        self._prices = prices
        return self

    def budget(self, budget: Budget) -> Self:
        """A :class:`~kova.agent.Budget` in money, shared with any other agents given it:
        each model call reserves its worst case first and is refused
        (:class:`~kova.errors.BudgetExceeded`) if that does not fit (docs/cost.md)."""
        from ._budget import Budget

        _instance("budget", budget, Budget, "kova.agent.Budget")
        self._budget = budget
        return self

    def lifecycle_hook(self, hook: LifecycleHook) -> Self:
        """Observe tool calls starting and ending (denied calls are skipped). The methods may
        be sync or async; one that raises is logged (``tool.hook.failed``) and ignored. The
        hook is a subscriber of the agent's turns (a :class:`~kova.agent.LifecycleSubscriber`
        of its event stream)."""
        self._lifecycle = hook
        return self

    with_lifecycle_hook = lifecycle_hook

    def runtime(self, runtime: Runtime) -> Self:
        """Run the agent's actors on an application-wide runtime (``kova.open_runtime()``)
        instead of its own."""
        from ..actors import Runtime

        if not isinstance(runtime, Runtime):
            raise BuildError(
                "runtime needs a kova.actors.Runtime (from kova.open_runtime()), got "
                f"{type(runtime).__name__}"
            )
        self._runtime = runtime
        return self

    def build(self) -> Agent:
        """Validate and build the agent (use it with ``async with``).

        Raises:
            BuildError: no provider, a limit below 1, a budget below 1, an object that is not
                a tool, or two tools with the same name.
        """
        provider = self._checked_provider()
        registry = self._tool_registry()
        return Agent(
            AgentConfig(
                provider=provider,
                registry=registry,
                system_prompt=self._system_prompt,
                inference=self._inference,
                context_budget=self._context_budget,
                max_iterations=self._max_iterations,
                max_concurrent_tools=self._max_concurrent_tools,
                retry=self._retry,
                metrics=self._metrics,
                approval=self._approval,
                lifecycle=self._lifecycle,
                runtime=self._runtime,
                provider_max_in_flight=self._max_in_flight,
                output_retries=self._output_retries,
                telemetry=self._telemetry,
                name=self._name,
                usage_limits=self._usage_limits,
                defer=self._defer,
                tool_search_limit=self._tool_search_limit,
                tool_search_native=self._tool_search_native,
                prices=self._prices,
                budget=self._budget,
                context=self._context,
                guards=tuple(self._guards),
                approval_keys=self._approval_keys,
            )
        )

    def _checked_provider(self) -> Provider:
        """The settings' own checks (build's Raises) before any tool is registered; the
        provider."""
        if self._provider is None:
            raise BuildError("an agent needs a provider: call .provider(...)")
        if not isinstance(self._provider, Provider):
            raise BuildError(f"{self._provider!r} does not implement the kova Provider protocol")
        if self._max_iterations < 1:
            raise BuildError(f"max_iterations must be at least 1, got {self._max_iterations}")
        if self._max_concurrent_tools < 1:
            raise BuildError(
                f"max_concurrent_tools must be at least 1, got {self._max_concurrent_tools}"
            )
        if self._context_budget is not None and self._context_budget < 1:
            raise BuildError(f"context_budget must be at least 1, got {self._context_budget}")
        if isinstance(self._output_retries, bool) or not isinstance(self._output_retries, int):
            raise BuildError(f"output_retries must be an int, got {self._output_retries!r}")
        if self._output_retries < 0:
            raise BuildError(f"output_retries must be at least 0, got {self._output_retries}")
        if self._max_in_flight is not None and self._max_in_flight < 1:
            raise BuildError(f"max_in_flight must be at least 1, got {self._max_in_flight}")
        approval = self._approval
        if approval is not None and not (
            callable(approval) or isinstance(approval, ApprovalHandler)
        ):
            raise BuildError(
                "the approval handler must be callable or have an approve(call) method"
            )
        if self._defer is not None and not callable(self._defer):
            raise BuildError(f"the defer predicate must be callable, got {self._defer!r}")
        if approval is not None:
            approve: Callable[..., object] = getattr(approval, "approve", approval)  # type: ignore[arg-type]
            _check_takes_a_call("approval handler", approve)
        if self._defer is not None:
            _check_takes_a_call("defer predicate", self._defer)
        if self._lifecycle is not None and not isinstance(self._lifecycle, LifecycleHook):
            raise BuildError("the lifecycle hook needs on_tool_start and on_tool_end methods")
        return self._provider

    def _tool_registry(self) -> ToolRegistry:
        """The agent's tools (its own, the registry's, the MCP bindings') in one registry."""
        from ..tools import Tool, ToolRegistry

        seen: set[str] = set()
        for tool in self._tools:
            if not isinstance(tool, Tool):
                raise BuildError(f"{tool!r} is not a tool (see kova.tools.Tool)")
            if tool.name in seen or (self._registry is not None and tool.name in self._registry):
                raise BuildError(f"two tools are named {tool.name!r}; tool names must be unique")
            seen.add(tool.name)
        registry = self._registry if self._registry is not None else ToolRegistry()
        for tool in self._tools:
            registry.register(tool)
        if self._mcp_bindings:
            from ..mcp._tool import bind_tools

            for client, prefix, tools, include, exclude, defer in self._mcp_bindings:
                bind_tools(
                    client,
                    prefix,
                    registry,
                    tools,
                    include=include,
                    exclude=exclude,
                    defer=defer,
                )
        if self._tool_search_native:
            _check_native_search(self._provider)
        if registry.has_deferred and SEARCH_TOOLS in registry:
            raise BuildError(
                f"a tool is named {SEARCH_TOOLS!r}, the name of the tool the model finds "
                "deferred tools with: rename it"
            )
        return registry


def _check_native_search(provider: object) -> None:
    name = getattr(provider, "name", type(provider).__name__)
    if name not in NATIVE_TOOL_SEARCH:
        raise BuildError(
            f"tool_search(provider_native=True): the {name!r} provider has no tool search of "
            "its own (Anthropic's and OpenAI Responses' do); leave provider_native off to use "
            "kova's search_tools, which works with any provider"
        )
