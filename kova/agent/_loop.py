"""The in-process driver: one turn core driven on trio, as the events it produces.

:func:`drive` only sequences what :meth:`Turn.next_step <kova.agent.Turn.next_step>` says,
running the step objects (``_steps``) streamed or not; ``Agent.run``, ``Agent.stream``, a
resumed turn, a journaled one (its journal observes the steps) and an agent used as a tool
(``_as_tool``) all drive turns through it.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from .._groups import lone_exceptions
from ._context import Compact
from ._cost import load_sheet
from ._events import AgentEvent, TurnCompleted
from ._guard_gate import GuardGate, concurrent
from ._nesting import nested
from ._steps import NO_OBSERVER, VISIBLE, ModelStep, StepObserver, ToolStep
from ._tool_deltas import TOOL_STREAM
from ._turn import AwaitApproval, CallModel, Finished, RunTools

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
    from contextlib import AbstractAsyncContextManager

    from .._models import InferenceConfig, Message, StreamEvent
    from ._approvals import PendingApprovals
    from ._driver_context import DriverContext
    from ._events import AgentResponse
    from ._guards import Guard
    from ._limits import UsageLimits
    from ._nesting import CallSite
    from ._turn import Turn

__all__ = ["drive", "open_journaled", "run_turn"]


async def drive(
    context: DriverContext,
    turn: Turn,
    overrides: InferenceConfig | None,
    *,
    streamed: bool,
    observer: StepObserver = NO_OBSERVER,
    deps: object = None,
    site: CallSite | None = None,
    guards: Sequence[Guard] | None = None,
    nursery: trio.Nursery | None = None,
    on_trip: Callable[[BaseException], None] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Drive ``turn`` to its end, as the events it produces (the last one TurnCompleted;
    not ``streamed``, only that one). ``site``: the outer tool call this turn serves (an
    agent used as a tool); ``guards``: the call's (default: the agent's), whose concurrent
    input guards run in ``nursery`` (without one, before the first call), as do a streamed
    tool step's calls (without one, in this frame, their events after the step); ``on_trip``
    is told of a guard's trip the moment it happens. An async generator pulled by its
    consumer: nothing in it holds a cancel scope or a nursery across a ``yield`` (trio
    forbids that)."""
    model, tools = _steps_for(
        context, turn, overrides, streamed, observer, deps, site, guards, nursery, on_trip
    )
    try:
        step = turn.next_step()
        while True:
            if streamed:  # what the core did by itself (denials decided out of band, ...)
                for done in tools.core_events(turn):
                    yield done
            if type(step) is Compact:  # a summary the context policy asked for
                await model.compact(step, turn)
            elif type(step) is CallModel:
                if step.count_tokens:
                    turn.tokens_counted(await model.count_tokens(step.request))
                elif not streamed:
                    await model.complete(step.request, turn)
                else:
                    async with model.stream(step.request, turn) as reads:
                        batch: Sequence[StreamEvent] | None = reads.first
                        while batch is not None:
                            for delta in batch:
                                if isinstance(delta, VISIBLE):
                                    yield delta
                                elif (  # a tool call's arguments so far
                                    isinstance(delta, TOOL_STREAM)
                                    and (progress := reads.tool_delta(delta)) is not None
                                ):
                                    yield progress
                            batch = await reads.next()
            elif type(step) is RunTools:
                if not streamed:
                    await tools.run(turn, step)
                else:
                    async with tools.open(turn, step) as events:
                        async for event in events:
                            yield event
            else:  # Finished or AwaitApproval: the guards' last word, then the outcome
                assert isinstance(step, Finished | AwaitApproval)
                for last in await model.outcome(turn, step):
                    yield last
                return
            step = turn.next_step()
    except BaseException as exc:
        model.finished(turn, exc)
        for tripped in model.trip_events(exc):  # a streamed trip says so, then raises
            yield tripped
        raise


def _steps_for(
    context: DriverContext,
    turn: Turn,
    overrides: InferenceConfig | None,
    streamed: bool,
    observer: StepObserver,
    deps: object,
    site: CallSite | None,
    guards: Sequence[Guard] | None,
    nursery: trio.Nursery | None,
    on_trip: Callable[[BaseException], None] | None = None,
) -> tuple[ModelStep, ToolStep]:
    """The step objects one turn's loop runs, sharing the turn's guards (if any); the model
    step reports the turn's start now (and its end, from the loop)."""
    emitter = context.telemetry.emitter(context.subscribers)  # None when nobody listens
    if guards is None:
        guards = context.config.guards
    gate = None
    # A turn read back from its journal may hold a guard's trip, to raise again; any other
    # turn without guards has no gate at all.
    if guards or observer is not NO_OBSERVER:
        gate = GuardGate.of(
            guards,
            turn,
            nursery,
            save=None if observer is NO_OBSERVER else observer.saved,  # decisions recorded
            emitter=emitter,
            on_trip=on_trip,
        )
    return (
        ModelStep(
            context,
            context.inference(overrides),
            emitter,
            site,
            observer=observer,
            gate=gate,
            streamed=streamed,
        ),
        ToolStep(
            context,
            emitter,
            site,
            streamed=streamed,
            deps=deps,
            observer=observer,
            gate=gate,
            tasks=nursery,
        ),
    )


async def run_turn(
    context: DriverContext,
    turn: Turn,
    overrides: InferenceConfig | None,
    observer: StepObserver = NO_OBSERVER,
    *,
    deps: object = None,
    guards: Sequence[Guard] | None = None,
    site: CallSite | None = None,
    nursery: trio.Nursery | None = None,
) -> AgentResponse:
    """One turn driven to its response by :func:`drive` in this frame (input guards beside
    it and streamed tool steps in ``nursery``, opened here when the turn needs one). Not
    streamed, its one event is the outcome; the inner turn of an agent tool (``site``)
    whose outer turn is streamed streams, each of its events sent to the outer stream with
    its path."""
    if guards is None:
        guards = context.config.guards
    # An inner turn's events go to the outer stream: each level adds its call's id to the path.
    emit, prefix = (None, ()) if site is None else (site.emit, (site.call.id,))
    if nursery is None and (
        (guards and concurrent(guards)) or (emit is not None and len(context.config.registry))
    ):
        with lone_exceptions():  # the turn's own error leaves as itself, not in a group
            async with trio.open_nursery() as nursery:
                answer = await run_turn(
                    context, turn, overrides, observer, deps=deps, guards=guards, site=site,
                    nursery=nursery,
                )  # fmt: skip
                nursery.cancel_scope.cancel(reason="the turn is over")  # guards that still run
        return answer
    steps = drive(
        context,
        turn,
        overrides,
        streamed=emit is not None,
        observer=observer,
        deps=deps,
        site=site,
        guards=guards,
        nursery=nursery,
    )
    response = None
    try:
        # The last event is TurnCompleted; read on to the loop's own end (no GeneratorExit
        # thrown into it to close it early).
        async for event in steps:
            if type(event) is TurnCompleted:
                response = event.response
            else:  # not streamed, a turn yields its outcome only
                assert emit is not None
                await emit(nested(event, prefix))
    finally:
        await steps.aclose()
    assert response is not None, "a turn ends with TurnCompleted or an error"
    return response


def open_journaled(
    context: DriverContext,
    history: tuple[Message, ...],
    overrides: InferenceConfig | None,
    limits: UsageLimits | None,
    journal: object,
    turn_id: object,
    pending: PendingApprovals | None = None,
) -> AbstractAsyncContextManager[tuple[Turn, StepObserver]]:
    """The journal's claim on the turn ``turn_id``, and the turn to drive with the journal
    observing its steps (kova.durable imports the agent, not the reverse)."""
    if journal is None:
        raise TypeError(
            "turn_id= names a turn in a journal: pass journal= (a kova.durable.SqliteJournal)"
        )
    open_turn = getattr(journal, "open_turn", None)
    if open_turn is None:
        raise TypeError(
            f"journal must be a kova.durable.SqliteJournal, got {type(journal).__name__}"
        )
    opened: AbstractAsyncContextManager[tuple[Turn, StepObserver]] = open_turn(
        context, history, overrides, limits, turn_id, pending
    )
    return _with_sheet(context, opened)


@asynccontextmanager
async def _with_sheet(
    context: DriverContext, opened: AbstractAsyncContextManager[tuple[Turn, StepObserver]]
) -> AsyncIterator[tuple[Turn, StepObserver]]:
    """A journaled turn's claim, after the price sheet (the journal stores every step's
    cost: it is loaded in a worker thread, not imported by the first store on the loop)."""
    if context.meter.wants_sheet(None, reads_costs=True):
        await trio.to_thread.run_sync(load_sheet, abandon_on_cancel=True)
    async with opened as claimed:
        yield claimed


async def run_journaled(
    context: DriverContext,
    history: tuple[Message, ...],
    overrides: InferenceConfig | None,
    limits: UsageLimits | None,
    journal: object,
    turn_id: object,
    *,
    deps: object = None,
    pending: PendingApprovals | None = None,
    guards: Sequence[Guard] | None = None,
) -> AgentResponse:
    """One non-streamed turn recorded in ``journal`` (see :func:`open_journaled`)."""
    opening = open_journaled(context, history, overrides, limits, journal, turn_id, pending)
    async with opening as (turn, journaled):
        return await run_turn(context, turn, overrides, journaled, deps=deps, guards=guards)
