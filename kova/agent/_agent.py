"""The agent: a stateless loop over caller-owned history.

``run(history)`` takes the conversation the host keeps and returns the messages the turn
produced; it holds no conversation state between turns. One turn:

1. working messages = system prompt + history;
2. up to ``max_iterations + 1`` provider calls, each preceded by the heuristic
   context-budget guard (over budget raises before anything is sent);
3. a reply that stops for tool use has its tool calls run concurrently by the tool pool
   actor (capped), their results appended in call order, and the loop continues;
4. any other stop ends the turn with an :class:`AgentResponse`.

A turn that fails or is cancelled produces no messages: they are built locally and handed
over only in the returned response.

The agent's configuration is :class:`~kova.agent.AgentConfig` (``_config``); the events of
one observed provider call come from ``_model_call``; running a turn under a
:class:`~kova.agent.CancelToken` is in ``_cancel``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, overload

import trio

from .._door import check_asyncio_tools, require_trio
from .._errors import BuildError, ContextBudgetExceededError, MaxIterationsError
from .._groups import lone_exceptions
from .._log import get_logger
from .._models import (
    ChatRequest,
    InferenceConfig,
    Message,
    ResponseFormat,
    StopKind,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    ToolResult,
    Usage,
)
from .._observe import TelemetryEvent, TelemetryHub, TurnFinished, TurnStarted
from ..providers import heuristic_count_tokens
from ..tools._validate import load_validation
from ._accumulate import ResponseAccumulator
from ._cancel import guarded, stream_in_task
from ._events import AgentEvent, AgentResponse, TurnCompleted
from ._input import HistoryInput, check_call_options, coerce_history
from ._model_call import ModelCall, outcome_of
from ._tool_pool import RunToolCalls

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._models import StreamEvent
    from ..actors import ActorRef
    from ._cancel import CancelToken
    from ._config import AgentConfig
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
        self._provider: ProviderRef | None = None
        self._telemetry = config.telemetry if config.telemetry is not None else TelemetryHub()
        self._model = config.inference.model or _default_model(config.provider)
        # The metrics collector is a subscriber of this agent's turns only (a shared hub
        # may serve other agents, with collectors of their own).
        self._own_subscribers: tuple[Callable[[TelemetryEvent], None], ...] = ()
        if config.metrics is not None:
            from ..telemetry import MetricsSubscriber

            self._own_subscribers = (MetricsSubscriber(config.metrics).on_event,)
        self._pool: ActorRef | None = None
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
        from ._provider_ref import ProviderRef, spawn_provider
        from ._tool_pool import ToolPoolActor

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
            # observed carries a hook that reports each retry to its event stream.
            self._provider = provider_ref.with_retry(config.retry)

            def tool_pool() -> ToolPoolActor:
                return ToolPoolActor(
                    registry=config.registry,
                    max_concurrent=config.max_concurrent_tools,
                    approval=config.approval,
                    lifecycle=config.lifecycle,
                )

            self._pool = await runtime.spawn(tool_pool)  # named tool_pool, tool_pool-2, ...
            if len(config.registry):
                # The first tool call would otherwise import jsonschema on the event loop.
                await trio.to_thread.run_sync(load_validation, abandon_on_cancel=True)
            if config.runtime is not None:
                pool = self._pool
                stack.push_async_callback(lambda: runtime.stop(pool))
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
        self._provider = self._pool = None
        if stack is not None:
            with lone_exceptions():  # pytest.raises(ProviderAuthError) around the block works
                return await stack.__aexit__(exc_type, exc, traceback)
        return None

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
    ) -> AgentResponse:
        """One turn over ``history``.

        Args:
            history: the conversation so far (the host's; never modified): a sequence of
                :class:`~kova.Message`, one ``Message``, or a ``str`` (one user message).
            config: per-call overrides; unset fields fall back to the agent's config.
            cancel: a token that cancels the turn from another task.

        Returns:
            The turn's outcome; persist ``response.new_messages``.

        Raises:
            TypeError: ``history`` (or an option) has the wrong type; raised here, before
                anything is sent, naming the bad item's index and type.
            ProviderError: the provider failed (after retries, for retryable errors).
            MaxIterationsError: the model kept calling tools past ``max_iterations``.
            ContextBudgetExceededError: a prompt was over the budget; nothing was sent.
            Cancelled: ``cancel`` was cancelled. A caller's own cancel scope raises
                ``trio.Cancelled`` untouched instead. Either way no messages were produced
                and every request and tool call of the turn has stopped.
        """
        require_trio("agent.run()")
        messages = coerce_history(history)
        check_call_options(config, cancel)
        return await guarded(self._turn(messages, config), cancel)

    def run_sync(
        self, history: HistoryInput, *, config: InferenceConfig | None = None
    ) -> AgentResponse:
        """:meth:`run` from plain synchronous code: ``agent.run_sync("Hello").text``.

        Opens the agent, runs the turn and closes it, in an event loop of its own: here
        with no loop running, in a worker thread it joins inside a running one (a Jupyter
        cell). Nothing is left running when it returns. Raises what :meth:`run` raises;
        ``RuntimeError`` from a trio task, ``BuildError`` if the agent is already open.
        """
        from ._sync import run_sync

        return run_sync(self, partial(Agent.run, history=history, config=config), what="run_sync")

    async def run_with_config(
        self,
        history: HistoryInput,
        overrides: InferenceConfig,
        *,
        cancel: CancelToken | None = None,
    ) -> AgentResponse:
        """:meth:`run` with per-call overrides (unset fields fall back to the agent's)."""
        if not isinstance(overrides, InferenceConfig):
            raise TypeError(
                f"overrides must be a kova.InferenceConfig, got {type(overrides).__name__}"
            )
        return await self.run(history, config=overrides, cancel=cancel)

    @overload
    async def run_structured(
        self,
        history: HistoryInput,
        output: type[OutputT],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
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
    ) -> tuple[Any, AgentResponse]: ...

    async def run_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
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

        Returns:
            ``(value, response)``; ``response.output_retries`` counts the re-asks.

        Raises:
            TypeError: ``output`` is neither a response format nor a type pydantic validates.
            StructuredOutputError: the last answer is still not JSON or does not validate; it
                carries every raw answer (``attempts``) and the turn's response.
            TypeError: ``output`` is neither a ResponseFormat nor a pydantic model class.
        """
        from ._structured import run_structured_turn

        require_trio("agent.run_structured()")
        messages, retries = self._structured_options(history, config, cancel, output_retries)

        def run(working: Sequence[Message], overrides: InferenceConfig) -> Awaitable[AgentResponse]:
            return self.run(working, config=overrides, cancel=cancel)

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
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]: ...

    def stream_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | object,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]:
        """:meth:`run_structured`, streamed: ``async with agent.stream_structured(history,
        Model) as values: async for value in values``.

        Each value is the best-effort parse of the answer's JSON so far (plain JSON), the
        last one the validated value; afterwards ``values.value`` and ``values.response``
        hold the outcome (see :class:`~kova.agent.StructuredStream`). Errors are raised from
        the iteration; leaving the block early cancels the turn.
        """
        from ._structured import stream_structured_turn

        messages, retries = self._structured_options(history, config, cancel, output_retries)
        self._running()
        return stream_structured_turn(self.stream, messages, output, config, retries, cancel)

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
    ) -> tuple[Any, AgentResponse]:
        """:meth:`run_structured` from plain synchronous code, as :meth:`run_sync` runs it."""
        from ._sync import run_sync

        turn = partial(
            Agent.run_structured,
            history=history,
            output=output,
            config=config,
            output_retries=output_retries,
        )
        return run_sync(self, turn, what="run_structured_sync")

    @asynccontextmanager
    async def stream(
        self,
        history: HistoryInput,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        buffer: int = 16,
    ) -> AsyncIterator[AsyncIterator[AgentEvent]]:
        """Stream one turn: ``async with agent.stream(history) as events: async for e in events``.

        Text and thinking arrive as the provider streams them; every tool call is bracketed
        by ToolCallStarted / ToolCallFinished with the same call (a Finished never comes
        without its Started, denied and rejected calls included); the last event is
        TurnCompleted with the response. Errors of the turn (see :meth:`run`) are raised from
        the iteration. Leaving the block early cancels the turn (no messages) and returns once
        everything it started stopped.

        The turn runs in the consumer's own task, pulled by the iteration: each network read
        is decoded and handed over without a task switch. With a ``cancel`` token it runs in
        a task of its own instead (the token cancels it from there), buffering up to
        ``buffer`` events.

        Raises:
            TypeError: on entering, ``history`` (or an option) has the wrong type.
        """
        require_trio("agent.stream()")
        messages = coerce_history(history)
        check_call_options(config, cancel)
        self._running()
        if cancel is None:
            events = self._steps(messages, config, streamed=True)
            try:
                yield events
            finally:
                await events.aclose()
            return
        steps = partial(self._steps, messages, config, streamed=True)
        async with stream_in_task(steps, cancel, buffer) as in_task:
            yield in_task

    # -- the loop -------------------------------------------------------------------------

    async def _turn(
        self, history: tuple[Message, ...], overrides: InferenceConfig | None
    ) -> AgentResponse:
        """One non-streamed turn: the loop of :meth:`_steps`, its one event the outcome."""
        steps = self._steps(history, overrides, streamed=False)
        try:
            async for event in steps:
                if isinstance(event, TurnCompleted):
                    return event.response
        finally:
            await steps.aclose()
        raise AssertionError("a turn ends with TurnCompleted or an error")  # pragma: no cover

    async def _steps(
        self,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        *,
        streamed: bool,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The agent loop, as the events it produces (the last one TurnCompleted).

        An async generator, driven by whoever iterates it: :meth:`stream`'s consumer, or
        :meth:`_turn`. It holds no cancel scope or nursery across a ``yield`` (trio forbids
        that): the provider stream and the tool pool's event stream are plain context
        managers read in the iterating task. Non-streamed (``streamed=False``), it yields
        only the final TurnCompleted.
        """
        provider, pool = self._running()
        config = self._config
        inference = self._inference(overrides)
        # Read in this task, not asked of the tool pool: the registry never awaits, so this
        # is the same single-threaded read the pool would do, without an actor round trip
        # (three scheduler passes) on every turn.
        tools = config.registry.definitions()
        working: list[Message] = [*self._prefix, *history]
        new_messages: list[Message] = []
        usage = Usage()
        thinking: list[str] = []
        # None when nobody listens: then no event is built at all.
        emitter = self._telemetry.emitter(self._own_subscribers)
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
                )
            )
        calls_made = 0
        finished = False
        try:
            for call_number in range(config.max_iterations + 1):
                self._check_budget(working, tools)
                calls_made = call_number + 1
                call = None if emitter is None else ModelCall(emitter, provider, inference, model)
                chat = ChatRequest(messages=working, tools=tools, config=inference)
                if not streamed:
                    if call is None:
                        # The history was checked at the boundary and every message added
                        # since is kova's own: no second check of the whole history per call.
                        response = await provider.complete_checked(chat)
                    else:
                        response = await call.complete(chat, streamed=False)
                else:
                    # Retries (before any content) happen in the provider actor.
                    accumulator = ResponseAccumulator()
                    leased = provider if call is None else call.start(streamed=True)
                    try:
                        async with leased.stream_checked(chat) as lease:
                            # The lease's first batch, then the response's own batches read
                            # directly: no iterator in between, per network read.
                            batch: Sequence[StreamEvent] = lease.first
                            rest = lease.rest.__anext__
                            while True:
                                if call is not None and call.first and batch:
                                    call.first_token()
                                accumulator.feed(batch)
                                for event in batch:
                                    if isinstance(event, _VISIBLE):
                                        yield event
                                try:
                                    batch = await rest()
                                except StopAsyncIteration:
                                    break
                            response = accumulator.finish()
                    except BaseException as exc:
                        if call is not None:
                            call.failed(exc)
                        raise
                    if call is not None:
                        call.finished(response)
                if response.usage is not None:
                    usage = usage + response.usage
                if response.thinking:
                    thinking.append(response.thinking)
                assistant = Message.assistant(response.content)
                calls = response.tool_uses
                if response.stop_reason.kind is not StopKind.TOOL_USE or not calls:
                    new_messages.append(assistant)
                    if response.usage is not None:
                        self._last_turn_input_tokens = response.usage.input_tokens
                    if emitter is not None:
                        finished = True
                        emitter.emit(
                            TurnFinished(
                                turn_id=emitter.turn_id,
                                time=trio.current_time(),
                                outcome="ok",
                                usage=usage,
                                llm_calls=calls_made,
                            )
                        )
                    yield TurnCompleted(
                        response=AgentResponse(
                            text=response.text,
                            new_messages=tuple(new_messages),
                            stop_reason=response.stop_reason,
                            usage=usage,
                            llm_calls=calls_made,
                            thinking="\n\n".join(thinking) or None,
                        )
                    )
                    return
                working.append(assistant)
                new_messages.append(assistant)
                request = RunToolCalls(
                    calls=calls,
                    telemetry=None if emitter is None else (emitter, emitter.turn_id),
                )
                if streamed:
                    results: tuple[ToolResult, ...] = ()
                    async with pool.stream(request) as items:
                        async for item in items:
                            if isinstance(item, tuple):
                                results = item
                            else:
                                yield item
                else:
                    results = await pool.call(request)
                tool_message = Message.tool_results(results)
                working.append(tool_message)
                new_messages.append(tool_message)
            raise MaxIterationsError(config.max_iterations)
        except BaseException as exc:
            if emitter is not None and not finished:
                outcome, error_type = outcome_of(exc)
                emitter.emit(
                    TurnFinished(
                        turn_id=emitter.turn_id,
                        time=trio.current_time(),
                        outcome=outcome,
                        error_type=error_type,
                        usage=usage,
                        llm_calls=calls_made,
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

    def _check_budget(self, working: Sequence[Message], tools: Sequence[ToolDefinition]) -> None:
        budget = self._config.context_budget
        if budget is None:
            return
        estimate = heuristic_count_tokens(working, tools)
        if estimate > budget:
            raise ContextBudgetExceededError(estimate, budget)


def _default_model(provider: object) -> str | None:
    """The model a provider sends when the request names none, if it says."""
    for owner in (provider, getattr(provider, "codec", None), getattr(provider, "config", None)):
        model = getattr(owner, "model", None)
        if isinstance(model, str):
            return model
    return None


_VISIBLE = (TextDelta, ThinkingDelta)
"""The provider stream events a streamed turn passes on (the rest build the response)."""
