"""The agent: a stateless driver of the turn core over caller-owned history.

``run(history)`` takes the conversation the host keeps and returns the messages the turn
produced; it holds no conversation state between turns. What a turn does next (call the
model, run tools, wait for decisions, finish) and every limit are decided by the turn core,
:class:`~kova.agent.Turn` (``_turn``: no I/O in it); this module drives it on trio: provider
calls through the provider actor (streamed or not), tool steps through the tool pool actor,
telemetry, and cancellation.

A turn that fails or is cancelled produces no messages: they are built locally and handed
over only in the returned response.

The agent's configuration is :class:`~kova.agent.AgentConfig` (``_config``); the events of
one observed provider call come from ``_model_call``; running a turn under a
:class:`~kova.agent.CancelToken` is in ``_cancel``.
"""

from __future__ import annotations

import contextvars
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, overload

import trio

from .._door import check_asyncio_tools, require_trio
from .._errors import BuildError
from .._groups import lone_exceptions
from .._log import get_logger
from .._models import InferenceConfig, Message, ResponseFormat, TextDelta, ThinkingDelta
from .._observe import Deliver, TelemetryHub, TurnFinished, TurnStarted, current_scope
from ..tools._validate import load_validation
from ._accumulate import ResponseAccumulator
from ._budget import Hold, Meter
from ._cancel import guarded
from ._config import DEFAULT_NAME
from ._context import Compact
from ._cost import Pricer, load_sheet
from ._events import AgentEvent, AgentResponse, ToolCallFinished, ToolCallStarted, TurnCompleted
from ._input import HistoryInput, check_call_options, coerce_history
from ._limits import UsageLimits
from ._model_call import ModelCall, outcome_of
from ._nesting import Nest, nested
from ._signing import Decisions, Signer
from ._streaming import TurnStream
from ._tool_deltas import TOOL_STREAM, ToolArguments
from ._tool_pool import Approver, GetToolRunner, RunToolCalls, ToolPoolActor, ToolRunner
from ._turn import AwaitApproval, CallModel, Finished, RunTools, Turn, new_turn_id

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._models import StreamEvent, ToolResult, ToolUse
    from ..actors import ActorRef
    from ..durable import SqliteJournal
    from ..durable._driver import Journaled
    from ..sessions import Session
    from ..tools import ToolContext, ToolRegistry
    from ._approvals import DeferredResult, InnerPause, PendingApprovals
    from ._as_tool import AgentTool
    from ._cancel import CancelToken
    from ._config import AgentConfig
    from ._context import ContextPolicy
    from ._nesting import CallSite
    from ._provider_ref import ProviderRef
    from ._structured import StructuredStream

__all__ = ["Agent"]

log = get_logger(__name__)

OutputT = TypeVar("OutputT")


class Agent:
    """Runs turns. Use it inside ``async with``: entering starts its actors (the provider
    actor and the tool pool) on its own runtime or the one it was given; leaving stops them.

    An agent holds no conversation: every method takes the history and returns what the turn
    added. One agent can serve many turns at once, from many tasks.
    """

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._stack: AsyncExitStack | None = None
        self._tool_owner: str | None = None
        """The outer agent that opened this one as its tool (``agent.as_tool()``)."""
        self._provider: ProviderRef | None = None
        self._telemetry = config.telemetry if config.telemetry is not None else TelemetryHub()
        self._model = config.inference.model or _default_model(config.provider)
        # Prices each model call (and reserves it against the budget, with one).
        self._meter = Meter(Pricer(config.prices, config.provider), config.budget, config.provider)
        # The metrics collector is a subscriber of this agent's turns only (a shared hub
        # may serve other agents, with collectors of their own).
        self._own_subscribers: tuple[Deliver, ...] = ()
        if config.metrics is not None:
            from ..telemetry import MetricsSubscriber

            self._own_subscribers = (MetricsSubscriber(config.metrics).on_event,)
        if config.lifecycle is not None:  # so is a lifecycle hook, through its adapter
            from ._lifecycle import LifecycleSubscriber

            lifecycle = LifecycleSubscriber(config.lifecycle).on_event
            self._own_subscribers = (*self._own_subscribers, lifecycle)
        self._pool: ActorRef | None = None
        # The pool's current runner, for non-streamed steps run in the turn's own task.
        self._tool_runner: ToolRunner | None = None
        self._approver = Approver(config.approval, config.defer)
        # Signs the pending approvals of its paused turns; each decided pause runs once.
        self._signer = Signer(config.approval_keys)
        self._decisions = Decisions()
        self._prefix: tuple[Message, ...] = (
            (Message.system(config.system_prompt),) if config.system_prompt else ()
        )
        self._last_turn_input_tokens: int | None = None
        # The last per-call overrides and the config they make: a caller passing the same
        # InferenceConfig object turn after turn (the usual case) merges it once.
        self._merged: tuple[InferenceConfig | None, InferenceConfig] = (None, config.inference)

    @property
    def config(self) -> AgentConfig:
        return self._config

    @property
    def telemetry(self) -> TelemetryHub:
        """The hub this agent's turns report to: ``agent.telemetry.subscribe(...)`` (see
        :mod:`kova.telemetry`)."""
        return self._telemetry

    @property
    def last_turn_input_tokens(self) -> int | None:
        """Input tokens the provider reported for the last call of the latest finished turn
        (``None`` before any, or if the provider reports none). Useful to decide when to
        compact history."""
        return self._last_turn_input_tokens

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Agent:
        require_trio("`async with agent`")
        check_asyncio_tools(self._config.registry)
        if self._stack is not None:
            raise BuildError("this agent is already open; build another for a second block")
        from ..actors import open_runtime
        from ._as_tool import check_agent_names, open_as_tool
        from ._provider_ref import ProviderRef, spawn_provider

        check_agent_names(self)
        config = self._config
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            runtime = config.runtime
            if runtime is None:
                runtime = await stack.enter_async_context(open_runtime())
            if isinstance(config.provider, ProviderRef):
                provider_ref = config.provider
            else:
                provider_ref = await spawn_provider(
                    runtime, config.provider, max_in_flight=config.provider_max_in_flight
                )
                if config.runtime is not None:
                    stack.push_async_callback(provider_ref.stop)
            # Retries run in the provider actor, with this agent's policy; a turn that is
            # observed carries its event stream, where the actor reports each retry.
            self._provider = provider_ref.with_retry(config.retry)

            def tool_pool() -> ToolPoolActor:
                return ToolPoolActor(
                    registry=config.registry,
                    max_concurrent=config.max_concurrent_tools,
                    approval=config.approval,
                    defer=config.defer,
                )

            self._pool = await runtime.spawn(tool_pool)  # named tool_pool, tool_pool-2, ...
            self._tool_runner = await self._pool.call(GetToolRunner())
            if len(config.registry):
                # The first tool call would otherwise import jsonschema on the event loop.
                await trio.to_thread.run_sync(load_validation, abandon_on_cancel=True)
            if self._meter.pricer.needs_sheet():  # likewise the price sheet (~150 ms)
                await trio.to_thread.run_sync(load_sheet, abandon_on_cancel=True)
            if config.runtime is not None:
                pool = self._pool
                stack.push_async_callback(lambda: runtime.stop(pool))
            # Agents given as tools (agent.as_tool()) open with this one and close before it
            # stops; one the host opened is used as it is (see open_as_tool).
            for inner in _inner_agents(config.registry):
                await stack.enter_async_context(open_as_tool(inner, self))
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        self._provider = self._pool = self._tool_runner = None
        if stack is not None:
            with lone_exceptions():  # pytest.raises(ProviderAuthError) around the block works
                return await stack.__aexit__(exc_type, exc, traceback)
        return None

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input: type[Any] = str,
        history: Sequence[Message] | Callable[[ToolContext[Any]], Sequence[Message]] | None = None,
        output: ResponseFormat | type[Any] | None = None,
        session: Session | None = None,
    ) -> AgentTool:
        """This agent as a tool another agent can call: each call runs one turn of this
        agent with the model's input as the prompt, and its final text is the result.

        Give the tool to the outer agent (``AgentBuilder().tool(researcher.as_tool())``);
        the outer agent's ``async with`` opens and closes this one (one already open is used
        as it is). Nest as deep as you like; see ``docs/agents-as-tools.md``. Within the outer
        turn the inner one is part of it: its events reach ``agent.stream()`` with
        ``event.path``, its tool calls ask the outer approval handler when this agent has
        none (a deferred one pauses the outer turn), its usage is in the outer
        ``response.usage`` and ``usage_by_agent`` and counts against the outer usage limits,
        cancelling the outer turn cancels it, and its failure is an error result for the
        outer model.

        Args:
            name: the tool's name (default: the agent's name, ``AgentBuilder.name``, or
                ``"agent"`` for an agent left unnamed, which then counts in the outer
                ``usage_by_agent`` under the tool's name).
            description: what the tool does, for the outer model (default: this agent's
                system prompt).
            input: ``str`` (the model passes one string, ``{"input": "..."}``, the prompt)
                or a pydantic model class (the model passes its fields; the prompt is the
                validated value's JSON).
            history: messages the inner turn sees before the prompt (a few examples, say),
                or a function of the call's :class:`~kova.tools.ToolContext` returning them
                (``ctx.deps`` is the outer turn's ``deps``); by default only the prompt.
            output: answer with structured output instead of text: a type pydantic
                validates or a :class:`~kova.ResponseFormat`, as for :meth:`run_structured`
                (re-asked up to ``output_retries`` times); the result is the value's JSON
                (``ToolResult.structured`` holds it as data).
            session: a :class:`~kova.sessions.Session` that keeps this agent's conversation
                across calls: each call's turn runs over it and is appended when it
                completes (a pause waits in it, and the outer resume continues it). Not with
                ``history`` or ``output``.

        Raises:
            BuildError: ``name`` is not a valid tool name.
            TypeError: ``input``, ``description`` or ``history`` has the wrong type.
        """
        from ._as_tool import make_agent_tool

        return make_agent_tool(self, name, description, input, history, output, session)

    @property
    def is_open(self) -> bool:
        """Inside its ``async with`` block (or ``kova.asyncio.open_agent``)."""
        return self._stack is not None

    def _running(self) -> tuple[ProviderRef, ActorRef]:
        if self._provider is None or self._pool is None:
            raise BuildError("the agent is not open: use `async with builder.build() as agent:`")
        return self._provider, self._pool

    # -- public API -----------------------------------------------------------------------

    async def run(
        self,
        history: HistoryInput,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        limits: UsageLimits | None = None,
        journal: SqliteJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> AgentResponse:
        """One turn over ``history``.

        Args:
            history: the conversation so far (the host's; never modified): a sequence of
                :class:`~kova.Message`, one ``Message``, or a ``str`` (one user message).
            config: per-call overrides; unset fields fall back to the agent's config.
            cancel: a token that cancels the turn from another task.
            limits: usage limits for this turn (replacing the agent's
                ``AgentBuilder.usage_limits``).
            journal: record every step in this :class:`~kova.durable.SqliteJournal` before
                moving on, so that running again with the same ``turn_id`` after a crash goes
                on where the turn stopped (see ``docs/durable.md``).
            turn_id: the turn's name in ``journal`` (required with it; one turn per id).

            deps: any object the turn's tools receive as ``ctx.deps`` (a ``@tool``
                parameter annotated :class:`~kova.tools.ToolContext`): the current user, a
                database session.
            session: a :class:`~kova.sessions.Session`: the turn runs over its history
                followed by ``history`` (the new prompt), and ``history`` plus the turn's
                ``new_messages`` are appended to it when the turn completes (nothing when it
                fails or is cancelled; a paused turn's pending state too). See
                ``docs/sessions.md``.
            context: a :class:`~kova.agent.ContextPolicy` for this turn, replacing the
                agent's (``AgentBuilder.context``; docs/context.md).

        Returns:
            The turn's outcome; persist ``response.new_messages``. With deferred approvals
            ``response.pending`` may be set: the turn paused (see :meth:`resume`).

        Raises:
            TypeError: ``history`` (or an option) has the wrong type; raised here, before
                anything is sent, naming the bad item's index and type.
            ProviderError: the provider failed (after retries, for retryable errors).
            MaxIterationsError: the model kept calling tools past ``max_iterations``.
            ContextBudgetExceededError: a prompt was over the budget; nothing was sent.
            UsageLimitExceeded: the turn reached a usage limit.
            TurnClaimedError: another runner holds ``turn_id`` in ``journal``.
            JournalError: the journal cannot be used, or ``turn_id`` names a turn that began
                from another history.
            TurnCancelled: ``cancel`` was cancelled. A caller's own cancel scope raises
                ``trio.Cancelled`` untouched instead. Either way no messages were produced
                and every request and tool call of the turn has stopped.
        """
        require_trio("agent.run()")
        messages = coerce_history(history)
        check_call_options(config, cancel)
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                self.run, config=config, cancel=cancel, limits=limits, journal=journal,
                turn_id=turn_id, deps=deps, context=context,
            )  # fmt: skip
            return await _session(session).run_turn(messages, again)  # type: ignore[no-any-return]
        if journal is not None or turn_id is not None:
            return await guarded(
                self._journaled(messages, config, limits, journal, turn_id, deps=deps), cancel
            )
        turn = self._start(messages, config, limits, context=context)
        if cancel is None:  # one coroutine frame fewer for every await of the turn
            return await self._turn(turn, config, deps=deps)
        return await guarded(self._turn(turn, config, deps=deps), cancel)

    async def resume(
        self,
        history: HistoryInput | None = None,
        pending: PendingApprovals | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        deps: object = None,
        journal: SqliteJournal | None = None,
        turn_id: str | None = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
        limits: UsageLimits | None = None,
    ) -> AgentResponse:
        """Continue a turn that paused for approvals, with the decisions made on ``pending``.

        Args:
            history: the paused turn's history plus its ``response.new_messages`` (so it
                ends with the assistant message that made the pending calls), in this
                process or another.
            pending: ``response.pending`` with every call approved or denied (restored with
                :meth:`PendingApprovals.from_json` if it was stored).
            config: per-call overrides, as for :meth:`run`.
            cancel: a token that cancels the resumed part.
            deps: as for :meth:`run` (not stored with the paused turn: pass them again).
            journal, turn_id: the journal a turn that ran with ``journal=`` paused in, and its
                id: the resumed part is recorded there as it goes, and resuming again after a
                crash (or ``run`` with this ``history`` and ``turn_id``) continues it without
                running finished calls again. A paused turn the journal does not hold is
                recorded from here on. See ``docs/durable.md``.
            session: the :class:`~kova.sessions.Session` the turn paused in: its history and
                pending calls come from there (``agent.resume(pending, session=session)``
                with ``pending = await session.pending()`` decided, or ``pending`` left out
                to resume with the stored decisions), and what the resumed part adds joins
                that turn in it when it completes.
            context: a context policy for the resumed part, as for :meth:`run`.
            limits: usage limits for the whole turn (replacing the agent's
                ``AgentBuilder.usage_limits``, which apply otherwise; never the stored
                value's).

        Returns:
            What the resumed part produced: ``history + new_messages`` is the whole turn. The
            calls that already ran are not run again; approved calls run, denied ones are
            answered in-band, then the loop goes on (and may pause again). ``usage`` and
            ``llm_calls`` are this part's; the turn's usage limits count the whole turn.

        Raises:
            TypeError: ``history``, ``pending`` or an option has the wrong type.
            ApprovalMismatchError: ``pending`` is not what this agent signed (changed at any
                level, signed with another key, or unsigned), its decisions were used already
                (a decided pause runs once: in this agent, or across processes with a
                journal), the history does not end with the assistant message the calls came
                from, a decision names an unknown call, or a call is undecided. Raised before
                anything runs.
            The errors of :meth:`run`. A cancelled or failed resume produces no messages, and
            ``pending`` can be resumed again.
        """
        require_trio("agent.resume()")
        if session is not None:  # kova.sessions holds the history and the pending state
            check_call_options(config, cancel)
            again = partial(
                self.resume, config=config, cancel=cancel, deps=deps, journal=journal,
                turn_id=turn_id, context=context, limits=limits,
            )  # fmt: skip
            return await _session(session).resume_turn(history, pending, again)
        messages = coerce_history(history)
        if pending is None:
            raise TypeError("agent.resume() needs the paused turn's pending (response.pending)")
        check_call_options(config, cancel)
        self._signer.verify_pending(pending)
        if journal is not None or turn_id is not None:
            # Once across processes: the journal records the decisions' nonce.
            journaled = self._journaled(
                messages, config, limits, journal, turn_id, deps=deps, pending=pending
            )
            return await guarded(journaled, cancel)
        self._decisions.take(pending.nonce)
        try:
            turn = self._resumed(messages, pending, config, context, limits)
            return await guarded(self._turn(turn, config, deps=deps), cancel)
        except BaseException:
            # Failed or cancelled: nothing was produced, the decisions may be used again.
            self._decisions.give_back(pending.nonce)
            raise

    def run_sync(
        self,
        history: HistoryInput,
        *,
        config: InferenceConfig | None = None,
        session: Session | None = None,
    ) -> AgentResponse:
        """:meth:`run` from plain synchronous code: ``agent.run_sync("Hello").text``.

        Opens the agent, runs the turn and closes it, in an event loop of its own: here
        with no loop running, in a worker thread it joins inside a running one (a Jupyter
        cell). Nothing is left running when it returns. Raises what :meth:`run` raises;
        ``RuntimeError`` from a trio task, ``BuildError`` if the agent is already open.
        """
        from ._sync import run_sync

        turn = partial(Agent.run, history=history, config=config, session=session)
        return run_sync(self, turn, what="run_sync")

    def resume_sync(
        self,
        history: HistoryInput | None = None,
        pending: PendingApprovals | None = None,
        *,
        config: InferenceConfig | None = None,
        deps: object = None,
        session: Session | None = None,
    ) -> AgentResponse:
        """:meth:`resume` from plain synchronous code, as :meth:`run_sync` is :meth:`run`'s:
        a script that ran ``response = agent.run_sync(...)``, saw ``response.pending`` and
        had the calls decided goes on with ``agent.resume_sync(history, response.pending)``.
        Raises what :meth:`resume` and :meth:`run_sync` raise."""
        from ._sync import run_sync

        turn = partial(
            Agent.resume, history=history, pending=pending, config=config, deps=deps,
            session=session,
        )  # fmt: skip
        return run_sync(self, turn, what="resume_sync")

    @overload
    async def run_structured(
        self,
        history: HistoryInput,
        output: type[OutputT],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> tuple[OutputT, AgentResponse]: ...

    @overload
    async def run_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> tuple[Any, AgentResponse]: ...

    async def run_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> tuple[Any, AgentResponse]:
        """A turn whose final answer is constrained to a JSON schema, validated.

        An answer that does not parse or validate is sent back to the model with the problem,
        up to ``output_retries`` times; every attempt's messages are in the response.

        Args:
            output: any type pydantic validates (a pydantic model, a dataclass, a
                ``TypedDict``, ``list[...]``, a primitive, a union: its schema is derived and
                the answer validated into it through one ``TypeAdapter``), or a
                :class:`~kova.ResponseFormat` (the result is the parsed JSON, checked against
                the schema with ``jsonschema``).
            output_retries: re-asks after an invalid answer (default: the agent's
                ``output_retries``, 1 unless the builder set it).
            limits: usage limits for each attempt (as for :meth:`run`).
            session: as for :meth:`run`: every attempt's messages are appended when the
                value validates.
            context: a context policy for each attempt (as for :meth:`run`).

        Returns:
            ``(value, response)``; ``response.output_retries`` counts the re-asks.

        Raises:
            TypeError: ``output`` is neither a response format nor a type pydantic validates.
            StructuredOutputError: the last answer is still not JSON or does not validate; it
                carries every raw answer (``attempts``) and the turn's response. Also raised
                when the turn pauses for deferred approvals: ``error.response.pending`` is
                set, and the turn can be resumed.
            TypeError: ``output`` is neither a ResponseFormat nor a pydantic model class.
        """
        from ._structured import run_structured_turn

        require_trio("agent.run_structured()")
        messages, retries = self._structured_options(history, config, cancel, output_retries)
        check_limits(limits)
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                self.run_structured, output=output, config=config, cancel=cancel,
                output_retries=output_retries, limits=limits, deps=deps, context=context,
            )  # fmt: skip
            return await _session(session).run_turn(messages, again, structured=True)  # type: ignore[no-any-return]

        def run(working: Sequence[Message], overrides: InferenceConfig) -> Awaitable[AgentResponse]:
            return self.run(
                working, config=overrides, cancel=cancel, limits=limits, deps=deps, context=context
            )

        return await run_structured_turn(run, messages, output, config, retries)

    @overload
    def stream_structured(
        self,
        history: HistoryInput,
        output: type[OutputT],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> AbstractAsyncContextManager[StructuredStream[OutputT]]: ...

    @overload
    def stream_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]: ...

    def stream_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]:
        """:meth:`run_structured`, streamed: ``async with agent.stream_structured(history,
        Model) as values: async for value in values``.

        Each value is the best-effort parse of the answer's JSON so far (plain JSON), the
        last one the validated value; afterwards ``values.value`` and ``values.response``
        hold the outcome (see :class:`~kova.agent.StructuredStream`). Errors are raised from
        the iteration (``UsageLimitExceeded`` too: ``limits`` apply to each attempt, as for
        :meth:`run_structured`); leaving the block early cancels the turn. With ``session``
        (as for :meth:`run`) the turn is appended before the validated value is handed on.
        """
        from ._structured import stream_structured_turn

        messages, retries = self._structured_options(history, config, cancel, output_retries)
        check_limits(limits)
        self._running()
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                self.stream_structured, output=output, config=config, cancel=cancel,
                output_retries=output_retries, limits=limits, deps=deps, context=context,
            )  # fmt: skip
            return _session(session).stream_structured_turn(messages, again)
        stream = partial(self.stream, limits=limits, deps=deps, context=context)
        return stream_structured_turn(stream, messages, output, config, retries, cancel)

    def _structured_options(
        self,
        history: HistoryInput,
        config: InferenceConfig | None,
        cancel: CancelToken | None,
        output_retries: int | None,
    ) -> tuple[tuple[Message, ...], int]:
        from ._structured import check_output_retries

        messages = coerce_history(history)
        check_call_options(config, cancel)
        check_output_retries(output_retries)
        retries = self._config.output_retries if output_retries is None else output_retries
        return messages, retries

    def run_structured_sync(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        output_retries: int | None = None,
        session: Session | None = None,
    ) -> tuple[Any, AgentResponse]:
        """:meth:`run_structured` from plain synchronous code, as :meth:`run_sync` runs it."""
        from ._sync import run_sync

        turn = partial(
            Agent.run_structured,
            history=history,
            output=output,
            config=config,
            output_retries=output_retries,
            session=session,
        )
        return run_sync(self, turn, what="run_structured_sync")

    def stream(
        self,
        history: HistoryInput | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        buffer: int = 16,
        resume: PendingApprovals | None = None,
        limits: UsageLimits | None = None,
        journal: SqliteJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: Session | None = None,
        context: ContextPolicy | None = None,
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentEvent]]:
        """Stream one turn: ``async with agent.stream(history) as events: async for e in events``.

        Text and thinking arrive as the provider streams them; every tool call is bracketed
        by ToolCallStarted / ToolCallFinished with the same call (a Finished never comes
        without its Started, denied and rejected calls included; a call left to a person
        ends with ToolCallDeferred instead); the last event is TurnCompleted with the
        response. Errors of the turn (see :meth:`run`) are raised from the iteration. Leaving
        the block early cancels the turn (no messages) and returns once everything it started
        stopped.

        The turn runs in the consumer's own task, pulled by the iteration: each network read
        is decoded and handed over without a task switch. With a ``cancel`` token it runs in
        a task of its own instead (the token cancels it from there), buffering up to
        ``buffer`` events.

        Args:
            resume: a decided ``response.pending``: stream the rest of that paused turn
                (``history`` as for :meth:`resume`); denied calls are bracketed too.
            limits: usage limits for this turn (not with ``resume``: a paused turn keeps its
                own).
            journal, turn_id: record the turn as :meth:`run` (with ``resume``, as
                :meth:`resume`) does. A turn continued from the journal streams what it does
                from there on.
            session: as for :meth:`run` (with ``resume``, as :meth:`resume`; ``history``
                left out): the turn is appended before its TurnCompleted is handed on.
            context: a context policy for this turn, as for :meth:`run`; compactions are
                :class:`~kova.agent.ContextCompacted` events.

        Raises:
            TypeError: on entering, ``history`` (or an option) has the wrong type.
            ApprovalMismatchError: on entering, ``resume`` does not fit ``history``.
        """
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                _stream_again, self, config=config, cancel=cancel, buffer=buffer,
                limits=limits, journal=journal, turn_id=turn_id, deps=deps, context=context,
            )  # fmt: skip
            return _session(session).stream_turn(history, again, resume)
        given: Any = history  # None (without a session) is refused on entering, named
        return TurnStream(
            self, given, config, cancel, buffer, resume, limits, journal, turn_id, deps, context
        )

    # -- the driver -----------------------------------------------------------------------

    def _start(
        self,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        turn_id: str | None = None,
        context: ContextPolicy | None = None,
    ) -> Turn:
        """A new turn core for ``history`` (already checked); ``context`` replaces the
        agent's context policy for this turn."""
        config = self._config
        if limits is None:
            limits = config.usage_limits
        else:
            check_limits(limits)
        registry = config.registry
        deferred = registry.has_deferred
        turn = Turn(
            history,
            prefix=self._prefix,
            tools=tuple(registry.definitions(deferred=False if deferred else None)),
            config=self._inference(overrides),
            system_prompt=config.system_prompt,
            limits=limits,
            max_iterations=config.max_iterations,
            context_budget=config.context_budget,
            turn_id=turn_id or new_turn_id(),
            agent=config.name,
        )
        if deferred:
            turn.set_tools(
                turn.tools,
                deferred=registry.definitions(deferred=True),
                search_limit=config.tool_search_limit,
            )
        self._use_context(turn, context, overrides)
        return turn

    def _use_context(
        self, turn: Turn, context: ContextPolicy | None, overrides: InferenceConfig | None
    ) -> None:
        """Give ``turn`` the call's context policy, else the agent's."""
        policy = context if context is not None else self._config.context
        if policy is not None:
            model = (overrides.model if overrides is not None else None) or self._model
            turn.set_context(policy, model=model)

    def _resumed(
        self,
        history: tuple[Message, ...],
        pending: PendingApprovals,
        overrides: InferenceConfig | None,
        context: ContextPolicy | None = None,
        limits: UsageLimits | None = None,
    ) -> Turn:
        """The turn core of a paused turn, with ``pending``'s decisions (checked here), under
        ``limits`` (default: the agent's)."""
        config = self._config
        if limits is None:
            limits = config.usage_limits
        else:
            check_limits(limits)
        turn = Turn.resume(
            history,
            pending,
            tools=config.registry.definitions(),
            config=self._inference(overrides),
            system_prompt=config.system_prompt,
            limits=limits,
            max_iterations=config.max_iterations,
            context_budget=config.context_budget,
        )
        turn._agent = config.name
        self._use_context(turn, context, overrides)
        return turn

    def _open_journaled(
        self,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        journal: object,
        turn_id: object,
        pending: PendingApprovals | None = None,
    ) -> AbstractAsyncContextManager[tuple[Turn, Journaled]]:
        """The journal's claim on the turn ``turn_id``, and the turn to drive. The journal
        drives this agent's own loop: kova.durable imports the agent, not the reverse."""
        if journal is None:
            raise TypeError(
                "turn_id= names a turn in a journal: pass journal= (a kova.durable.SqliteJournal)"
            )
        open_turn = getattr(journal, "open_turn", None)
        if open_turn is None:
            raise TypeError(
                f"journal must be a kova.durable.SqliteJournal, got {type(journal).__name__}"
            )
        opened: AbstractAsyncContextManager[tuple[Turn, Journaled]] = open_turn(
            self, history, overrides, limits, turn_id, pending
        )
        return opened

    async def _journaled(
        self,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        journal: object,
        turn_id: object,
        *,
        deps: object = None,
        pending: PendingApprovals | None = None,
    ) -> AgentResponse:
        opening = self._open_journaled(history, overrides, limits, journal, turn_id, pending)
        async with opening as opened:
            turn, journaled = opened
            return await self._turn(turn, overrides, journaled, deps=deps)

    async def _turn(
        self,
        turn: Turn,
        overrides: InferenceConfig | None,
        journaled: Journaled | None = None,
        *,
        deps: object = None,
    ) -> AgentResponse:
        """One non-streamed turn: the loop of :meth:`_steps`, its one event the outcome."""
        steps = self._steps(turn, overrides, streamed=False, journaled=journaled, deps=deps)
        try:
            async for event in steps:
                if isinstance(event, TurnCompleted):
                    return event.response
        finally:
            await steps.aclose()
        raise AssertionError("a turn ends with TurnCompleted or an error")  # pragma: no cover

    async def _inner_turn(
        self,
        history: tuple[Message, ...],
        site: CallSite | None,
        resume: InnerPause | None,
        overrides: InferenceConfig | None = None,
    ) -> AgentResponse:
        """One turn of this agent run by an agent tool (``as_tool``) for the outer call
        ``site`` (``None`` when the tool is called outside an agent): streamed into the outer
        stream when that is streamed; a pause is left in the outer step's nest."""
        from ..tools import current_tool_context

        context = current_tool_context()
        deps = context.deps if context is not None else None
        if site is None:
            return await self.run(history, config=overrides, deps=deps)
        if resume is not None:
            turn = self._resumed(history, resume.pending, overrides)
        else:
            turn = self._start(history, overrides, None)
        emit = site.emit
        steps = self._steps(turn, overrides, streamed=emit is not None, deps=deps, site=site)
        # Each level adds its own call's id: a deeper agent's events arrive with theirs.
        prefix = (site.call.id,)
        try:
            async for event in steps:
                if type(event) is TurnCompleted:
                    response = event.response
                    break
                assert emit is not None  # a turn that is not streamed yields its outcome only
                await emit(nested(event, prefix))
            else:  # pragma: no cover
                raise AssertionError("a turn ends with TurnCompleted or an error")
        finally:
            await steps.aclose()
        if response.pending is not None:
            from ._approvals import InnerPause, call_fingerprint

            call = site.call
            site.nest.paused[call.id] = InnerPause(
                agent=self._config.name,
                history=(*history, *response.new_messages),
                pending=response.pending,
                fingerprint=call_fingerprint(call.name, call.input),
            )
        return response

    async def _steps(
        self,
        turn: Turn,
        overrides: InferenceConfig | None,
        *,
        streamed: bool,
        journaled: Journaled | None = None,
        deps: object = None,
        site: CallSite | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Drive ``turn`` (the turn core decides; this does the I/O), as the events it
        produces (the last one TurnCompleted). ``site``: the outer tool call this turn serves
        (an agent used as a tool): its model calls, usage and tool calls count in every
        enclosing turn too.

        An async generator, driven by whoever iterates it: :meth:`stream`'s consumer, or
        :meth:`_turn`. It holds no cancel scope or nursery across a ``yield`` (trio forbids
        that): the provider stream and the tool pool's event stream are plain context
        managers read in the iterating task. Non-streamed (``streamed=False``), it yields
        only the final TurnCompleted.
        """
        provider, pool = self._running()
        config = self._config
        registry = config.registry
        # None when nobody listens: then no event is built at all.
        emitter = self._telemetry.emitter(self._own_subscribers)
        inference = self._inference(overrides)
        model = inference.model or self._model
        if emitter is not None:
            emitter.emit(
                TurnStarted(
                    turn_id=emitter.turn_id,
                    time=trio.current_time(),
                    agent=config.name,
                    provider=provider.name,
                    model=model,
                    streamed=streamed,
                    parent_id=_parent_span(site),
                )
            )
        finished = False
        meter = self._meter
        held: Hold | None = None  # a call's reservation against the budget
        # The turns enclosing this one (an agent used as a tool), innermost first.
        outer = site.nest.turns if site is not None else ()
        # This agent's key in their usage_by_agent: its name, or its tool's if left unnamed.
        usage_key = config.name
        if site is not None and usage_key == DEFAULT_NAME:
            usage_key = site.call.name
        path = site.path if site is not None else ()
        approver: Approver | None = self._approver
        if not self._approver.active:
            approver = site.nest.approver if site is not None else None
        try:
            if streamed:
                # A resumed turn's denials were decided out of band: bracket them here.
                for decided in _decided_events(turn):
                    yield decided
            step = turn.next_step()
            while True:
                for core_event in turn.take_events():  # what the core did by itself
                    if streamed:
                        yield core_event
                if type(step) is Compact:
                    # A summary of older messages, asked for by the context policy.
                    summarizer = step.provider
                    if summarizer is None:
                        summary = await provider._complete_checked(step.request)
                    else:
                        async with summarizer.open():
                            summary = await summarizer.chat_completion(step.request)
                    turn.compacted(summary)
                    if journaled is not None:
                        await journaled.saved(turn)
                elif type(step) is CallModel:
                    chat = step.request
                    if step.count_tokens:
                        turn.tokens_counted(await provider.count_tokens(chat))
                        step = turn.next_step()
                        continue
                    for enclosing in outer:
                        enclosing._inner_request()
                    if meter.budget is not None:  # BudgetExceeded: nothing is sent
                        held = await meter.reserve(chat, model)
                    call = (
                        None
                        if emitter is None
                        else ModelCall(emitter, provider, inference, model, meter.pricer)
                    )
                    if not streamed:
                        if call is None:
                            # The history was checked at the boundary and every message added
                            # since is kova's own: no second check of the whole history per call.
                            response = meter.priced(await provider._complete_checked(chat), model)
                        else:
                            response = await call.complete(chat, streamed=False)
                    else:
                        # Retries (before any content) happen in the provider actor.
                        accumulator = ResponseAccumulator(
                            None if call is None else call.first_token
                        )
                        leased = provider if call is None else call.start(streamed=True)
                        try:
                            async with leased._stream_checked(chat) as lease:
                                # The lease's first batch, then the response's own batches
                                # read directly: no iterator in between, per network read.
                                batch: Sequence[StreamEvent] = lease.first
                                rest = lease.rest.__anext__
                                arguments: ToolArguments | None = None
                                while True:
                                    accumulator.feed(batch)  # and the first token's event
                                    for event in batch:
                                        if isinstance(event, _VISIBLE):
                                            yield event
                                        elif isinstance(event, TOOL_STREAM):
                                            if arguments is None:
                                                arguments = ToolArguments()
                                            delta = arguments.feed(event)
                                            if delta is not None:
                                                yield delta
                                    try:
                                        batch = await rest()
                                    except StopAsyncIteration:
                                        break
                                response = meter.priced(accumulator.finish(), model)
                        except BaseException as exc:
                            if call is not None:
                                call.failed(exc)
                            raise
                        if call is not None:
                            call.finished(response)
                    if held is not None:
                        await meter.settle(held, response)
                        held = None
                    turn.model_replied(response)
                    for enclosing in outer:
                        enclosing._inner_replied(usage_key, response.usage)
                    if journaled is not None:
                        await journaled.saved(turn)
                elif type(step) is RunTools:
                    calls = step.calls
                    for enclosing in outer:
                        enclosing._inner_tools(len(calls))
                    answered: dict[str, ToolResult] = {}
                    if journaled is not None:
                        # Recorded results are not run again; nor are interrupted calls
                        # whose tools may not run twice. The rest is recorded as started.
                        answered, calls = journaled.split(step, turn)
                        await journaled.started(calls)
                        if streamed:  # answered from the journal: still bracketed
                            for use in step.calls:
                                if use.id in answered:
                                    yield ToolCallStarted(call=use)
                                    yield ToolCallFinished(call=use, result=answered[use.id])
                    results: tuple[DeferredResult, ...] = ()
                    nest = Nest(
                        path=path,
                        turns=(turn, *outer),
                        approver=approver,
                        streamed=streamed,
                        resumes=dict(step.resumes) if step.resumes else None,
                    )
                    if calls:
                        request = RunToolCalls(
                            calls=calls,
                            telemetry=None if emitter is None else (emitter, emitter.turn_id),
                            approved=step.approved,
                            turn_id=step.turn_id,
                            # What the tools' ToolContext carries, and this task's context
                            # variables (the tools run in the pool's task).
                            agent=config.name,
                            deps=deps,
                            caller=contextvars.copy_context(),
                            nest=nest,
                        )
                        if streamed or journaled is not None:
                            async with pool.stream(request) as items:
                                async for item in items:
                                    if isinstance(item, tuple):
                                        results = item
                                        continue
                                    if journaled is not None and not item.path:
                                        await journaled.observed(item)
                                    if streamed:
                                        yield item
                        else:
                            # No actor round trip: the turn's task runs the step (as it
                            # sends its model calls), on the pool's policy.
                            runner = self._tool_runner
                            if runner is None or runner.closed:  # the pool restarted
                                runner = await pool.call(GetToolRunner())
                                self._tool_runner = runner
                            results = await runner.run_in_caller(request)
                    if answered:
                        results = _merge_results(step.calls, answered, calls, results)
                    for call_id, pause in nest.paused.items():
                        turn._inner_paused(call_id, pause)
                    turn.tools_finished(results)
                    if journaled is not None:
                        await journaled.saved(turn)
                    # Read for every model call: a tool server's list_changed reaches the
                    # model on its very next step. (The registry never awaits: this is the
                    # same read the pool would do, without an actor round trip.)
                    if registry.has_deferred:
                        turn._offer(
                            registry.definitions(deferred=False),
                            registry.definitions(deferred=True),
                        )
                    else:
                        turn._offer(registry.definitions())
                else:
                    assert isinstance(step, Finished | AwaitApproval)
                    last = turn.last_usage
                    if last is not None:
                        self._last_turn_input_tokens = last.input_tokens
                    if emitter is not None:
                        finished = True
                        emitter.emit(
                            TurnFinished(
                                turn_id=emitter.turn_id,
                                time=trio.current_time(),
                                outcome="ok",
                                usage=turn.usage,
                                llm_calls=turn.llm_calls,
                            )
                        )
                    yield TurnCompleted(response=self._signer.sealed(step.response))
                    return
                step = turn.next_step()
        except BaseException as exc:
            if held is not None:
                await meter.release(held, exc)
            if emitter is not None and not finished:
                outcome, error_type = outcome_of(exc)
                emitter.emit(
                    TurnFinished(
                        turn_id=emitter.turn_id,
                        time=trio.current_time(),
                        outcome=outcome,
                        error_type=error_type,
                        usage=turn.usage,
                        llm_calls=turn.llm_calls,
                    )
                )
            raise

    def _inference(self, overrides: InferenceConfig | None) -> InferenceConfig:
        """The agent's inference config with ``overrides`` merged in (cached for the last
        overrides object: configs are frozen)."""
        last, merged = self._merged
        if overrides is last:
            return merged
        merged = self._config.inference.merged(overrides)
        self._merged = (overrides, merged)
        return merged


def _merge_results(
    calls: tuple[ToolUse, ...],
    answered: dict[str, ToolResult],
    ran_calls: tuple[ToolUse, ...],
    ran: tuple[DeferredResult, ...],
) -> tuple[DeferredResult, ...]:
    """A step's outcomes in its calls' order: the answers a journal had, and the rest run."""
    by_id = dict(zip((call.id for call in ran_calls), ran, strict=True))
    return tuple(answered[call.id] if call.id in answered else by_id[call.id] for call in calls)


def _decided_events(turn: Turn) -> list[AgentEvent]:
    """ToolCallStarted / ToolCallFinished for the calls a person denied on a resumed turn
    (the approved ones are bracketed by the tool pool as they run)."""
    events: list[AgentEvent] = []
    for call, result in turn.decided_denials():
        events.append(ToolCallStarted(call=call))
        events.append(ToolCallFinished(call=call, result=result))
    return events


def check_limits(limits: object) -> None:
    """Raises ``TypeError`` unless ``limits`` is a :class:`UsageLimits` or ``None``."""
    if limits is not None and not isinstance(limits, UsageLimits):
        raise TypeError(f"limits must be a kova.agent.UsageLimits, got {type(limits).__name__}")


def _default_model(provider: object) -> str | None:
    """The model a provider sends when the request names none, if it says."""
    for owner in (provider, getattr(provider, "codec", None), getattr(provider, "config", None)):
        model = getattr(owner, "model", None)
        if isinstance(model, str):
            return model
    return None


_VISIBLE = (TextDelta, ThinkingDelta)
"""The provider stream events a streamed turn passes on (the rest build the response)."""


def _inner_agents(registry: ToolRegistry) -> list[Agent]:
    """The agents given to this one as tools (``as_tool``), each once."""
    from ._as_tool import AgentTool

    agents: list[Agent] = []
    for tool in registry:
        if isinstance(tool, AgentTool) and all(tool.agent is not seen for seen in agents):
            agents.append(tool.agent)
    return agents


def _parent_span(site: CallSite | None) -> int | None:
    """The span of the observed tool call a nested turn runs in (``None`` for a turn the
    application started)."""
    if site is None:
        return None
    scope = current_scope()
    return None if scope is None else scope[1]


def _session(session: object) -> Session:
    """``session`` if it is a :class:`kova.sessions.Session` (kova.sessions builds on the
    agent, so the agent takes it by what it does)."""
    if not callable(getattr(session, "run_turn", None)):
        raise TypeError(f"session must be a kova.sessions.Session, got {type(session).__name__}")
    return session  # type: ignore[return-value]


def _stream_again(
    agent: Agent, history: tuple[Message, ...], resume: PendingApprovals | None, **options: Any
) -> AbstractAsyncContextManager[AsyncIterator[AgentEvent]]:
    """``agent.stream`` over a session's history (what a streamed session turn opens)."""
    return agent.stream(history, resume=resume, **options)
