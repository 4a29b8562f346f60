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

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

import attrs
import structlog
import trio

from .._errors import (
    BuildError,
    Cancelled,
    ContextBudgetExceededError,
    KovaError,
    MaxIterationsError,
    StructuredOutputError,
)
from .._models import (
    InferenceConfig,
    Message,
    ModelResponse,
    ResponseFormat,
    StopKind,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolDefinition,
    Usage,
)
from ..providers import Provider, heuristic_count_tokens
from ._accumulate import ResponseAccumulator
from ._events import AgentEvent, AgentResponse, TurnCompleted
from ._retry import RetryConfig
from ._tool_pool import (
    ApprovalFunction,
    ApprovalHandler,
    GetDefinitions,
    LifecycleHook,
    RunToolCalls,
)

if TYPE_CHECKING:
    from types import TracebackType

    from pydantic import BaseModel

    from ..actors import ActorRef, Runtime
    from ..telemetry import MetricsCollector
    from ..tools import ToolRegistry
    from ._cancel import CancelToken

__all__ = ["Agent", "AgentConfig"]

log = structlog.get_logger(__name__)

ModelT = TypeVar("ModelT", bound="BaseModel")
_Emit = Callable[[Sequence[AgentEvent]], Awaitable[None]]


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise BuildError(f"{attribute.name} must be at least 1, got {value}")


@attrs.frozen(kw_only=True)
class AgentConfig:
    """Everything an :class:`Agent` is configured with. :class:`AgentBuilder` fills one in;
    it can also be built directly."""

    provider: Provider
    registry: ToolRegistry
    system_prompt: str | None = None
    inference: InferenceConfig = attrs.field(factory=InferenceConfig)
    context_budget: int | None = None
    """Maximum prompt tokens per call, by the heuristic estimate."""
    max_iterations: int = attrs.field(default=10, validator=_positive)
    max_concurrent_tools: int = attrs.field(default=10, validator=_positive)
    retry: RetryConfig = attrs.field(factory=RetryConfig)
    metrics: MetricsCollector | None = None
    approval: ApprovalHandler | ApprovalFunction | None = None
    lifecycle: LifecycleHook | None = None
    runtime: Runtime | None = None
    """A runtime the application already runs; without one the agent opens its own."""
    provider_max_in_flight: int | None = None


class Agent:
    """Runs turns. Use it inside ``async with``: entering starts its actors (the provider
    actor and the tool pool) on its own runtime or the one it was given; leaving stops them.

    An agent holds no conversation: every method takes the history and returns what the turn
    added. One agent can serve many turns at once, from many tasks.
    """

    def __init__(self, config: AgentConfig) -> None:
        self._config = config
        self._stack: AsyncExitStack | None = None
        self._provider: Provider | None = None
        self._pool: ActorRef | None = None
        self._prefix: tuple[Message, ...] = (
            (Message.system(config.system_prompt),) if config.system_prompt else ()
        )
        self._last_turn_input_tokens: int | None = None

    @property
    def config(self) -> AgentConfig:
        return self._config

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
        from ._provider_actor import ProviderRef, spawn_provider
        from ._tool_pool import ToolPoolActor

        config = self._config
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            runtime = config.runtime
            if runtime is None:
                runtime = await stack.enter_async_context(open_runtime())
            if isinstance(config.provider, ProviderRef):
                self._provider = config.provider
            else:
                provider_ref = await spawn_provider(
                    runtime, config.provider, max_in_flight=config.provider_max_in_flight
                )
                self._provider = provider_ref
                if config.runtime is not None:
                    stack.push_async_callback(provider_ref.stop)

            def tool_pool() -> ToolPoolActor:
                return ToolPoolActor(
                    registry=config.registry,
                    max_concurrent=config.max_concurrent_tools,
                    approval=config.approval,
                    lifecycle=config.lifecycle,
                    metrics=config.metrics,
                )

            self._pool = await runtime.spawn(tool_pool)  # named tool_pool, tool_pool-2, ...
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

    def _running(self) -> tuple[Provider, ActorRef]:
        if self._provider is None or self._pool is None:
            raise BuildError("the agent is not open: use `async with builder.build() as agent:`")
        return self._provider, self._pool

    # -- public API -----------------------------------------------------------------------

    async def run(
        self,
        history: Sequence[Message],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
    ) -> AgentResponse:
        """One turn over ``history``.

        Args:
            history: the conversation so far (the host's; never modified).
            config: per-call overrides; unset fields fall back to the agent's config.
            cancel: a token that cancels the turn from another task.

        Returns:
            The turn's outcome; persist ``response.new_messages``.

        Raises:
            ProviderError: the provider failed (after retries, for retryable errors).
            MaxIterationsError: the model kept calling tools past ``max_iterations``.
            ContextBudgetExceededError: a prompt was over the budget; nothing was sent.
            Cancelled: ``cancel`` was cancelled. A caller's own cancel scope raises
                ``trio.Cancelled`` untouched instead. Either way no messages were produced
                and every request and tool call of the turn has stopped.
        """
        return await self._guarded(self._turn(history, config, None), cancel)

    async def run_with_config(
        self,
        history: Sequence[Message],
        overrides: InferenceConfig,
        *,
        cancel: CancelToken | None = None,
    ) -> AgentResponse:
        """:meth:`run` with per-call overrides (unset fields fall back to the agent's)."""
        return await self.run(history, config=overrides, cancel=cancel)

    @overload
    async def run_structured(
        self,
        history: Sequence[Message],
        output: type[ModelT],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[ModelT, AgentResponse]: ...

    @overload
    async def run_structured(
        self,
        history: Sequence[Message],
        output: ResponseFormat,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Any, AgentResponse]: ...

    async def run_structured(
        self,
        history: Sequence[Message],
        output: ResponseFormat | type[BaseModel],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
    ) -> tuple[Any, AgentResponse]:
        """A turn whose final answer is constrained to a JSON schema, parsed.

        Args:
            output: a :class:`~kova.ResponseFormat` (the result is the parsed JSON value), or
                a pydantic model class (its schema is derived and the result validated into
                an instance).

        Returns:
            ``(value, response)``.

        Raises:
            StructuredOutputError: the answer is not JSON or does not validate; it carries
                the raw text and the turn's response.
        """
        if isinstance(output, ResponseFormat):
            response_format = output
            model = None
        else:
            from ._structured import response_format_for

            response_format = response_format_for(output)
            model = output
        overrides = InferenceConfig(response_format=response_format).merged(config)
        response = await self.run(history, config=overrides, cancel=cancel)
        text = response.text
        if model is None:
            try:
                return json.loads(text), response
            except ValueError as exc:
                raise StructuredOutputError(
                    f"the answer is not valid JSON ({exc})", raw_text=text, response=response
                ) from exc
        from pydantic import ValidationError

        try:
            return model.model_validate_json(text), response
        except ValidationError as exc:
            raise StructuredOutputError(
                f"the answer does not validate as {model.__name__}: "
                f"{exc.error_count()} error(s): {exc.errors()[0]['msg'] if exc.errors() else ''}",
                raw_text=text,
                response=response,
            ) from exc

    @asynccontextmanager
    async def stream(
        self,
        history: Sequence[Message],
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        buffer: int = 16,
    ) -> AsyncIterator[AsyncIterator[AgentEvent]]:
        """Stream one turn: ``async with agent.stream(history) as events: async for e in events``.

        Text and thinking arrive as the provider streams them; tool calls are bracketed by
        ToolCallStarted / ToolCallFinished; the last event is TurnCompleted with the response.
        Errors of the turn (see :meth:`run`) are raised from the iteration. Leaving the block
        early cancels the turn (no messages) and returns once everything it started stopped.
        """
        send, receive = trio.open_memory_channel[Sequence[AgentEvent] | KovaError](buffer)

        async def produce() -> None:
            async def emit(events: Sequence[AgentEvent]) -> None:
                await send.send(events)

            with send:
                try:
                    response = await self._guarded(self._turn(history, config, emit), cancel)
                except KovaError as exc:
                    await send.send(exc)  # raised to the consumer by its iterator
                    return
                await send.send((TurnCompleted(response=response),))

        async def events() -> AsyncIterator[AgentEvent]:
            async for item in receive:
                if isinstance(item, KovaError):
                    raise item
                for event in item:
                    yield event

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

    async def _guarded(
        self, turn: Coroutine[Any, Any, AgentResponse], cancel: CancelToken | None
    ) -> AgentResponse:
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
        self,
        history: Sequence[Message],
        overrides: InferenceConfig | None,
        emit: _Emit | None,
    ) -> AgentResponse:
        provider, pool = self._running()
        config = self._config
        inference = config.inference.merged(overrides)
        tools: list[ToolDefinition] = await pool.call(GetDefinitions())
        working: list[Message] = [*self._prefix, *history]
        new_messages: list[Message] = []
        usage = Usage()
        thinking: list[str] = []
        for call_number in range(config.max_iterations + 1):
            self._check_budget(working, tools)
            response = await self._complete(provider, working, tools, inference, emit)
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
                return AgentResponse(
                    text=response.text,
                    new_messages=tuple(new_messages),
                    stop_reason=response.stop_reason,
                    usage=usage,
                    llm_calls=call_number + 1,
                    thinking="\n\n".join(thinking) or None,
                )
            working.append(assistant)
            new_messages.append(assistant)
            on_event = None if emit is None else _single_event_sender(emit)
            results = await pool.call(RunToolCalls(calls=calls, on_event=on_event))
            tool_message = Message.tool_results(results)
            working.append(tool_message)
            new_messages.append(tool_message)
        raise MaxIterationsError(config.max_iterations)

    def _check_budget(self, working: Sequence[Message], tools: Sequence[ToolDefinition]) -> None:
        budget = self._config.context_budget
        if budget is None:
            return
        estimate = heuristic_count_tokens(working, tools)
        if estimate > budget:
            raise ContextBudgetExceededError(estimate, budget)

    async def _complete(
        self,
        provider: Provider,
        working: Sequence[Message],
        tools: Sequence[ToolDefinition],
        inference: InferenceConfig,
        emit: _Emit | None,
    ) -> ModelResponse:
        """One provider call with retries (streamed when ``emit`` is set)."""
        retry = self._config.retry
        metrics = self._config.metrics
        attempt = 0
        while True:
            started = time.perf_counter()
            delivered = False
            try:
                if emit is None:
                    response = await provider.chat_completion(working, tools, inference)
                else:
                    accumulator = ResponseAccumulator()
                    async with provider.chat_completion_stream(
                        working, tools, inference
                    ) as batches:
                        async for batch in batches:
                            accumulator.feed(batch)
                            visible = _visible(batch)
                            if visible:
                                delivered = True
                                await emit(visible)
                    response = accumulator.finish()
            except KovaError as error:
                if metrics is not None:
                    metrics.record_llm_error()
                if delivered or not retry.should_retry(attempt, error):
                    raise
                delay = retry.delay(attempt, error)
                log.warning(
                    "provider.request.retrying",
                    attempt=attempt + 1,
                    delay=delay,
                    error=str(error),
                )
                await trio.sleep(delay)
                attempt += 1
                continue
            if metrics is not None:
                metrics.record_llm_request((time.perf_counter() - started) * 1000.0, response.usage)
            return response


def _raise_single(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise the lone exception of a nursery's group as itself (the group otherwise)."""
    if len(group.exceptions) == 1:
        only = group.exceptions[0]
        raise only from only.__cause__
    raise group


def _single_event_sender(emit: _Emit) -> Callable[[object], Awaitable[None]]:
    async def send(event: object) -> None:
        await emit((event,))  # type: ignore[arg-type]  # the tool pool sends agent events

    return send


def _visible(batch: Sequence[StreamEvent]) -> list[AgentEvent]:
    return [event for event in batch if isinstance(event, TextDelta | ThinkingDelta)]
