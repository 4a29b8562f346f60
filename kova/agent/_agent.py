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
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

import trio

from .._errors import (
    BuildError,
    Cancelled,
    ContextBudgetExceededError,
    KovaError,
    MaxIterationsError,
)
from .._log import get_logger
from .._models import (
    ChatRequest,
    InferenceConfig,
    Message,
    ModelResponse,
    ResponseFormat,
    StopKind,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    ToolResult,
    Usage,
)
from .._observe import (
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelFirstToken,
    Outcome,
    TelemetryEvent,
    TelemetryHub,
    TurnEmitter,
    TurnFinished,
    TurnStarted,
    new_span_id,
)
from .._record import Record, set_field
from ..providers import Provider, heuristic_count_tokens
from ..tools._validate import load_validation
from ._accumulate import ResponseAccumulator
from ._events import AgentEvent, AgentResponse, TurnCompleted
from ._input import HistoryInput, check_call_options, coerce_history
from ._retry import RetryConfig
from ._tool_pool import (
    ApprovalFunction,
    ApprovalHandler,
    LifecycleHook,
    RunToolCalls,
)

if TYPE_CHECKING:
    from collections.abc import (
        AsyncGenerator,
        AsyncIterator,
        Awaitable,
        Callable,
        Coroutine,
        Sequence,
    )
    from types import TracebackType

    from pydantic import BaseModel

    from ..actors import ActorRef, Runtime
    from ..telemetry import MetricsCollector
    from ..tools import ToolRegistry
    from ._cancel import CancelToken
    from ._provider_messages import RetryHook
    from ._provider_ref import ProviderRef

__all__ = ["Agent", "AgentConfig"]

log = get_logger(__name__)

ModelT = TypeVar("ModelT", bound="BaseModel")
T = TypeVar("T")


def _positive(name: str, value: int) -> int:
    if value < 1:
        raise BuildError(f"{name} must be at least 1, got {value}")
    return value


def _not_negative(name: str, value: int) -> int:
    if value < 0:
        raise BuildError(f"{name} must be at least 0, got {value}")
    return value


class AgentConfig(Record):
    """Everything an :class:`Agent` is configured with. :class:`AgentBuilder` fills one in;
    it can also be built directly."""

    __slots__ = (
        "approval",
        "context_budget",
        "inference",
        "lifecycle",
        "max_concurrent_tools",
        "max_iterations",
        "metrics",
        "name",
        "output_retries",
        "provider",
        "provider_max_in_flight",
        "registry",
        "retry",
        "runtime",
        "system_prompt",
        "telemetry",
    )

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
        name: str = "kova",
    ) -> None:
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
            return await stack.__aexit__(exc_type, exc, traceback)
        return None

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
        messages = coerce_history(history)
        check_call_options(config, cancel)
        return await self._guarded(self._turn(messages, config), cancel)

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
        output: type[ModelT],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
    ) -> tuple[ModelT, AgentResponse]: ...

    @overload
    async def run_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
    ) -> tuple[Any, AgentResponse]: ...

    async def run_structured(
        self,
        history: HistoryInput,
        output: ResponseFormat | type[BaseModel],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        output_retries: int | None = None,
    ) -> tuple[Any, AgentResponse]:
        """A turn whose final answer is constrained to a JSON schema, parsed.

        An answer that does not parse or validate is sent back to the model with the problem,
        up to ``output_retries`` times; every attempt's messages are in the response.

        Args:
            output: a :class:`~kova.ResponseFormat` (the result is the parsed JSON value), or
                a pydantic model class (its schema is derived and the result validated into
                an instance).
            output_retries: re-asks after an invalid answer (default: the agent's
                ``output_retries``, 1 unless the builder set it).

        Returns:
            ``(value, response)``; ``response.output_retries`` counts the re-asks.

        Raises:
            StructuredOutputError: the last answer is still not JSON or does not validate; it
                carries every raw answer (``attempts``) and the turn's response.
        """
        from ._structured import check_output_retries, run_structured_turn

        messages = coerce_history(history)
        check_call_options(config, cancel)
        check_output_retries(output_retries)
        retries = self._config.output_retries if output_retries is None else output_retries

        def run(working: Sequence[Message], overrides: InferenceConfig) -> Awaitable[AgentResponse]:
            return self.run(working, config=overrides, cancel=cancel)

        return await run_structured_turn(run, messages, output, config, retries)

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
        async with self._stream_in_task(messages, config, cancel, buffer) as in_task:
            yield in_task

    @asynccontextmanager
    async def _stream_in_task(
        self,
        messages: tuple[Message, ...],
        config: InferenceConfig | None,
        cancel: CancelToken,
        buffer: int,
    ) -> AsyncIterator[AsyncIterator[AgentEvent]]:
        """The turn in a producer task, so that ``cancel`` can cancel it from outside."""
        send, receive = trio.open_memory_channel[AgentEvent | KovaError](buffer)

        async def pump() -> None:
            steps = self._steps(messages, config, streamed=True)
            try:
                async for event in steps:
                    await send.send(event)
            finally:
                await steps.aclose()

        async def produce() -> None:
            with send:
                try:
                    await self._guarded(pump(), cancel)
                except KovaError as exc:
                    await send.send(exc)  # raised to the consumer by its iterator

        async def events() -> AsyncIterator[AgentEvent]:
            async for item in receive:
                if isinstance(item, KovaError):
                    raise item
                yield item

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce)
                iterator = events()
                try:
                    yield iterator
                finally:
                    # No checkpoint here: an await inside the cancelled nursery would raise
                    # Cancelled and replace the consumer's own exception.
                    nursery.cancel_scope.cancel(reason="stream consumer left")
                    receive.close()
                    await iterator.aclose()  # type: ignore[attr-defined]
        except BaseExceptionGroup as group:
            # The producer never raises (it hands KovaErrors to the consumer), so a lone
            # exception here is the consumer's own: give it back as it was raised.
            _raise_single(group)

    # -- the loop -------------------------------------------------------------------------

    async def _guarded(self, turn: Coroutine[Any, Any, T], cancel: CancelToken | None) -> T:
        """Await ``turn``, cancelled by ``cancel`` (raising kova's Cancelled) if it fires."""
        if cancel is None:
            return await turn
        if cancel.cancelled:
            turn.close()
            raise Cancelled(cancel.reason)
        scope = trio.CancelScope()

        async def watch() -> None:
            await cancel.wait()
            scope.cancel(reason="kova CancelToken")

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                with scope:
                    response = await turn
                nursery.cancel_scope.cancel(reason="turn finished")
        except BaseExceptionGroup as group:
            _raise_single(group)
        if scope.cancelled_caught:
            raise Cancelled(cancel.reason)
        return response

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
                call = None if emitter is None else _ModelCall(emitter, provider, inference, model)
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
                        async with leased.stream_checked(chat) as batches:
                            async for batch in batches:
                                if call is not None and call.first:
                                    call.first_token()
                                accumulator.feed(batch)
                                for event in batch:
                                    if isinstance(event, _VISIBLE):
                                        yield event
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
                outcome, error_type = _outcome(exc)
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


class _ModelCall:
    """One observed provider call: its span id, start time and events."""

    __slots__ = ("_emitter", "_inference", "_model", "_provider", "_started", "first", "span_id")

    def __init__(
        self,
        emitter: TurnEmitter,
        provider: ProviderRef,
        inference: InferenceConfig,
        model: str | None,
    ) -> None:
        self._emitter = emitter
        self._provider = provider
        self._inference = inference
        self._model = model
        self._started = 0.0
        self.first = True
        self.span_id = new_span_id()

    def start(self, *, streamed: bool) -> ProviderRef:
        """Emit ModelCallStarted; the provider ref whose retries report to this call."""
        emitter, inference = self._emitter, self._inference
        self._started = trio.current_time()
        emitter.emit(
            ModelCallStarted(
                turn_id=emitter.turn_id,
                span_id=self.span_id,
                parent_id=emitter.turn_id,
                time=self._started,
                provider=self._provider.name,
                model=self._model,
                max_tokens=inference.max_tokens,
                temperature=inference.temperature,
                streamed=streamed,
            )
        )
        return self._provider.observed(self._retry_hook())

    def _retry_hook(self) -> RetryHook:
        # Runs in the provider actor's task: it only reads the values it is given.
        emit, turn_id, span_id = self._emitter.emit, self._emitter.turn_id, self.span_id

        def on_retry(attempt: int, error: KovaError, wait: float) -> None:
            error_class = getattr(error, "error_class", None)
            emit(
                ModelCallRetrying(
                    turn_id=turn_id,
                    span_id=span_id,
                    time=trio.current_time(),
                    attempt=attempt,
                    error_type=type(error).__name__,
                    error_class=None if error_class is None else str(error_class.value),
                    wait=wait,
                )
            )

        return on_retry

    async def complete(self, chat: ChatRequest, *, streamed: bool) -> ModelResponse:
        provider = self.start(streamed=streamed)
        try:
            response = await provider.complete_checked(chat)
        except BaseException as exc:
            self.failed(exc)
            raise
        self.finished(response)
        return response

    def first_token(self) -> None:
        self.first = False
        now = trio.current_time()
        self._emitter.emit(
            ModelFirstToken(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                latency=now - self._started,
            )
        )

    def finished(self, response: ModelResponse) -> None:
        now = trio.current_time()
        self._emitter.emit(
            ModelCallFinished(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                outcome="ok",
                latency=now - self._started,
                usage=response.usage,
                stop_reason=response.stop_reason.kind.value,
            )
        )

    def failed(self, exc: BaseException) -> None:
        now = trio.current_time()
        outcome, error_type = _outcome(exc)
        self._emitter.emit(
            ModelCallFinished(
                turn_id=self._emitter.turn_id,
                span_id=self.span_id,
                time=now,
                outcome=outcome,
                latency=now - self._started,
                error_type=error_type,
            )
        )


def _outcome(exc: BaseException) -> tuple[Outcome, str | None]:
    """How an exception ends a turn or call: cancelled (trio's, kova's, or the consumer
    leaving the stream) or an error of that type."""
    if isinstance(exc, trio.Cancelled | Cancelled | GeneratorExit):
        return "cancelled", None
    return "error", type(exc).__name__


def _default_model(provider: object) -> str | None:
    """The model a provider sends when the request names none, if it says."""
    for owner in (provider, getattr(provider, "codec", None), getattr(provider, "config", None)):
        model = getattr(owner, "model", None)
        if isinstance(model, str):
            return model
    return None


_VISIBLE = (TextDelta, ThinkingDelta)
"""The provider stream events a streamed turn passes on (the rest build the response)."""


def _raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the lone exception of a nursery's group as itself (the group otherwise)."""
    if len(group.exceptions) == 1:
        only = group.exceptions[0]
        raise only from only.__cause__
    raise group
