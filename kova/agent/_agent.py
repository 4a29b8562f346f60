"""The agent: a stateless driver of the turn core over caller-owned history.

``run(history)`` takes the conversation the host keeps and returns the messages the turn
produced; it holds no conversation state between turns. What a turn does next (call the
model, run tools, wait for decisions, finish) and every limit are decided by the turn core,
:class:`~kova.agent.Turn` (``_turn``: no I/O in it); this module drives it on trio: provider
calls through the provider actor (streamed or not), tool steps on the agent's tool runner in
the turn's own task, telemetry, and cancellation.

A turn that fails or is cancelled produces no messages: they are built locally and handed
over only in the returned response.

The agent's configuration is :class:`~kova.agent.AgentConfig` (``_config``); the events of
one observed provider call come from ``_model_call``; running a turn under a
:class:`~kova.agent.CancelToken` is in ``_cancel``.
"""

from __future__ import annotations

import functools
from contextlib import AsyncExitStack
from functools import partial
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

import trio

from .._door import check_asyncio_tools, require_trio
from .._errors import BuildError
from .._groups import lone_exceptions
from .._log import get_logger
from .._observe import TelemetryHub
from ..tools._validate import load_validation
from ._cancel import guarded
from ._cost import load_sheet
from ._driver_context import DriverContext, check_limits
from ._input import HistoryInput, check_call_options, coerce_history
from ._loop import run_journaled, run_turn
from ._streaming import TurnStream

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._models import InferenceConfig, Message, ResponseFormat
    from ..tools import ToolContext, ToolRegistry
    from ._approvals import PendingApprovals
    from ._as_tool import AgentTool
    from ._cancel import CancelToken
    from ._config import AgentConfig
    from ._context import ContextPolicy
    from ._events import AgentEvent, AgentResponse
    from ._guards import Guard
    from ._limits import UsageLimits
    from ._seams import OpenAgent, TurnJournal, TurnSession
    from ._structured import StructuredStream

__all__ = ["Agent"]

log = get_logger(__name__)

OutputT = TypeVar("OutputT")
P = ParamSpec("P")
R = TypeVar("R")


def _sync_door(
    method: Callable[Concatenate[Agent, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Agent, P], R]:
    """``method`` (an async method of the agent) from plain synchronous code: the agent
    opened for the call, in an event loop of its own (``_sync``). It keeps ``method``'s
    signature for type checkers (overloads too: called with ``method`` alone, mypy maps
    them through the ParamSpec) and for help() (``__wrapped__``)."""
    what = f"{method.__name__}_sync"

    def call(self: Agent, /, *args: P.args, **kwargs: P.kwargs) -> R:
        from ._sync import run_sync

        return run_sync(self, lambda agent: method(agent, *args, **kwargs), what=what)

    functools.update_wrapper(call, method)
    call.__name__ = what
    call.__qualname__ = f"Agent.{what}"
    return call


class Agent:
    """Runs turns. Use it inside ``async with``: entering starts its provider actor (on its own
    runtime or the one it was given) and its tool runner; leaving stops them.

    An agent holds no conversation: every method takes the history and returns what the turn
    added. One agent can serve many turns at once, from many tasks.
    """

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._stack: AsyncExitStack | None = None
        self.tool_owner: str | None = None
        """The outer agent that opened this one as its tool (``agent.as_tool()``), while it
        holds it open (kova's own bookkeeping)."""
        telemetry = config.telemetry if config.telemetry is not None else TelemetryHub()
        model = config.inference.model or _default_model(config.provider)
        # What the drivers of its turns use; the provider and tool runner once it is open.
        self._context = DriverContext(config, telemetry, model)

    @property
    def config(self) -> AgentConfig:
        return self._config

    @property
    def telemetry(self) -> TelemetryHub:
        """The hub this agent's turns report to: ``agent.telemetry.subscribe(...)`` (see
        :mod:`kova.telemetry`)."""
        return self._context.telemetry

    @property
    def last_turn_input_tokens(self) -> int | None:
        """Input tokens the provider reported for the last call of the latest finished turn
        (``None`` before any, or if the provider reports none). Useful to decide when to
        compact history."""
        return self._context.last_input_tokens

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
            if isinstance(config.provider, ProviderRef):
                provider_ref = config.provider
            else:
                runtime = config.runtime
                if runtime is None:
                    runtime = await stack.enter_async_context(open_runtime())
                provider_ref = await spawn_provider(
                    runtime, config.provider, max_in_flight=config.provider_max_in_flight
                )
                if config.runtime is not None:
                    stack.push_async_callback(provider_ref.stop)

            context = self._context
            context.opened(provider_ref)
            if len(config.registry):
                # The first tool call would otherwise import jsonschema on the event loop.
                await trio.to_thread.run_sync(load_validation, abandon_on_cancel=True)
            # Likewise the price sheet, when something will read costs as the agent runs.
            reads_costs = config.metrics is not None or config.defer is not None
            reads_costs = reads_costs or context.telemetry.listening
            if context.meter.wants_sheet(config.usage_limits, reads_costs):
                await trio.to_thread.run_sync(load_sheet, abandon_on_cancel=True)
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
        session: TurnSession | None = None,
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

    def driver_context(self) -> DriverContext:
        """What kova's drivers of this agent's turns use (the journal, agents as tools,
        the Temporal worker): see ``kova.agent._driver_context``. Not a stable API.

        Raises:
            BuildError: the agent is not open.
        """
        if self._stack is None:
            raise BuildError("the agent is not open: use `async with builder.build() as agent:`")
        return self._context

    # -- public API -----------------------------------------------------------------------

    async def run(
        self,
        history: HistoryInput,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        limits: UsageLimits | None = None,
        journal: TurnJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: TurnSession | None = None,
        context: ContextPolicy | None = None,
        guards: Sequence[Guard] | None = None,
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
            guards: guards for this turn, replacing the agent's (``AgentBuilder.guards``;
                docs/guardrails.md): a trip raises ``GuardrailTripped``.

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
                turn_id=turn_id, deps=deps, context=context, guards=guards,
            )  # fmt: skip
            return await _session(session).run_turn(messages, again)  # type: ignore[no-any-return]
        if journal is not None or turn_id is not None:
            driver = self.driver_context()
            journaled = run_journaled(
                driver, messages, config, limits, journal, turn_id, deps=deps, guards=guards
            )
            return await guarded(journaled, cancel)
        if limits is not None:
            check_limits(limits)
        driver = self.driver_context()
        turn = driver.start_turn(messages, config, limits, context=context)
        if cancel is None:  # one coroutine frame fewer for every await of the turn
            return await run_turn(driver, turn, config, deps=deps, guards=guards)
        return await guarded(run_turn(driver, turn, config, deps=deps, guards=guards), cancel)

    async def resume(
        self,
        history: HistoryInput | None = None,
        pending: PendingApprovals | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        deps: object = None,
        journal: TurnJournal | None = None,
        turn_id: str | None = None,
        session: TurnSession | None = None,
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
            return await _session(session).resume_turn(
                history, pending, again, journaled=journal is not None or turn_id is not None
            )
        messages = coerce_history(history)
        if pending is None:
            raise TypeError("agent.resume() needs the paused turn's pending (response.pending)")
        check_call_options(config, cancel)
        self._context.signer.verify_pending(pending)
        driver = self.driver_context()
        if journal is not None or turn_id is not None:
            # Once across processes: the journal records the decisions' nonce.
            journaled = run_journaled(
                driver, messages, config, limits, journal, turn_id, deps=deps, pending=pending
            )
            return await guarded(journaled, cancel)
        driver.decisions.take(pending.nonce)
        try:
            turn = driver.resume_turn(messages, pending, config, context, limits)
            return await guarded(run_turn(driver, turn, config, deps=deps), cancel)
        except BaseException:
            # Failed or cancelled: nothing was produced, the decisions may be used again.
            driver.decisions.give_back(pending.nonce)
            raise

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
        session: TurnSession | None = None,
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
        session: TurnSession | None = None,
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
        session: TurnSession | None = None,
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
        messages, retries = _structured_options(self, history, config, cancel, output_retries)
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
        buffer: int = 16,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: TurnSession | None = None,
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
        buffer: int = 16,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: TurnSession | None = None,
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
        buffer: int = 16,
        limits: UsageLimits | None = None,
        deps: object = None,
        session: TurnSession | None = None,
        context: ContextPolicy | None = None,
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]:
        """:meth:`run_structured`, streamed: ``async with agent.stream_structured(history,
        Model) as values: async for value in values``.

        Each value is the best-effort parse of the answer's JSON so far (plain JSON), the
        last one the validated value; afterwards ``values.value`` and ``values.response``
        hold the outcome (see :class:`~kova.agent.StructuredStream`). Errors are raised from
        the iteration (``UsageLimitExceeded`` too: ``limits`` apply to each attempt, as for
        :meth:`run_structured`); leaving the block early cancels the turn. With ``session``
        (as for :meth:`run`) the turn is appended before the validated value is handed on;
        ``buffer`` is as for :meth:`stream`.
        """
        from ._needs_async_with import NeedsAsyncWith
        from ._structured import stream_structured_turn

        messages, retries = _structured_options(self, history, config, cancel, output_retries)
        check_limits(limits)
        self.driver_context()
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                self.stream_structured, output=output, config=config, cancel=cancel,
                output_retries=output_retries, buffer=buffer, limits=limits, deps=deps,
                context=context,
            )  # fmt: skip
            return _session(session).stream_structured_turn(messages, again)
        stream = partial(self.stream, buffer=buffer, limits=limits, deps=deps, context=context)
        return NeedsAsyncWith(
            stream_structured_turn(stream, messages, output, config, retries, cancel),
            "agent.stream_structured(...)",
            "values",
        )

    # -- from plain synchronous code: the async methods' own signatures (see _sync_door) ---

    run_sync = _sync_door(run)
    run_sync.__doc__ = """:meth:`run` from plain synchronous code: ``agent.run_sync("Hello").text``.

    Opens the agent, runs the turn and closes it, in an event loop of its own: here with no
    loop running, in a worker thread it joins inside a running one (a Jupyter cell). Nothing
    is left running when it returns. Takes and raises what :meth:`run` does; ``RuntimeError``
    from a trio task, ``BuildError`` if the agent is already open.
    """
    resume_sync = _sync_door(resume)
    resume_sync.__doc__ = """:meth:`resume` from plain synchronous code, as :meth:`run_sync` is
    :meth:`run`'s: a script that ran ``response = agent.run_sync(...)``, saw
    ``response.pending`` and had the calls decided goes on with ``agent.resume_sync(history,
    response.pending)``. Takes and raises what :meth:`resume` does, and what :meth:`run_sync`
    raises."""
    run_structured_sync = _sync_door(run_structured)
    run_structured_sync.__doc__ = """:meth:`run_structured` from plain synchronous code, as
    :meth:`run_sync` runs :meth:`run`."""

    def stream(
        self,
        history: HistoryInput | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        buffer: int = 16,
        resume: PendingApprovals | None = None,
        limits: UsageLimits | None = None,
        journal: TurnJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: TurnSession | None = None,
        context: ContextPolicy | None = None,
        guards: Sequence[Guard] | None = None,
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
            guards: as for :meth:`run`; their verdicts are
                :class:`~kova.agent.GuardPassed` / :class:`~kova.agent.GuardTripped` events.

        Raises:
            TypeError: on entering, ``history`` (or an option) has the wrong type.
            ApprovalMismatchError: on entering, ``resume`` does not fit ``history``.
        """
        if session is not None:  # kova.sessions loads before and appends after
            again = partial(
                _stream_again, self, config=config, cancel=cancel, buffer=buffer,
                limits=limits, journal=journal, turn_id=turn_id, deps=deps, context=context,
                guards=guards,
            )  # fmt: skip
            return _session(session).stream_turn(
                history, again, resume, journaled=journal is not None or turn_id is not None
            )
        given: Any = history  # None (without a session) is refused on entering, named
        return TurnStream(
            self,
            given,
            config,
            cancel,
            buffer,
            resume,
            limits,
            journal,
            turn_id,
            deps,
            context,
            guards,
        )


def _structured_options(
    agent: Agent,
    history: HistoryInput,
    config: InferenceConfig | None,
    cancel: CancelToken | None,
    output_retries: int | None,
) -> tuple[tuple[Message, ...], int]:
    """A structured turn's arguments checked: its history, and the re-asks it allows."""
    from ._structured import check_output_retries

    messages = coerce_history(history)
    check_call_options(config, cancel)
    check_output_retries(output_retries)
    retries = agent.config.output_retries if output_retries is None else output_retries
    return messages, retries


def _default_model(provider: object) -> str | None:
    """The model a provider sends when the request names none, if it says."""
    for owner in (provider, getattr(provider, "codec", None), getattr(provider, "config", None)):
        model = getattr(owner, "model", None)
        if isinstance(model, str):
            return model
    return None


def _inner_agents(registry: ToolRegistry) -> list[OpenAgent]:
    """The agents given to this one as tools (``as_tool``), each once."""
    from ._as_tool import AgentTool

    agents: list[OpenAgent] = []
    for tool in registry:
        if isinstance(tool, AgentTool) and all(tool.agent is not seen for seen in agents):
            agents.append(tool.agent)
    return agents


def _session(session: object) -> TurnSession:
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
