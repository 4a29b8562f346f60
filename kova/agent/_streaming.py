"""What ``agent.stream(...)`` returns: the context manager of one streamed turn.

A plain class rather than an ``asynccontextmanager`` generator: a program may hold thousands
of streamed turns at once (each waiting for its model's answer), and a generator would keep
its frame, the wrapper's ``__dict__`` and an exit stack for the whole turn. A turn with
neither a journal nor a cancel token, the common case, holds only the agent loop's own
generator, and, when the agent has tools, the nursery its streamed tool steps run in (the
block's own: the consumer's frame pulls the loop, which holds no nursery across a
``yield``); the others keep an exit stack for what they entered.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, NoReturn

import trio

from .._door import require_trio
from .._groups import raise_lone
from ._cancel import stream_in_task
from ._guard_gate import concurrent
from ._guards import check_guards
from ._input import check_call_options, coerce_history
from ._loop import drive, open_journaled
from ._needs_async_with import refuse_async_for
from ._steps import NO_OBSERVER

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
    from types import TracebackType

    from .._models import InferenceConfig, Message
    from ._approvals import PendingApprovals
    from ._cancel import CancelToken
    from ._context import ContextPolicy
    from ._driver_context import DriverContext
    from ._events import AgentEvent
    from ._guards import Guard
    from ._input import HistoryInput
    from ._limits import UsageLimits
    from ._seams import OpenAgent, TurnJournal
    from ._signing import Decisions
    from ._turn import Turn

__all__ = ["TurnStream"]


class TurnStream:
    """``async with agent.stream(history, ...) as events``: see :meth:`Agent.stream`. The
    arguments are checked on entering."""

    __slots__ = (
        "_agent",
        "_buffer",
        "_cancel",
        "_config",
        "_context",
        "_deps",
        "_events",
        "_guards",
        "_history",
        "_journal",
        "_limits",
        "_resume",
        "_stack",
        "_taken",
        "_tasks",
        "_turn_id",
        "on_trip",
    )

    def __init__(
        self,
        agent: OpenAgent,
        history: HistoryInput,
        config: InferenceConfig | None,
        cancel: CancelToken | None,
        buffer: int,
        resume: PendingApprovals | None,
        limits: UsageLimits | None,
        journal: TurnJournal | None,
        turn_id: str | None,
        deps: object,
        context: ContextPolicy | None = None,
        guards: Sequence[Guard] | None = None,
    ) -> None:
        self._agent = agent
        self._guards = None if guards is None else check_guards(guards)
        self.on_trip: Callable[[BaseException], None] | None = None
        """Told of a guard's trip the moment it happens, before the error reaches the
        iteration (the asyncio bridge drops the events it still holds for its consumer)."""
        self._context = context
        self._history = history
        self._config = config
        self._cancel = cancel
        self._buffer = buffer
        self._resume = resume
        self._limits = limits
        self._journal = journal
        self._turn_id = turn_id
        self._deps = deps
        self._events: AsyncGenerator[AgentEvent, None] | None = None
        self._stack: AsyncExitStack | None = None
        self._tasks: _Tasks | None = None
        self._taken: tuple[Decisions, str] | None = None

    def __aiter__(self) -> NoReturn:
        refuse_async_for(self, "agent.stream(...)", "events")

    async def __aenter__(self) -> AsyncIterator[AgentEvent]:
        try:
            require_trio("agent.stream()")
            agent = self._agent
            messages = coerce_history(self._history)
            config, cancel = self._config, self._cancel
            check_call_options(config, cancel)
            driver = agent.driver_context()
            if self._resume is not None:
                driver.signer.verify_pending(self._resume)
            observer = NO_OBSERVER
            journal, turn_id = self._journal, self._turn_id
            guards = driver.config.guards if self._guards is None else self._guards
            # Input guards beside the turn: a producer task's nursery.
            beside = bool(guards) and concurrent(guards)
            tools = len(driver.config.registry) > 0  # a streamed tool step runs in a nursery

            def steps(
                nursery: trio.Nursery | None = None,
                on_trip: Callable[[BaseException], None] | None = None,
            ) -> AsyncGenerator[AgentEvent, None]:
                return drive(
                    driver,
                    turn,
                    config,
                    streamed=True,
                    observer=observer,
                    deps=self._deps,
                    guards=guards,
                    nursery=nursery,  # concurrent input guards, streamed tool steps
                    on_trip=on_trip,
                )

            if journal is None and turn_id is None:
                turn = self._unjournaled(driver, messages)
                if cancel is None and not beside:
                    # The common case: the agent loop's generator, pulled by the consumer.
                    tasks = None
                    if tools:
                        self._tasks = opening = _Tasks()
                        tasks = await opening.__aenter__()
                    events = self._events = steps(tasks, self.on_trip)  # streamed tool steps
                    return events

            async with AsyncExitStack() as stack:
                if journal is not None or turn_id is not None:
                    opened = open_journaled(
                        driver, messages, config, self._limits, journal, turn_id, self._resume
                    )
                    turn, observer = await stack.enter_async_context(opened)
                entered: AsyncIterator[AgentEvent]
                if cancel is None and not beside:
                    tasks = await stack.enter_async_context(_Tasks()) if tools else None
                    generator = steps(tasks, self.on_trip)
                    stack.push_async_callback(generator.aclose)
                    entered = generator
                else:
                    entered = await stack.enter_async_context(
                        stream_in_task(
                            steps,
                            cancel,
                            self._buffer,
                            with_nursery=beside or tools,
                            on_trip=self.on_trip,
                        )
                    )
                self._stack = stack.pop_all()
            return entered
        except BaseException:
            self._give_back()
            raise

    def _unjournaled(self, driver: DriverContext, messages: tuple[Message, ...]) -> Turn:
        if self._resume is None:
            return driver.start_turn(messages, self._config, self._limits, context=self._context)
        # Once per agent: the decisions are taken here and given back if the stream fails.
        nonce = self._resume.nonce
        driver.decisions.take(nonce)
        self._taken = (driver.decisions, nonce)
        try:
            return driver.resume_turn(
                messages, self._resume, self._config, self._context, self._limits
            )
        except BaseException:
            self._give_back()
            raise

    def _give_back(self) -> None:
        taken, self._taken = self._taken, None
        if taken is not None:
            decisions, nonce = taken
            decisions.give_back(nonce)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if exc_type is not None:
            self._give_back()
        events, stack, tasks = self._events, self._stack, self._tasks
        self._events = self._stack = self._tasks = None
        if events is not None:
            try:
                await events.aclose()
            finally:
                if tasks is not None:
                    await tasks.__aexit__(None, None, None)
            return False
        assert stack is not None, "entered"
        return bool(await stack.__aexit__(exc_type, exc, traceback))


class _Tasks:
    """The nursery a streamed turn's tool steps run in (see ``ToolStep``), opened by the
    turn stream's block. The block's own exception passes it by: its steps have ended (the
    loop closed them) before it closes."""

    __slots__ = ("_opening",)

    async def __aenter__(self) -> trio.Nursery:
        self._opening = trio.open_nursery()
        return await self._opening.__aenter__()

    async def __aexit__(self, *exc_info: object) -> bool:
        try:
            await self._opening.__aexit__(None, None, None)
        except BaseExceptionGroup as group:  # a lone exception leaves as itself
            raise_lone(group)
        return False
