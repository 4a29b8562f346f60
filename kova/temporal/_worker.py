"""``kova.temporal.worker``: a Temporal worker that runs kova's agents' activities.

The worker holds the agents (built from the builders it was given, with the MCP servers it
was given connected once, for all of them), open in kova's trio guest run on the worker's
asyncio loop (:mod:`kova.asyncio`) from the moment it starts polling until it has shut down.
Each activity runs one piece of a turn there:

- ``kova.{agent}.start``: the agent's turn core for a history (its tools, inference config,
  system prompt and limits are the worker's: nothing of the agent travels in payloads);
- ``kova.{agent}.model``: one model call, through the agent's provider actor with its
  retries off (Temporal retries, with the agent's :class:`~kova.agent.RetryConfig` as its
  retry policy; a ``Retry-After`` becomes the next retry's delay);
- ``kova.{agent}.tool.{tool}``: one tool call, through the agent's tool pool (approval
  handler, hooks, the concurrency cap, MCP tools through the worker's connection actors);
- ``kova.{agent}.summarize``: a summary the agent's context policy asked for;
- ``kova.{agent}.guard``: one check by the agent's guards (input, output or tool).

Activities heartbeat while they run: cancelling the workflow reaches the activity at its
next heartbeat, and the activity cancels its trio cancel scope, once, and returns when
everything the call started has stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from temporalio import activity
from temporalio.common import RawValue  # noqa: TC002 (the activity's hints are read at run time)
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from .._errors import ContextOverflow, GuardrailTripped, KovaError, SerializationError
from .._groups import lone_exceptions
from .._guest import AsyncioRuntime, ensure_runtime, held_open
from .._json import dumps
from .._messages import block_to_dict
from .._models import ChatRequest, TextDelta, ThinkingDelta, ToolResult
from ..agent import Agent, AgentBuilder
from ..agent._approvals import DEFER, InnerPause
from ..agent._as_tool import AgentTool
from ..agent._context import Summarize
from ..agent._events import ToolCallDeferred, ToolCallFinished, ToolCallStarted
from ..agent._guard_gate import GuardGate
from ..agent._guard_record import GuardRecord
from ..agent._guards import GuardPassed, GuardTripped, InputGuard, OutputGuard, ToolGuard
from ..agent._input import check_messages
from ..agent._retry import RetryConfig
from ..agent._state_json import (
    config_from_json,
    field,
    messages_from_json,
    result_to_json,
    tool_to_json,
)
from ..agent._steps import ModelStep, ToolStep
from ..agent._structured import _InvalidAnswer, _Output
from ..agent._tool_search import ToolSearch
from ..durable._driver import may_run_again, not_known_to_have_run
from ._inner import OuterCounter, figures_from_json
from ._payloads import (
    call_from_json,
    check_size,
    policy_to_json,
    read_json,
    request_from_json,
    response_to_json,
    tools_digest,
)
from ._workflow import EVENTS_SIGNAL, AgentWorkflow

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from temporalio.client import Client

    from .._messages import ToolUse
    from .._models import ModelResponse, StreamEvent, ToolDefinition
    from ..agent._approvals import DeferredResult
    from ..agent._driver_context import DriverContext
    from ..agent._model_call import ModelCall

__all__ = ["worker"]

_NO_RETRY = RetryConfig(max_retries=0)
"""Inside an activity the provider does not retry: Temporal does."""

_STARTED = "kova: tool call started"
"""A tool activity's heartbeat detail once its call is handed to the tool pool: a retried
attempt that finds it knows the call may have run."""

_FLUSH_EVERY = 0.1
"""Seconds between two batches of live events sent to the workflow."""


def worker(
    client: Client,
    *,
    task_queue: str,
    agents: Mapping[str, AgentBuilder | Agent],
    mcp: Mapping[str, object] | None = None,
    deps: object = None,
    **options: Any,
) -> Worker:
    """A Temporal :class:`~temporalio.worker.Worker` on ``task_queue`` that runs
    :class:`~kova.temporal.AgentWorkflow` and the activities of ``agents``.

    Run it as any worker (``await w.run()``, or ``async with w:``); the agents open when it
    starts and close when it has shut down.

    Args:
        client: a connected Temporal client.
        task_queue: the task queue to poll.
        agents: the agents by the name turns use (``run_turn(client, agent=name, ...)``): an
            :class:`~kova.agent.AgentBuilder` (built when the worker starts) or a built
            :class:`~kova.agent.Agent` (not yet open). The name is part of every activity's
            name, and so of every running workflow's history: renaming an agent, or a tool,
            breaks the turns running under the old name.
        mcp: MCP servers by prefix (``{"files": StdioTransport(...)}``): each is connected
            once per worker, when it starts (a supervised connection actor that reconnects
            by itself), and its tools are added to every agent given as a builder, named
            ``{prefix}__{tool}`` as with ``builder.mcp_client``.
        deps: the tools' ``ToolContext.deps`` in every call this worker runs.
        options: passed on to Temporal's ``Worker`` (``max_concurrent_activities``, ...).
            :class:`AgentWorkflow` runs outside Temporal's sandbox (its runner is the
            ``unsandboxed_workflow_runner``).

    Raises:
        TypeError: ``agents`` is not a mapping of names to builders or agents.
        ValueError: no agents, or a name that is empty or contains whitespace.
    """
    if not isinstance(agents, Mapping):
        raise TypeError(f"agents must be a mapping of names to agents, got {type(agents).__name__}")
    if not agents:
        raise ValueError("a kova worker needs at least one agent")
    for name, agent in agents.items():
        if not isinstance(name, str) or not name or name != name.strip() or " " in name:
            raise ValueError(f"an agent's name must be a non-empty word, got {name!r}")
        if not isinstance(agent, AgentBuilder | Agent):
            raise TypeError(
                f"agents[{name!r}] must be a kova AgentBuilder or Agent, got {type(agent).__name__}"
            )
    if mcp is not None and not isinstance(mcp, Mapping):
        raise TypeError(f"mcp must be a mapping of prefixes to transports, got {mcp!r}")
    host = _Host(dict(agents), dict(mcp or {}), deps)
    return _KovaWorker(
        host,
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[host.activity()],
        **options,
    )


class _KovaWorker(Worker):
    """A Temporal worker that holds kova's agents open while it runs."""

    def __init__(self, host: _Host, client: Client, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._kova = host

    async def run(self) -> None:
        async with self._kova.opened():
            await super().run()


class _Host:
    """The worker's kova side: its agents, open in the guest run while the worker runs."""

    def __init__(
        self, agents: dict[str, AgentBuilder | Agent], mcp: dict[str, object], deps: object
    ) -> None:
        self._given = agents
        self._mcp = mcp
        self._deps = deps
        self._agents: dict[str, Agent] = {}
        self._runtime: AsyncioRuntime | None = None
        self._digests = _Digests()

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        runtime = self._runtime = await ensure_runtime()
        async with held_open(runtime, self._open_agents, "the agents") as self._agents:
            try:
                yield
            finally:
                self._agents = {}

    @asynccontextmanager
    async def _open_agents(self) -> AsyncIterator[dict[str, Agent]]:
        """The MCP servers connected and the agents open, held by a trio task until the
        worker has shut down."""
        async with AsyncExitStack() as stack:
            clients: dict[str, Any] = {}
            if self._mcp:
                from ..mcp import McpClient

                for prefix, transport in self._mcp.items():
                    clients[prefix] = await stack.enter_async_context(
                        McpClient.connect(transport, name=f"temporal-worker-{prefix}")  # type: ignore[arg-type]
                    )
            opened: dict[str, Agent] = {}
            for name, given in self._given.items():
                if isinstance(given, AgentBuilder):
                    for prefix, client in clients.items():
                        await given.mcp_client(client, prefix)
                    agent = given.build()
                else:
                    agent = given
                opened[name] = await stack.enter_async_context(agent)
            yield opened

    def _agent(self, name: str) -> Agent:
        agent = self._agents.get(name)
        if agent is None:
            raise ApplicationError(
                f"this worker serves no agent named {name!r} (it serves "
                f"{', '.join(sorted(self._given)) or 'none'})",
                type="UnknownAgent",
                non_retryable=True,
            )
        return agent

    def _route(self, activity_type: str) -> tuple[str, str, str]:
        """(agent, kind, tool) of one of this worker's activity names."""
        for name in self._given:
            head = f"kova.{name}."
            if activity_type.startswith(head):
                rest = activity_type[len(head) :]
                if rest in ("start", "model", "summarize", "guard"):
                    return name, rest, ""
                if rest.startswith("tool."):
                    return name, "tool", rest[len("tool.") :]
        raise ApplicationError(
            f"this kova worker has no activity {activity_type!r} (agents: "
            f"{', '.join(sorted(self._given))})",
            type="UnknownActivity",
            non_retryable=True,
        )

    def activity(self) -> Any:
        """The worker's one activity definition, dynamic: it serves every activity name of
        its agents (tools of MCP servers are known only once connected)."""

        @activity.defn(dynamic=True)
        async def kova_activity(args: Sequence[RawValue]) -> str:
            info = activity.info()
            name, kind, _tool = self._route(info.activity_type)
            if len(args) != 1:
                raise ApplicationError(
                    f"{info.activity_type} takes one argument", non_retryable=True
                )
            text = activity.payload_converter().from_payload(args[0].payload, str)
            agent = self._agent(name)
            try:
                if kind == "start":
                    return _start(agent, text)
                if kind == "model":
                    return await self._model(agent, text)
                if kind == "summarize":
                    request = read_json(text, "a summary request")
                    summary = await self._in_guest((_call_summarizer, agent, request), None)
                    return check_size(summary, "a summary")
                if kind == "guard":
                    request = read_json(text, "a guard check")
                    verdict = await self._in_guest((_check_guards, agent, request), None)
                    return check_size(verdict, "a guard's verdict")
                return await self._tool(agent, text)
            except KovaError as exc:
                raise _as_failure(exc, agent) from None

        return kova_activity

    async def _model(self, agent: Agent, text: str) -> str:
        request = read_json(text, "a model request")
        publish = _Publisher() if request.get("events") else None
        attempt = activity.info().attempt
        call = (_call_model, agent, request, publish, attempt, self._digests)
        return check_size(await self._in_guest(call, publish), "a model reply")

    async def _in_guest(
        self, call: tuple[Any, ...], publish: _Publisher | None, *details: Any
    ) -> Any:
        """``call`` (a trio function and its arguments) run in the guest run, heartbeating."""
        runtime = self._runtime
        assert runtime is not None
        return await _heartbeating(runtime.run(*call), publish, *details)

    async def _tool(self, agent: Agent, text: str) -> str:
        request = read_json(text, "a tool call")
        call = call_from_json(request.get("call"))
        info = activity.info()
        if (
            info.attempt > 1
            and _STARTED in info.heartbeat_details
            and not may_run_again(
                getattr(agent.config.registry.get(call.name), "annotations", None)
            )
        ):
            # An earlier attempt handed the call to the tool pool and was lost (its worker
            # died, or it timed out): it may have taken effect, and the tool may not run
            # twice. The model is told so, in-band.
            return dumps({"result": result_to_json(not_known_to_have_run(call))})
        publish = _Publisher() if request.get("events") else None
        turn_id = field(request, "turn_id", str)
        outer = _outer_for(agent, call, request)
        activity.heartbeat(_STARTED)
        approved = bool(request.get("approved"))
        work = (_call_tool, agent, call, approved, turn_id, self._deps, publish, outer)
        result, paused = await self._in_guest(work, publish, _STARTED)
        reply: dict[str, Any] = {}
        if outer is not None and outer[0].counted:
            reply["inner"] = outer[0].counted
        if paused is not None:
            reply["paused"] = paused.to_dict()
        if result is DEFER:
            reply["defer"] = True
        else:
            assert isinstance(result, ToolResult)
            reply["result"] = result_to_json(result)
        return check_size(dumps(reply), "a tool result")


def _outer_for(
    agent: Agent, call: ToolUse, request: Mapping[str, Any]
) -> tuple[OuterCounter, dict[str, InnerPause] | None] | None:
    """For a call of an agent tool (``agent.as_tool()``): what its inner turn sees of the
    outer turn, as in-process (see ``_inner``): the outer usage limits and figures, and the
    paused inner turn the call continues; ``None`` for any other tool."""
    if not isinstance(agent.config.registry.get(call.name), AgentTool):
        return None
    figures = request.get("outer")
    if figures is not None and not isinstance(figures, Mapping):
        raise SerializationError("a tool call's outer figures must be a JSON object")
    resume = request.get("resume")
    resumes = None if resume is None else {call.id: InnerPause.from_dict(resume)}
    return OuterCounter(figures_from_json(figures)), resumes


def _start(agent: Agent, text: str) -> str:
    request = read_json(text, "a turn's start")
    history = tuple(messages_from_json(request.get("history"), "history"))
    check_messages(history)
    config = request.get("config")
    # A structured turn's response format (the rest of the config is the worker's).
    overrides = None if config is None else config_from_json(config)
    driver = agent.driver_context()
    turn = driver.start_turn(history, overrides, None, field(request, "turn_id", str))
    state = turn.to_dict()
    retry = agent.config.retry
    registry = agent.config.registry
    policy = agent.config.context
    limit = state["context"]["limit"] if isinstance(state["context"], dict) else None
    return dumps(
        {
            "turn": dumps(state),
            "guards": guards_of(agent),
            # The agent's context policy: the workflow's turn decides with it.
            "context": None
            if policy is None or not isinstance(limit, int)
            else policy_to_json(policy, limit),
            # What the model activities compare the worker's deferred tools with.
            "deferred": tools_digest(registry.definitions(deferred=True))
            if registry.has_deferred
            else None,
            "output_retries": agent.config.output_retries,
            "retry": {
                "max_retries": retry.max_retries,
                "initial_backoff": retry.initial_backoff,
                "multiplier": retry.multiplier,
                "max_backoff": retry.max_backoff,
            },
        }
    )


async def _call_model(
    agent: Agent,
    request: Mapping[str, Any],
    publish: _Publisher | None,
    attempt: int = 1,
    digests: _Digests | None = None,
) -> str:
    """One model call of a turn (trio side), as the reply's JSON: the agent's model step,
    streamed when the turn's events are wanted.

    The call offers the tools the worker's agent has now, read for every model call as an
    in-process turn does (an MCP server's ``tools/list_changed`` reaches the model on its
    next step). When they differ from the turn's (the request carries their digest), the
    reply carries them (``"tools"``): the workflow offers them from then on, and a replay
    reads the same ones from its history.

    The agent's telemetry subscribers see the call as in-process (ModelCallStarted,
    ModelFirstToken, ModelCallFinished with the usage); this ``attempt`` failing with an
    error Temporal retries is a ModelCallRetrying (with the wait Temporal's retry policy
    gives it), then a ModelCallFinished with the error: each attempt is a call of its own.
    """
    context = agent.driver_context()
    registry = context.config.registry
    if registry.has_deferred or "deferred" in request:
        chat, reply = _offer(context, request, digests or _Digests())
    else:
        offered = registry.definitions()
        chat, changed = request_from_json(request, offered)
        reply = {"tools": [tool_to_json(tool) for tool in offered]} if changed else {}

    def failed(call: ModelCall, exc: BaseException) -> None:
        wait = _next_attempt(exc, agent, attempt) if isinstance(exc, KovaError) else None
        if wait is None:
            call.failed(exc)
        else:
            call.retrying(exc, attempt, wait)

    # Inside an activity the provider does not retry: Temporal does.
    provider = context.provider.with_retry(_NO_RETRY)
    # Priced (and reserved against the agent's budget) here: the cost rides in the reply's
    # usage, so the workflow (and a replay of it) reads the recorded figure.
    # A streamed answer goes through the agent's output guards as it streams (each read
    # before any of it is published); the whole answer is checked once the turn ends.
    outputs = [guard for guard in context.config.guards if isinstance(guard, OutputGuard)]
    gate = GuardGate(outputs, "", emitter=context.emitter()) if outputs and publish else None
    step = ModelStep(
        context, chat.config, context.emitter(), provider=provider, on_failure=failed, gate=gate
    )
    if request.get("count_tokens"):
        reply["tokens"] = await step.count_tokens(chat)
        return dumps(reply)
    try:
        response = await _answer(step, chat, publish, gate, reply)
    except ContextOverflow as exc:
        if not request.get("overflow"):  # the turn has no context policy
            raise
        # The workflow's turn compacts and calls again (a decision of its own, recorded
        # with this reply), as in-process.
        reply["overflow"] = {"message": exc.message, "status_code": exc.status_code}
        return dumps(reply)
    if response is None:  # an output guard tripped
        return dumps(reply)
    reply["response"] = response_to_json(response)
    response_format = chat.config.response_format
    if response_format is not None and not response.tool_uses:
        # A structured turn's answer, checked against its schema here (not in workflow
        # code: the check is recorded with the reply, so a replay re-asks the same).
        try:
            _Output(response_format).validate(response.text)
        except _InvalidAnswer as invalid:
            reply["invalid"] = invalid.problem
    return dumps(reply)


def guards_of(agent: Agent) -> dict[str, bool] | None:
    """Which kinds of guards the agent has (``None``: none), for the workflow to know which
    checks to ask for: ``blocking`` and ``concurrent`` input guards, ``output``, ``tool``."""
    guards = agent.config.guards
    if not guards:
        return None
    inputs = [guard for guard in guards if isinstance(guard, InputGuard)]
    return {
        "blocking": any(guard.blocking for guard in inputs),
        "concurrent": any(not guard.blocking for guard in inputs),
        "output": any(isinstance(guard, OutputGuard) for guard in guards),
        "tool": any(isinstance(guard, ToolGuard) for guard in guards),
    }


async def _check_guards(agent: Agent, request: Mapping[str, Any]) -> str:
    """One check the workflow asked for (trio side), by the agent's guards and its gate (as
    in-process: each check a span when somebody listens), as the reply's JSON:

    - ``{"kind": "input", "text": ..., "blocking": bool}``: the input guards of that kind
      (those beside the model call run concurrently with each other);
    - ``{"kind": "output", "text": ...}``: the output guards on the whole answer;
    - ``{"kind": "tool", "calls": [...]}``: the tool guards on each call (``denied``: the
      in-band answers of the calls they denied, by call id).

    The reply's ``records`` are the decisions (``GuardRecord`` JSON) for the workflow's
    turn; ``error`` is a check that raised (the turn fails with it, as in-process). A trip
    is a ``trip`` record; a check that raises a retryable kova error (a guard agent's
    provider was rate limited) is retried by Temporal.
    """
    context = agent.driver_context()
    kind = field(request, "kind", str)
    guards = context.config.guards
    reply: dict[str, Any] = {}
    gate: GuardGate | None = None
    try:
        with lone_exceptions():  # a trip or a check's error leaves as itself
            async with trio.open_nursery() as nursery:
                if kind == "input":
                    blocking = bool(request.get("blocking"))
                    chosen = [
                        g for g in guards if isinstance(g, InputGuard) and g.blocking == blocking
                    ]
                    text = field(request, "text", str)
                    gate = GuardGate(
                        chosen, text, None if blocking else nursery, emitter=context.emitter()
                    )
                    try:
                        await gate.passed()
                    finally:
                        nursery.cancel_scope.cancel(reason="the input guards decided")
                elif kind == "output":
                    outputs = [guard for guard in guards if isinstance(guard, OutputGuard)]
                    gate = GuardGate(outputs, "", emitter=context.emitter())
                    await gate.answered(field(request, "text", str))
                elif kind == "tool":
                    tools = [guard for guard in guards if isinstance(guard, ToolGuard)]
                    calls = [call_from_json(item) for item in field(request, "calls", list)]
                    gate = GuardGate(tools, "", emitter=context.emitter())
                    denied = await gate.tool_calls(calls)
                    reply["denied"] = {
                        key: result_to_json(result) for key, result in denied.items()
                    }
                else:
                    raise SerializationError(f"unknown kind of guard check {kind!r}")
    except GuardrailTripped:
        pass  # its record is among the gate's events
    except KovaError:
        raise
    except Exception as exc:  # a broken check fails the turn, as itself
        reply["error"] = {"type": type(exc).__name__, "message": str(exc)}
    events = () if gate is None else gate.take_events()
    reply["records"] = [_record_of(event) for event in events]
    return dumps(reply)


def _record_of(event: object) -> dict[str, str]:
    """A guard event of the gate as the decision the workflow's turn records."""
    if isinstance(event, GuardPassed):
        data = {"guard": event.guard, "kind": event.kind, "verdict": "pass"}
        data["call_id"] = event.call_id
    else:
        assert isinstance(event, GuardTripped)
        verdict = "deny" if event.denied else "trip"
        data = {"guard": event.guard, "kind": event.kind, "verdict": verdict}
        data |= {"reason": event.reason, "call_id": event.call_id}
    return GuardRecord.from_dict(data).to_dict()


async def _call_summarizer(agent: Agent, request: Mapping[str, Any]) -> str:
    """The summary a turn's context policy asked for (trio side), from the summarizer of
    the agent's ``Summarize`` strategy the request names (the agent's own provider, its
    retries off, when it has none), as the reply's JSON."""
    context = agent.driver_context()
    policy = context.config.context
    index = field(request, "strategy", int)
    strategies = () if policy is None else policy.strategies
    strategy = strategies[index] if 0 <= index < len(strategies) else None
    if not isinstance(strategy, Summarize):
        raise SerializationError(
            f"the worker's agent {context.name!r} has no Summarize strategy at {index} (its "
            "context policy changed while the turn ran?)"
        )
    chat, _ = request_from_json(request, ())
    summarizer = strategy.provider
    if summarizer is None:
        response = await context.provider.with_retry(_NO_RETRY).chat_completion(chat)
    else:
        async with summarizer.open():
            response = await summarizer.chat_completion(chat)
    return dumps({"response": response_to_json(response)})


class _Digests:
    """The digest of each agent's deferred tools, kept while they are the same objects (a
    ``@tool`` function's definition is built once): a model call of an agent with 500
    deferred tools then compares them in microseconds instead of printing and hashing
    them (~7 ms). Read and written between checkpoints only (the worker's trio run)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[ToolDefinition, ...], str]] = {}

    def deferred(self, agent: str, tools: Sequence[ToolDefinition]) -> str:
        last = self._last.get(agent)
        if (
            last is not None
            and len(last[0]) == len(tools)
            and all(old is new for old, new in zip(last[0], tools, strict=True))
        ):
            return last[1]
        digest = tools_digest(tools)
        self._last[agent] = (tuple(tools), digest)
        return digest


def _offer(
    context: DriverContext, request: Mapping[str, Any], digests: _Digests
) -> tuple[ChatRequest, dict[str, Any]]:
    """The model call of a turn with deferred tools: it offers what the turn offers (the
    tools offered up front, ``search_tools``, then the deferred tools the turn found, by the
    names the request carries), never every tool. When the worker's tools differ from the
    turn's (the offer's digest, or the deferred tools' digest), the reply carries both lists:
    the workflow's turn searches and offers them from then on."""
    config = context.config
    registry = config.registry
    upfront = tuple(registry.definitions(deferred=False))
    deferred = registry.definitions(deferred=True)
    found = request.get("found", [])
    if not isinstance(found, list) or not all(isinstance(name, str) for name in found):
        raise SerializationError("a model request's 'found' must be a list of tool names")
    native = config.tool_search_native  # the provider searches: no search_tools
    search = ToolSearch(deferred, limit=config.tool_search_limit, found=found, native=native)
    chat, changed = request_from_json(request, search.offer(upfront))
    if native:  # each request carries the deferred tools, for the provider's search
        chat = ChatRequest(
            messages=chat.messages, tools=chat.tools, config=chat.config, deferred_tools=deferred
        )
    if changed or digests.deferred(context.name, deferred) != request.get("deferred"):
        return chat, {
            "tools": [tool_to_json(tool) for tool in upfront],
            "deferred": [tool_to_json(tool) for tool in deferred],
        }
    return chat, {}


async def _answer(
    step: ModelStep,
    chat: ChatRequest,
    publish: _Publisher | None,
    gate: GuardGate | None,
    reply: dict[str, Any],
) -> ModelResponse | None:
    """The model's response to ``chat``, streamed (and published) when ``publish`` is
    given; ``None`` when an output guard tripped on it (its record in ``reply``)."""
    if publish is None:
        return await step.complete(chat)
    try:
        async with step.stream(chat) as reads:
            batch: Sequence[StreamEvent] | None = reads.first
            while batch is not None:
                for event in batch:
                    await _publish_event(publish, event)
                batch = await reads.next()
    except GuardrailTripped:
        assert gate is not None
        trips = [_record_of(event) for event in gate.take_events()]
        reply["tripped"] = next(item for item in trips if item["verdict"] == "trip")
        return None
    assert reads.response is not None
    return reads.response


async def _call_tool(
    agent: Agent,
    call: ToolUse,
    approved: bool,
    turn_id: str,
    deps: object,
    publish: _Publisher | None,
    outer: tuple[OuterCounter, dict[str, InnerPause] | None] | None = None,
) -> tuple[DeferredResult, InnerPause | None]:
    """One tool call through the agent's tool pool (trio side), observed by the agent's
    telemetry subscribers (and lifecycle hooks) as in-process, and the pause of the inner
    turn it ran, if it paused. ``outer``: for an agent tool, what its inner turn sees of the
    outer turn; the inner turn's events are published with their ``path``, as an
    in-process stream nests them."""
    context = agent.driver_context()
    tools = ToolStep(context, context.emitter(), streamed=publish is not None, deps=deps)
    on_event = None if publish is None else partial(_publish_event, publish)
    ids = frozenset((call.id,)) if approved else frozenset()
    turn, resumes = (None, None) if outer is None else outer
    request = tools.request(
        (call,), approved=ids, turn_id=turn_id, turn=turn, resumes=resumes, on_event=on_event
    )
    results = await tools.execute(request)
    return results[0], request.paused.get(call.id)


async def _publish_event(publish: _Publisher, item: object) -> None:
    """One event of a tool call (an inner agent's too, with its path) sent live."""
    path: tuple[str, ...] = getattr(item, "path", ())
    if isinstance(item, TextDelta):
        publish.add("text", path, text=item.text)
    elif isinstance(item, ThinkingDelta):
        publish.add("thinking", path, text=item.text)
    elif isinstance(item, ToolCallStarted):
        publish.add("tool_started", path, call=block_to_dict(item.call))
    elif isinstance(item, ToolCallFinished):
        publish.add(
            "tool_finished", path, call=block_to_dict(item.call), result=result_to_json(item.result)
        )
    elif isinstance(item, ToolCallDeferred):
        publish.add("tool_deferred", path, call=block_to_dict(item.call))


async def _heartbeating(work: Any, publish: _Publisher | None, *details: Any) -> Any:
    """Await ``work`` (an activity's trio job) while heartbeating (so that a cancelled
    workflow reaches it) and, with ``publish``, sending its live events.

    The events go out every ``_FLUSH_EVERY`` and once more when the work ends, in order and
    each once: the sender is told to stop, never cancelled, since a batch it has taken is
    on its way (a signal to the workflow) and cutting that short would lose the batch.
    """
    info = activity.info()
    timeout = info.heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else 10.0

    async def beat() -> None:
        while True:
            activity.heartbeat(*details)
            await asyncio.sleep(interval)

    stop = asyncio.Event()

    async def send() -> None:
        assert publish is not None
        while not stop.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _FLUSH_EVERY)
            await publish.flush()
        await publish.flush()  # what was added while the last batch was on its way

    beating = asyncio.create_task(beat())
    sending = None if publish is None else asyncio.create_task(send())
    try:
        result = await work
    except BaseException:
        beating.cancel()
        stop.set()
        # The attempt failed: its events still go out, but no error of theirs hides its own.
        await asyncio.gather(beating, *([sending] if sending else []), return_exceptions=True)
        raise
    beating.cancel()
    await asyncio.gather(beating, return_exceptions=True)
    if sending is not None:
        stop.set()
        await sending
    return result


class _Publisher:
    """An activity's live events, sent to its workflow in batches (the ``kova.events``
    signal), each with the activity's attempt number."""

    __slots__ = ("_activity", "_attempt", "_handle", "_items")

    def __init__(self) -> None:
        info = activity.info()
        self._handle = activity.client().get_workflow_handle(
            info.workflow_id or "", run_id=info.workflow_run_id
        )
        self._attempt = info.attempt
        self._activity = info.activity_id
        self._items: list[dict[str, Any]] = []

    def add(self, kind: str, path: tuple[str, ...], **data: Any) -> None:
        """One event; ``path`` is an inner agent's (``()`` for the turn's own)."""
        items = self._items
        if kind in ("text", "thinking") and items:
            last = items[-1]
            if last["kind"] == kind and last.get("path", ()) == path:
                last["text"] += data["text"]  # one event per flush for a run of deltas
                return
        item = {"kind": kind, "attempt": self._attempt, "activity": self._activity, **data}
        if path:
            item["path"] = path
        items.append(item)

    async def flush(self) -> None:
        items, self._items = self._items, []
        if items:
            await self._handle.signal(EVENTS_SIGNAL, dumps({"events": items}))


def _retry_decision(exc: KovaError, agent: Agent) -> tuple[bool, timedelta | None]:
    """Whether Temporal may retry after ``exc``, and after the ``Retry-After`` the provider
    sent, if it sent one."""
    retry_after = getattr(exc, "retry_after", None)
    retryable = exc.is_retryable
    delay = None
    if retryable and isinstance(retry_after, int | float) and retry_after >= 0:
        if retry_after > agent.config.retry.max_retry_after:
            retryable = False  # longer than the agent waits: fail now, as in-process
        else:
            delay = timedelta(seconds=retry_after)
    return retryable, delay


def _next_attempt(exc: KovaError, agent: Agent, attempt: int) -> float | None:
    """Seconds until Temporal runs a model call's next attempt after attempt ``attempt``
    failed with ``exc``, or ``None`` when it will not: the retry policy AgentWorkflow gives
    model calls (the agent's :class:`~kova.agent.RetryConfig`, see ``_retry_policy``)."""
    retryable, delay = _retry_decision(exc, agent)
    retry = agent.config.retry
    if not retryable or attempt > retry.max_retries:
        return None
    if delay is not None:
        return delay.total_seconds()
    initial = max(retry.initial_backoff, 0.001)
    backoff = initial * max(retry.multiplier, 1.0) ** (attempt - 1)
    return float(min(backoff, max(retry.max_backoff, initial)))


def _as_failure(exc: KovaError, agent: Agent) -> ApplicationError:
    """kova's error taxonomy as Temporal's: retryable errors are retried by Temporal, after
    the ``Retry-After`` the provider sent when it sent one; the rest fail the activity, and
    with it the turn."""
    retryable, delay = _retry_decision(exc, agent)
    return ApplicationError(
        str(exc),
        type=type(exc).__name__,
        non_retryable=not retryable,
        next_retry_delay=delay,
    )
