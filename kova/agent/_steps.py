"""The steps every driver of a turn runs: :class:`ModelStep` and :class:`ToolStep`.

A driver only sequences what the turn core says (:meth:`Turn.next_step
<kova.agent.Turn.next_step>`); the work of one step lives here, once, with a streamed and a
non-streamed entry each:

- :class:`ModelStep`: one model call, complete (:meth:`~ModelStep.complete`) or streamed
  (:meth:`~ModelStep.stream`, read by the consumer in its own frame: no task and no queue
  per network read). It reports the call on the turn's event stream, counts it in the
  turns enclosing this one (an agent used as a tool), accumulates a streamed response, and
  gives the reply to the turn core.
- :class:`ToolStep`: one step's tool calls (lookup, approval, run, events and nesting, on
  the agent's tool runner), run (:meth:`~ToolStep.run`, in the caller's task) or streamed
  (:meth:`~ToolStep.open`: in a task of the turn stream's nursery, the events read from a
  channel), their outcomes given to the turn core.
- :class:`StepObserver`: what a driver records beside the loop (the journal: each saved
  turn, each call started and finished); it does nothing by default.

The in-process loop (``_loop``), the journal, agents used as tools and the Temporal worker
all run these objects; a new capability of a step is a change here, and every driver gets it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from .._errors import ContextOverflow, GuardrailTripped
from .._models import TextDelta, ThinkingDelta
from .._observe import TurnFinished, TurnStarted, current_scope
from ._accumulate import ResponseAccumulator
from ._config import usage_key
from ._context import Compact
from ._events import (
    GuardTripped,
    ToolCallDeferred,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
)
from ._model_call import ModelCall, outcome_of
from ._nesting import ToolCalls
from ._tool_deltas import ToolArguments
from ._turn import CallModel, Finished

if TYPE_CHECKING:
    from collections.abc import (
        AsyncGenerator,
        AsyncIterator,
        Awaitable,
        Callable,
        Mapping,
        Sequence,
    )
    from types import TracebackType

    from .._models import (
        ChatRequest,
        InferenceConfig,
        ModelResponse,
        StreamEvent,
        ToolResult,
        ToolUse,
    )
    from .._observe import TurnEmitter
    from ._approvals import DeferredResult, InnerPause
    from ._budget import Hold
    from ._driver_context import DriverContext
    from ._events import AgentEvent, ToolCallDelta
    from ._guard_gate import GuardGate
    from ._nesting import CallSite, EnclosingTurn
    from ._provider_ref import ProviderRef
    from ._tool_pool import Approver, ToolRunner
    from ._turn import AwaitApproval, RunTools, Turn

__all__ = [
    "NO_OBSERVER",
    "ModelStep",
    "ModelStream",
    "StepObserver",
    "ToolStep",
]

VISIBLE = (TextDelta, ThinkingDelta)
"""The provider stream events a streamed turn passes on (the rest build the response)."""


class StepObserver:
    """Records a turn's steps beside the loop (the journal does). Does nothing by default
    (:data:`NO_OBSERVER`); any other observer hears of each call's outcome as it ends."""

    __slots__ = ()

    async def saved(self, turn: Turn) -> None:
        """The turn core after a transition (a model's reply, a tool step's results)."""

    def answered(
        self, step: RunTools, turn: Turn
    ) -> tuple[dict[str, ToolResult], tuple[ToolUse, ...]]:
        """The step's calls already answered without running, and the calls to run now."""
        return {}, step.calls

    async def started(self, calls: Sequence[ToolUse]) -> None:
        """``calls`` are about to run."""

    async def finished(self, event: ToolCallFinished | ToolCallDeferred) -> None:
        """One of the turn's own calls ended (its result, or left to a person)."""


NO_OBSERVER = StepObserver()


class ModelStep:
    """A turn's model calls, made through the agent's provider (see the module docstring):
    each counted in the enclosing turns, reserved against the agent's budget (if it has one)
    and priced, observed, and its reply given to the turn core.

    ``on_failure`` replaces reporting a failed call as finished (a Temporal activity reports
    the retry its workflow will make). ``streamed``: the step runs a whole turn, streamed or
    not, whose own telemetry it reports (TurnStarted when made, TurnFinished from
    :meth:`finished`) and whose end it gives (:meth:`outcome`); ``None`` for calls on their
    own (a Temporal activity).
    """

    __slots__ = (
        "_context",
        "_counted",
        "_emitter",
        "_gate",
        "_inference",
        "_key",
        "_meter",
        "_model",
        "_observer",
        "_on_failure",
        "_open",
        "_outer",
        "_plain",
        "_streamed",
        "provider",
    )

    def __init__(
        self,
        context: DriverContext,
        inference: InferenceConfig,
        emitter: TurnEmitter | None,
        site: CallSite | None = None,
        *,
        provider: ProviderRef | None = None,
        on_failure: Callable[[ModelCall, BaseException], None] | None = None,
        observer: StepObserver = NO_OBSERVER,
        gate: GuardGate | None = None,
        streamed: bool | None = None,
    ) -> None:
        self._context = context
        self._gate = gate  # the turn's guards, if any
        self._streamed = streamed
        self._open = streamed is not None and emitter is not None  # TurnFinished still due
        self._counted: int | None = None  # the provider's count of the next call's prompt
        self._observer = observer
        self._meter = context.meter
        self._model = inference.model or context.model
        self._inference = inference
        self._emitter = emitter
        self._outer: tuple[EnclosingTurn, ...] = site.step.turns if site is not None else ()
        self._key = context.name if site is None else usage_key(context.name, site.call.name)
        self.provider = context.provider if provider is None else provider
        self._on_failure = on_failure
        self._plain = not self._outer and emitter is None and self._meter.budget is None
        """Nothing to count, reserve or report around a call (the usual unobserved turn)."""
        if self._open:
            assert emitter is not None
            emitter.emit(
                TurnStarted(
                    turn_id=emitter.turn_id,
                    time=trio.current_time(),
                    agent=context.name,
                    provider=context.provider.name,
                    model=self._model,
                    streamed=bool(streamed),
                    parent_id=_parent_span(site),
                )
            )

    async def count_tokens(self, request: ChatRequest) -> int:
        """The request's input tokens, as the provider counts them (the budget's worst case
        of the call that follows uses the count)."""
        self._counted = counted = await self.provider.count_tokens(request)
        return counted

    async def compact(self, step: Compact, turn: Turn) -> None:
        """A summary the turn's context policy asked for, from its summarizer (the agent's
        own provider when it names none), given to ``turn``."""
        summarizer = step.provider
        if summarizer is None:
            summary = await self.provider._complete_checked(step.request)
        else:
            async with summarizer.open():
                summary = await summarizer.chat_completion(step.request)
        turn.compacted(summary)
        await self._observer.saved(turn)

    async def after_overflow(self, turn: Turn, error: ContextOverflow) -> ChatRequest:
        """The request to send once more after the provider refused the last one as over
        its context window: the turn's context policy compacts it (a summary first, if
        it asks for one). Raises ``error`` when the turn cannot compact and retry."""
        turn.overflowed(error)
        step = turn.next_step()
        while type(step) is not CallModel or step.count_tokens:
            if type(step) is Compact:
                await self.compact(step, turn)
            elif type(step) is CallModel:
                turn.tokens_counted(await self.count_tokens(step.request))
            else:  # pragma: no cover - the turn asks for a model call after compacting
                raise error
            step = turn.next_step()
        return step.request

    async def _call(self, request: ChatRequest) -> tuple[ModelCall | None, Hold | None]:
        """Counts the call in the enclosing turns and reserves it against the budget
        (``BudgetExceeded``: nothing is sent); its telemetry, when somebody listens."""
        for enclosing in self._outer:
            enclosing.inner_request()
        meter = self._meter
        held = None
        counted, self._counted = self._counted, None
        if meter.budget is not None:
            held = await meter.reserve(request, self._model, counted)
        emitter = self._emitter
        if emitter is None:
            return None, held
        return ModelCall(emitter, self.provider, self._inference, self._model), held

    async def settled(self, held: Hold | None, response: ModelResponse) -> None:
        if held is not None:
            await self._meter.settle(held, response)

    async def failed(
        self, call: ModelCall | None, exc: BaseException, held: Hold | None = None
    ) -> None:
        if held is not None:
            await self._meter.release(held, exc)
        if call is not None:
            if self._on_failure is None:
                call.failed(exc)
            else:
                self._on_failure(call, exc)

    async def replied(self, response: ModelResponse, turn: Turn | None) -> None:
        """The reply goes to the turn core (if given) and counts in the enclosing turns; an
        observer saves the turn. (A turn of its own, unobserved, needs only the first:
        the step's entries call ``turn.model_replied`` themselves then.)"""
        if turn is not None:
            turn.model_replied(response)
        for enclosing in self._outer:
            enclosing.inner_replied(self._key, response.usage)
        if turn is not None and self._observer is not NO_OBSERVER:
            await self._observer.saved(turn)

    async def complete(self, request: ChatRequest, turn: Turn | None = None) -> ModelResponse:
        """One model call, its whole response at once (given to ``turn``, if given). With
        guards, a trip cancels the call in flight."""
        gate = self._gate
        if gate is not None:
            await gate.before_first_call()
        if self._plain:  # nothing to count, reserve or report: the call alone
            call = held = None
        else:
            call, held = await self._call(request)
        try:
            provider = self.provider if call is None else call.start(streamed=False)
            if gate is None:
                # The history was checked at the boundary and every message added since is
                # kova's own: no second check of the whole history per call.
                response = await provider._complete_checked(request)
            else:
                with gate.guarding():
                    response = await provider._complete_checked(request)
        except BaseException as exc:
            await self.failed(call, exc, held)
            if turn is not None and isinstance(exc, ContextOverflow):
                return await self.complete(await self.after_overflow(turn, exc), turn)
            raise
        if self._meter.prices:  # its cost, worked out when first read
            response = self._meter.priced(response, self._model)
        if call is not None:
            call.finished(response)
        if held is not None:
            await self.settled(held, response)
        if turn is not None and not self._outer and self._observer is NO_OBSERVER:
            turn.model_replied(response)
        else:
            await self.replied(response, turn)
        return response

    async def outcome(self, turn: Turn, step: Finished | AwaitApproval) -> list[AgentEvent]:
        """What ends the turn: the input guards passed and the output guards' check of the
        whole answer (their events, streamed), then TurnCompleted (a pause's pending
        approvals signed: they leave the process; a finished turn carries none).

        Raises:
            GuardrailTripped: a guard tripped.
        """
        gate = self._gate
        if gate is None:
            events: list[AgentEvent] = []
        else:
            await gate.passed()
            if type(step) is Finished:
                await gate.answered(step.response.text)
            events = gate.take_events() if self._streamed else []
        if self._open:
            self.finished(turn)
        else:  # as finished(turn), without its call when nobody listens
            last = turn.last_usage
            if last is not None:
                self._context.last_input_tokens = last.input_tokens
        response = step.response
        if type(step) is not Finished:
            response = self._context.signer.sealed(response)
        events.append(TurnCompleted(response=response))
        return events

    def trip_events(self, exc: BaseException) -> list[AgentEvent]:
        """What a streamed turn that a guard stopped reports before its error: the guard
        events not yet handed on (the ``GuardTripped``; the others are dropped)."""
        gate = self._gate
        if gate is None or not self._streamed or not isinstance(exc, GuardrailTripped):
            return []
        return [event for event in gate.take_events() if type(event) is GuardTripped]

    def finished(self, turn: Turn, exc: BaseException | None = None) -> None:
        """The turn ended: with ``exc``, or well (then its last input tokens are kept)."""
        if exc is None:
            last = turn.last_usage
            if last is not None:
                self._context.last_input_tokens = last.input_tokens
        emitter = self._emitter
        if emitter is None or not self._open:
            return
        self._open = False
        outcome, error_type = ("ok", None) if exc is None else outcome_of(exc)
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

    def stream(self, request: ChatRequest, turn: Turn | None = None) -> ModelStream:
        """One model call, streamed: ``async with step.stream(request) as reads:`` then
        ``reads.first`` and ``await reads.next()`` until it returns ``None``. The response
        goes to ``turn`` (if given) when the block ends."""
        return ModelStream(self, request, turn)


class ModelStream:
    """One streamed model call (see :meth:`ModelStep.stream`): the provider's lease, read
    batch by batch in the consumer's own frame, and the response accumulated as it goes.
    Retries before any content happen in the provider actor."""

    __slots__ = (
        "_accumulator",
        "_arguments",
        "_call",
        "_held",
        "_lease",
        "_request",
        "_rest",
        "_step",
        "_turn",
        "first",
        "response",
    )

    def __init__(self, step: ModelStep, request: ChatRequest, turn: Turn | None) -> None:
        self._step = step
        self._request = request
        self._turn = turn
        self._call: ModelCall | None = None
        self._held: Hold | None = None
        self._arguments: ToolArguments | None = None
        self._accumulator: ResponseAccumulator | None = None
        self._rest: Callable[[], Awaitable[Sequence[StreamEvent]]] | None = None
        self.first: Sequence[StreamEvent] = ()
        """The first batch (already accumulated)."""
        self.response: ModelResponse | None = None
        """The whole response, once :meth:`next` returned ``None``."""

    async def __aenter__(self) -> ModelStream:
        step = self._step
        gate = step._gate
        if gate is not None:
            await gate.before_first_call()
        if step._plain:  # nothing to count, reserve or report: the call alone
            call = None
        else:
            call, self._held = await step._call(self._request)
        self._call = call
        self._accumulator = ResponseAccumulator(None if call is None else call.first_token)
        provider = step.provider if call is None else call.start(streamed=True)
        self._lease = provider._stream_checked(self._request)
        try:
            lease = await self._lease.__aenter__()
            self._rest = lease.rest.__anext__
            self.first = lease.first
            self._accumulator.feed(lease.first)  # and the first token's event
            if gate is not None:
                await gate.screen(lease.first)
        except BaseException as exc:
            if self._rest is not None:
                await self._lease.__aexit__(type(exc), exc, exc.__traceback__)
            await step.failed(call, exc, self._held)
            if self._turn is not None and isinstance(exc, ContextOverflow) and not self.first:
                self._rest = None  # refused before any content: compact and send it again
                self._request = await step.after_overflow(self._turn, exc)
                return await self.__aenter__()
            raise
        return self

    def tool_delta(self, event: StreamEvent) -> ToolCallDelta | None:
        """A tool call's arguments so far, from one of its stream events (``TOOL_STREAM``);
        ``None`` when it adds nothing to show."""
        arguments = self._arguments
        if arguments is None:  # made only when a call streams: a plain answer pays nothing
            arguments = self._arguments = ToolArguments()
        return arguments.feed(event)

    async def next(self) -> Sequence[StreamEvent] | None:
        """The next network read's events (accumulated), or ``None`` at the end."""
        rest, accumulator = self._rest, self._accumulator  # set on entering
        assert rest is not None, "entered"
        assert accumulator is not None
        gate = self._step._gate
        try:
            if gate is None:
                batch = await rest()
            else:
                with gate.guarding():  # a trip cancels the read; no yield in between
                    batch = await rest()
        except StopAsyncIteration:
            response = accumulator.finish()
            meter = self._step._meter
            self.response = meter.priced(response, self._step._model) if meter.prices else response
            return None
        accumulator.feed(batch)
        if gate is not None:
            await gate.screen(batch)  # the output guards, before any of it is handed on
        return batch

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        step, call = self._step, self._call
        try:
            await self._lease.__aexit__(exc_type, exc, traceback)
        except BaseException as error:
            await step.failed(call, error, self._held)
            raise
        if exc is not None:
            await step.failed(call, exc, self._held)
            return
        response = self.response
        assert response is not None, "a stream is read to its end before its block ends"
        if call is not None:
            call.finished(response)
        if self._held is not None:
            await step.settled(self._held, response)
        turn = self._turn
        if turn is not None and not step._outer and step._observer is NO_OBSERVER:
            turn.model_replied(response)
        else:
            await step.replied(response, turn)


class ToolStep:
    """A turn's tool steps, run on the agent's tool runner (see the module docstring).

    ``tasks``: the nursery a streamed step's calls run in (the turn stream's); without one a
    streamed step runs in the consumer's frame and its events follow when it ends."""

    __slots__ = (
        "_bracketed",
        "_context",
        "_deps",
        "_emitter",
        "_gate",
        "_nest",
        "_observer",
        "_site",
        "_streamed",
        "_tasks",
    )

    def __init__(
        self,
        context: DriverContext,
        emitter: TurnEmitter | None,
        site: CallSite | None = None,
        *,
        streamed: bool,
        deps: object = None,
        observer: StepObserver = NO_OBSERVER,
        gate: GuardGate | None = None,
        tasks: trio.Nursery | None = None,
    ) -> None:
        self._context = context
        self._emitter = emitter
        self._gate = gate
        self._tasks = tasks
        self._site = site
        self._streamed = streamed
        self._deps = deps
        self._observer = observer
        self._nest: tuple[tuple[str, ...], tuple[EnclosingTurn, ...], Approver | None] | None
        self._nest = None  # made for the first step (many turns have none)
        self._bracketed = False

    def core_events(self, turn: Turn) -> Sequence[AgentEvent]:
        """What a streamed turn reports that no step ran: the calls a person denied on a
        resumed turn (bracketed once), and what the core did by itself."""
        if self._bracketed and self._gate is None:
            return turn.take_events()
        events: list[AgentEvent] = []
        for call, result in turn.decided_denials() if not self._bracketed else ():
            events.append(ToolCallStarted(call=call))
            events.append(ToolCallFinished(call=call, result=result))
        self._bracketed = True
        events.extend(turn.take_events())
        if self._gate is not None:
            events.extend(self._gate.take_events())
        return events

    def _where(self) -> tuple[tuple[str, ...], tuple[EnclosingTurn, ...], Approver | None]:
        """The turn's path, the turns enclosing it, and the approval policy its calls follow
        (an agent tool without a policy of its own follows its caller's)."""
        where = self._nest
        if where is None:
            site, approver = self._site, self._context.approver
            if not approver.active:
                approver = site.step.approver if site is not None else None  # type: ignore[assignment]
            path = site.path if site is not None else ()
            outer = site.step.turns if site is not None else ()
            where = self._nest = (path, outer, approver)
        return where

    async def _screen(self, step: RunTools) -> dict[str, ToolResult] | None:
        """The input guards passed, then each call's tool guards: the calls they denied."""
        gate = self._gate
        if gate is None:
            return None
        await gate.passed()
        return await gate.tool_calls(step.calls)

    def request(
        self,
        calls: tuple[ToolUse, ...],
        *,
        approved: frozenset[str],
        turn_id: str,
        turn: EnclosingTurn | None = None,
        resumes: dict[str, InnerPause] | None = None,
        on_event: Callable[[object], Awaitable[None]] | None = None,
    ) -> ToolCalls:
        """The calls as the agent's tool runner takes them; what their agent tools see of
        ``turn`` (``None``: calls run on their own) and the turns enclosing it."""
        emitter = self._emitter
        path, outer, approver = self._nest or self._where()
        return ToolCalls(
            calls,
            on_event=on_event,
            telemetry=None if emitter is None else (emitter, emitter.turn_id),
            approved=approved,
            turn_id=turn_id,
            agent=self._context.name,  # what the tools' ToolContext carries
            deps=self._deps,
            path=path,
            turns=outer if turn is None else (turn, *outer),
            approver=approver,
            streamed=self._streamed,
            resumes=resumes,
        )

    def execute(self, request: ToolCalls) -> Awaitable[tuple[DeferredResult, ...]]:
        """Run the calls in this task (in a copy of its context)."""
        return self._context.runner.run(request)

    def _begin(
        self, turn: Turn, step: RunTools, denied: Mapping[str, ToolResult] | None = None
    ) -> tuple[dict[str, ToolResult], ToolCalls]:
        observer = self._observer
        for enclosing in (self._nest or self._where())[1]:
            enclosing.inner_tools(len(step.calls))
        answered: dict[str, ToolResult]
        if observer is NO_OBSERVER:  # nothing answered yet: every call runs
            answered, calls = {}, step.calls
        else:
            answered, calls = observer.answered(step, turn)
        if denied:  # a tool guard answered these: they never reach the pool
            answered = {**answered, **denied}
            calls = tuple(call for call in calls if call.id not in denied)
        watch = None if observer is NO_OBSERVER or self._streamed else observer.finished
        on_event = None if watch is None else _own_outcomes(watch)
        request = self.request(
            calls,
            approved=step.approved,
            turn_id=step.turn_id,
            turn=turn,
            resumes=dict(step.resumes) if step.resumes else None,
            on_event=on_event,
        )
        return answered, request

    def _end(
        self,
        turn: Turn,
        step: RunTools,
        answered: dict[str, ToolResult],
        request: ToolCalls,
        results: tuple[DeferredResult, ...],
    ) -> None:
        if answered:
            by_id = dict(zip((call.id for call in request.calls), results, strict=True))
            results = tuple(
                answered[call.id] if call.id in answered else by_id[call.id] for call in step.calls
            )
        for call_id, pause in request.paused.items():
            turn.inner_paused(call_id, pause)
        turn.tools_finished(results)
        # Read for every model call: a tool server's list_changed reaches the model on its
        # very next step (the registry never awaits; it keeps the pair until a tool changes).
        up_front, deferred = self._context.config.registry.split_definitions()
        turn.set_tools(up_front, deferred=deferred or None)

    async def run(self, turn: Turn, step: RunTools) -> None:
        """Run the step's calls (those the tool guards let through) and give their outcomes
        to ``turn``."""
        denied = None if self._gate is None else await self._screen(step)
        answered, request = self._begin(turn, step, denied)
        results: tuple[DeferredResult, ...] = ()
        observer = self._observer
        if request.calls:
            if observer is not NO_OBSERVER:
                await observer.started(request.calls)
            results = await self._context.runner.run(request)
        self._end(turn, step, answered, request, results)
        if observer is not NO_OBSERVER:
            await observer.saved(turn)

    @asynccontextmanager
    async def open(self, turn: Turn, step: RunTools) -> AsyncIterator[AsyncIterator[AgentEvent]]:
        """The step streamed: ``async with step.open(turn, run) as events: async for ...``
        (every call bracketed, an agent tool's events nested in its call); the outcomes
        go to ``turn`` when the block ends."""
        answered, request = self._begin(turn, step, await self._screen(step))
        if request.calls:
            await self._observer.started(request.calls)
        results: list[tuple[DeferredResult, ...]] = [()]
        events = self._events(step, answered, request, results)
        try:
            yield events
        finally:
            await events.aclose()
        self._end(turn, step, answered, request, results[0])
        await self._observer.saved(turn)

    async def _events(
        self,
        step: RunTools,
        answered: dict[str, ToolResult],
        request: ToolCalls,
        results: list[tuple[DeferredResult, ...]],
    ) -> AsyncGenerator[AgentEvent, None]:
        for checked in self._gate.take_events() if self._gate is not None else ():
            yield checked  # the tool guards' verdicts
        for call in step.calls:  # answered from the journal or a guard: still bracketed
            if call.id in answered:
                yield ToolCallStarted(call=call)
                yield ToolCallFinished(call=call, result=answered[call.id])
        if not request.calls:
            return
        if self._tasks is None:  # no nursery: the step in this frame, its events after it
            held: list[AgentEvent] = []
            request.on_event = _kept(held)
            results[0] = await self._context.runner.run(request)
            for event in held:
                await self._watch(event)
                yield event
            return
        # In a task of the turn stream's nursery, its events (then its results) read from a
        # channel; leaving early cancels it and waits for it to end.
        send, receive = trio.open_memory_channel[object](8)
        request.on_event = send.send
        scope, done = trio.CancelScope(), trio.Event()
        self._tasks.start_soon(_serve, self._context.runner, request, send, scope, done)
        try:
            while True:
                item = await receive.receive()
                if type(item) is tuple:
                    results[0] = item
                    return
                if type(item) is _Raised:
                    raise item.error
                await self._watch(item)  # type: ignore[arg-type]
                yield item  # type: ignore[misc]
        finally:
            scope.cancel(reason="the turn stream left the tool step")
            receive.close()
            if not done.is_set():
                with trio.CancelScope(shield=True):
                    await done.wait()

    async def _watch(self, event: AgentEvent) -> None:
        """The observer hears of each of the turn's own calls as it ends (if it watches)."""
        observer = self._observer
        if (
            observer is not NO_OBSERVER
            and not event.path
            and isinstance(event, ToolCallFinished | ToolCallDeferred)
        ):
            await observer.finished(event)


class _Raised:
    """What a streamed tool step's task raised, for the consumer's frame to raise."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _serve(
    runner: ToolRunner,
    request: ToolCalls,
    send: trio.MemorySendChannel[object],
    scope: trio.CancelScope,
    done: trio.Event,
) -> None:
    """A streamed tool step's task: its events go to ``send`` as they happen (the
    request's ``on_event``), then its results or what it raised."""
    try:
        with scope:
            try:
                results: object = await runner.run_step(request)
            except trio.Cancelled:
                raise
            except BaseException as exc:  # the turn's failure: raised where it is consumed
                results = _Raised(exc)
            await send.send(results)
    finally:
        send.close()
        done.set()


def _kept(held: list[AgentEvent]) -> Callable[[object], Awaitable[None]]:
    """An ``on_event`` that keeps each event in ``held``."""

    async def keep(event: object) -> None:
        held.append(event)  # type: ignore[arg-type]

    return keep


def _own_outcomes(
    watch: Callable[[ToolCallFinished | ToolCallDeferred], Awaitable[None]],
) -> Callable[[object], Awaitable[None]]:
    async def on_event(event: object) -> None:
        if isinstance(event, ToolCallFinished | ToolCallDeferred):
            await watch(event)

    return on_event


def _parent_span(site: CallSite | None) -> int | None:
    """The span of the observed tool call a nested turn runs in (``None`` for a turn the
    application started)."""
    if site is None:
        return None
    scope = current_scope()
    return None if scope is None else scope[1]
