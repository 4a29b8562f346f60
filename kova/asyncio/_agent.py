"""``open_agent``: a kova agent used from asyncio code, its turns run in the guest run."""

from __future__ import annotations

import asyncio
from collections import deque
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import trio

from .._guest import AsyncioRuntime, Job, ensure_runtime, run_sync_in
from ..agent import Agent, AgentEvent, GuardTripped
from ..agent._agent import check_limits, structured_options
from ..agent._input import check_call_options, coerce_history

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType
    from typing import Self

    from .._models import InferenceConfig, ResponseFormat
    from ..agent import AgentResponse, CancelToken, PendingApprovals, UsageLimits
    from ..agent._guards import Guard
    from ..agent._input import HistoryInput
    from ..durable import PostgresJournal, SqliteJournal
    from ..sessions import Session

__all__ = ["AgentEventStream", "AsyncioAgent", "StructuredValueStream", "open_agent"]

OutputT = TypeVar("OutputT")
T = TypeVar("T")


@asynccontextmanager
async def open_agent(agent: Agent) -> AsyncIterator[AsyncioAgent]:
    """Open ``agent`` for asyncio code: ``async with kova.asyncio.open_agent(agent) as bridged:``.

    The agent's actors start in kova's trio guest run on the running loop (started now if
    this is its first use); ``bridged`` has the agent's own methods (:meth:`~AsyncioAgent.run`,
    :meth:`~AsyncioAgent.run_structured`, :meth:`~AsyncioAgent.stream`), awaited from
    asyncio, with the same results and errors. Leaving the block cancels the turns still
    running and closes the agent; it returns once everything has stopped.

    Raises:
        TypeError: ``agent`` is not a :class:`kova.agent.Agent`.
        BuildError: opening the agent failed (it is already open, say).
        RuntimeError: no asyncio loop is running.
    """
    if not isinstance(agent, Agent):
        raise TypeError(
            f"open_agent() takes a kova Agent (AgentBuilder()...build()), "
            f"got {type(agent).__name__}"
        )
    runtime = await ensure_runtime()
    bridged = AsyncioAgent(agent, runtime)
    await bridged._open()
    try:
        yield bridged
    finally:
        await bridged._close()


class AsyncioAgent:
    """A kova :class:`~kova.agent.Agent` seen from asyncio (from :func:`open_agent`).

    Methods: :meth:`run`, :meth:`run_structured`, :meth:`stream`, :meth:`stream_structured`,
    :meth:`resume`.
    The agent and its actors live on the trio side; each call runs as a trio task there and
    hands back its result, or raises its kova error, in the asyncio caller. Cancelling the
    caller (``task.cancel()``, ``asyncio.timeout``, a client that went away) cancels the turn;
    the caller sees ``CancelledError`` once the turn has stopped every request and tool call
    it started, and no messages were produced. Many turns may run at once, from many tasks.
    """

    __slots__ = ("_agent", "_closing", "_host", "_jobs", "_runtime")

    def __init__(self, agent: Agent, runtime: AsyncioRuntime) -> None:
        self._agent = agent
        self._runtime = runtime
        self._jobs: trio.Nursery | None = None
        self._closing: trio.Event | None = None
        self._host: Job[None] | None = None

    def __repr__(self) -> str:
        return f"<kova.asyncio agent {self._agent.config.name!r}>"

    @property
    def agent(self) -> Agent:
        """The agent itself (its ``config``, ``telemetry``, ``last_turn_input_tokens``)."""
        return self._agent

    @property
    def runtime(self) -> AsyncioRuntime:
        """The guest run the agent lives in."""
        return self._runtime

    # -- lifecycle: one trio task holds ``async with agent`` and the turns' nursery -------

    async def _open(self) -> None:
        opened: asyncio.Future[trio.Nursery] = self._runtime.loop.create_future()
        closing = trio.Event()
        self._closing = closing
        runtime = self._runtime
        host = self._host = runtime.spawn(runtime.nursery(), _host, self._agent, opened, closing)
        try:
            await asyncio.wait((opened, host.done), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            opened.cancel()  # the host task sees it and closes the agent at once
            closing.set()
            await host.until_finished()
            raise
        if not opened.done():  # opening failed: the agent's error, as it was raised
            opened.cancel()
            await host.until_finished()
            error = None if host.done.cancelled() else host.done.exception()
            raise error if error is not None else RuntimeError("the agent closed as it opened")
        self._jobs = opened.result()

    async def _close(self) -> None:
        host, closing = self._host, self._closing
        self._jobs = None
        if host is None or closing is None:
            return
        closing.set()
        cancelled = await host.until_finished()
        if host.done.done() and not host.done.cancelled():
            error = host.done.exception()
            if error is not None and not cancelled:
                raise error
        if cancelled:
            raise asyncio.CancelledError

    def _nursery(self) -> trio.Nursery:
        if self._jobs is None:
            raise RuntimeError(
                "this kova.asyncio agent is closed: use it inside its "
                "`async with kova.asyncio.open_agent(agent)` block"
            )
        return self._jobs

    # -- the agent's methods ----------------------------------------------------------

    async def run(
        self,
        history: HistoryInput,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        limits: UsageLimits | None = None,
        journal: SqliteJournal | PostgresJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: Session | None = None,
        guards: Sequence[Guard] | None = None,
    ) -> AgentResponse:
        """One turn over ``history``: :meth:`kova.agent.Agent.run`, from asyncio.

        Args:
            journal, turn_id: record the turn in a :class:`~kova.durable.SqliteJournal`
                under ``turn_id``, as :meth:`kova.agent.Agent.run` does: running again with
                the same ``turn_id`` after a crash goes on where the turn stopped (the
                journal's SQLite work runs in worker threads, off the asyncio loop too).
            deps: what the turn's tools receive as ``ctx.deps``.
            session: a :class:`~kova.sessions.Session`, as for :meth:`kova.agent.Agent.run`
                (its store's work runs in worker threads, off the asyncio loop too).
            guards: guards for this turn, replacing the agent's, as for
                :meth:`kova.agent.Agent.run` (a trip raises ``GuardrailTripped``).

        Raises:
            The agent's own errors (``ProviderError``, ``MaxIterationsError``, ...,
            ``TypeError`` for bad input, ``TurnClaimedError`` / ``JournalError`` from the
            journal), as themselves.
            TurnCancelled: ``cancel`` was cancelled, or the agent was closed meanwhile.
            CancelledError: this task was cancelled; the turn has stopped (a journaled
            turn keeps what it recorded, and the next run goes on from there).
        """
        turn = partial(
            self._agent.run,
            history,
            config=config,
            cancel=cancel,
            limits=limits,
            journal=journal,
            turn_id=turn_id,
            deps=deps,
            session=session,
            guards=guards,
        )
        return await self._runtime.spawn(self._nursery(), turn).wait()

    async def resume(
        self,
        history: HistoryInput | None = None,
        pending: PendingApprovals | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        journal: SqliteJournal | PostgresJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: Session | None = None,
    ) -> AgentResponse:
        """Continue a turn that paused for approvals: :meth:`kova.agent.Agent.resume`, from
        asyncio (``history`` is the paused turn's history plus its ``new_messages``;
        ``pending`` its decided ``response.pending``, in this process or another).

        Args:
            journal, turn_id: the journal a turn run with ``journal=`` paused in, and its
                id: the resumed part is recorded there, and resuming again after a crash
                goes on without running finished calls again (see ``docs/durable.md``).
            deps: what the turn's tools receive as ``ctx.deps``.
            session: the session the turn paused in (``bridged.resume(pending,
                session=session)``), as for :meth:`kova.agent.Agent.resume`.

        Raises:
            ApprovalMismatchError: ``pending`` does not fit ``history``; before anything runs.
            JournalError: ``turn_id`` holds another conversation; before anything runs.
            The errors of :meth:`run`, as themselves.
        """
        turn = partial(
            self._agent.resume,
            history,
            pending,
            config=config,
            cancel=cancel,
            journal=journal,
            turn_id=turn_id,
            deps=deps,
            session=session,
        )
        return await self._runtime.spawn(self._nursery(), turn).wait()

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
    ) -> tuple[Any, AgentResponse]:
        """:meth:`kova.agent.Agent.run_structured`, from asyncio (errors as :meth:`run`,
        plus ``StructuredOutputError``; ``deps`` and ``session`` as for :meth:`run`)."""
        turn = partial(
            self._agent.run_structured,
            history,
            output,
            config=config,
            cancel=cancel,
            output_retries=output_retries,
            limits=limits,
            deps=deps,
            session=session,
        )
        return await self._runtime.spawn(self._nursery(), turn).wait()

    def stream(
        self,
        history: HistoryInput | None = None,
        *,
        config: InferenceConfig | None = None,
        cancel: CancelToken | None = None,
        buffer: int = 16,
        resume: PendingApprovals | None = None,
        limits: UsageLimits | None = None,
        journal: SqliteJournal | PostgresJournal | None = None,
        turn_id: str | None = None,
        deps: object = None,
        session: Session | None = None,
        guards: Sequence[Guard] | None = None,
    ) -> AgentEventStream:
        """Stream one turn: ``async for event in bridged.stream(history):``.

        The events are :meth:`kova.agent.Agent.stream`'s, the same objects. The turn starts
        at the first iteration; the agent's errors are raised from the iteration. Also an
        async context manager (``async with bridged.stream(history) as events:``), whose
        exit stops the turn if it is still running. Cancelling the iterating task, or
        :meth:`AgentEventStream.aclose`, cancels the turn and returns once it stopped.

        Args:
            buffer: events the turn may run ahead of the consumer before it waits.
            resume: a decided ``response.pending``: stream the rest of that paused turn.
            limits: usage limits for this turn (not with ``resume``).
            journal, turn_id: record the turn as :meth:`run` (with ``resume``, as
                :meth:`resume`) does; a turn continued from the journal streams what it
                does from there on.
            deps: what the turn's tools receive as ``ctx.deps``.
            session: as for :meth:`kova.agent.Agent.stream` (with ``resume``, ``history``
                left out).
            guards: guards for this turn, replacing the agent's (their verdicts are events).

        Raises:
            TypeError: ``history`` or an option has the wrong type (raised here).
        """
        messages = None if history is None and session is not None else coerce_history(history)
        check_call_options(config, cancel)
        _check_buffer(buffer)
        self._nursery()
        opener = partial(
            self._agent.stream,
            messages,
            config=config,
            cancel=cancel,
            buffer=buffer,
            resume=resume,
            limits=limits,
            journal=journal,
            turn_id=turn_id,
            deps=deps,
            session=session,
            guards=guards,
        )
        return AgentEventStream(self, opener, buffer)

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
        session: Session | None = None,
    ) -> StructuredValueStream:
        """:meth:`kova.agent.Agent.stream_structured`, from asyncio:
        ``async for value in bridged.stream_structured(history, Model):``.

        The values are the agent's (the best-effort parse of the JSON so far, the last one
        validated); once the iteration has ended, :attr:`StructuredValueStream.value` and
        :attr:`StructuredValueStream.response` hold the outcome. Starting, errors, closing
        and cancellation as for :meth:`stream`.

        Args:
            limits: usage limits for each attempt (as for :meth:`run_structured`).
            session: as for :meth:`run`.

        Raises:
            TypeError: ``history`` or an option has the wrong type (raised here).
        """
        messages, _ = structured_options(self._agent, history, config, cancel, output_retries)
        check_limits(limits)
        _check_buffer(buffer)
        self._nursery()
        opener = partial(
            self._agent.stream_structured,
            messages,
            output,
            config=config,
            cancel=cancel,
            output_retries=output_retries,
            limits=limits,
            deps=deps,
            session=session,
        )
        return StructuredValueStream(self, opener, buffer)


def _check_buffer(buffer: object) -> None:
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
        raise TypeError(f"buffer must be a positive int, got {buffer!r}")


async def _host(agent: Agent, opened: asyncio.Future[trio.Nursery], closing: trio.Event) -> None:
    """The trio task that holds the agent open, and the nursery its turns run in, until the
    asyncio side's block ends (turns still running are cancelled first)."""
    async with agent, trio.open_nursery() as jobs:
        if opened.done():  # the opener was cancelled while the agent started
            return
        opened.set_result(jobs)
        await closing.wait()
        jobs.cancel_scope.cancel(reason="the kova.asyncio agent's block ended")


class _Pipe:
    """What the producing trio task and the consuming asyncio task share (one thread, taking
    turns: no lock). The producer holds only this, not the stream, so a stream dropped
    mid-turn is collected and its finalizer can stop the turn."""

    __slots__ = ("buffer", "items", "outcome", "space", "tripped", "waiter")

    def __init__(self, buffer: int) -> None:
        self.buffer = buffer
        self.items: deque[Any] = deque()
        self.tripped: BaseException | None = None
        """A guard's trip (see :meth:`trip`)."""
        self.waiter: asyncio.Future[None] | None = None
        """The consumer's, while it waits for an item or the end."""
        self.space: trio.Event | None = None
        """The producer's, while it waits for the consumer to catch up."""
        self.outcome: Any = None
        """The trio-side stream object once iterated to its end (a structured stream's
        value and response are read from it)."""

    def trip(self, exc: BaseException) -> None:
        """A guard tripped (called in the trip's own moment, from trio's side): what the
        consumer has not taken is dropped; it gets the ``GuardTripped`` event, then the
        error."""
        self.tripped = exc
        self.items.clear()
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)


async def _produce(opener: Callable[[], AbstractAsyncContextManager[Any]], pipe: _Pipe) -> None:
    """The trio side of a stream: iterate the agent's stream into the pipe. What one network
    read decodes arrives without a checkpoint in between, so it crosses in one wake-up."""
    items = pipe.items
    buffer = pipe.buffer
    opened = opener()
    if hasattr(opened, "on_trip"):  # an agent's stream: a guard's trip stops it at once
        opened.on_trip = pipe.trip
    async with opened as stream:
        async for item in stream:
            if pipe.tripped is not None and type(item) is not GuardTripped:
                continue  # after a trip only the guard's event, then its error
            items.append(item)
            pipe.wake()
            if len(items) >= buffer:
                space = pipe.space = trio.Event()
                await space.wait()
        pipe.outcome = stream


class _BridgedStream(Generic[T]):
    """A stream of the agent's, for asyncio: the items of a trio-side stream, handed over
    through a :class:`_Pipe` by a job of the bridged agent."""

    __slots__ = ("_bridged", "_job", "_over", "_pipe", "_turn")

    def __init__(
        self,
        bridged: AsyncioAgent,
        opener: Callable[[], AbstractAsyncContextManager[Any]],
        buffer: int,
    ) -> None:
        self._bridged = bridged
        self._pipe = _Pipe(buffer)
        self._turn = partial(_produce, opener, self._pipe)
        self._job: Job[None] | None = None
        self._over = False

    async def __aenter__(self) -> Self:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    def _start(self) -> Job[None]:
        job = self._job
        if job is None:
            bridged = self._bridged
            job = bridged._runtime.spawn(bridged._nursery(), self._turn)
            job.on_finish = self._pipe.wake
            self._job = job
        return job

    async def __anext__(self) -> T:
        if self._over:
            raise StopAsyncIteration
        job = self._start()
        pipe = self._pipe
        items = pipe.items
        while True:
            if items:
                item: T = items.popleft()
                space = pipe.space
                if space is not None and len(items) < pipe.buffer:
                    pipe.space = None
                    space.set()
                return item
            if job.finished:
                self._over = True
                done = job.done
                error = None if done.cancelled() else done.exception()
                if error is not None:
                    raise error
                raise StopAsyncIteration
            waiter = pipe.waiter = job.done.get_loop().create_future()
            try:
                await waiter
            except asyncio.CancelledError:
                pipe.waiter = None
                await self._stop(job)
                raise

    async def aclose(self) -> None:
        """Stop the turn if it is still running; return once it has stopped (no messages)."""
        self._over = True
        if self._job is not None:
            await self._stop(self._job)

    async def _stop(self, job: Job[None]) -> None:
        self._over = True
        cancelled = False
        if not job.finished:
            job.cancel()
            cancelled = await job.until_finished()
        self._pipe.items.clear()
        if cancelled:
            raise asyncio.CancelledError

    def __del__(self) -> None:
        job = self._job
        if job is not None and not job.finished:
            run_sync_in(self._bridged._runtime, job.cancel)


class AgentEventStream(_BridgedStream[AgentEvent]):
    """The events of one streamed turn, for asyncio (from :meth:`AsyncioAgent.stream`).

    An async iterator, and an async context manager that closes it. The turn runs ahead of
    the consumer by up to ``buffer`` events; a slower consumer holds the turn back. A
    stream dropped unfinished (``break`` out of ``async for`` without the ``async with``)
    has its turn cancelled when it is garbage collected.
    """

    __slots__ = ()


class StructuredValueStream(_BridgedStream[Any]):
    """The values of one streamed structured turn, for asyncio (from
    :meth:`AsyncioAgent.stream_structured`): iterate it, then read :attr:`value` and
    :attr:`response`. Starting, closing and cancellation as :class:`AgentEventStream`."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        """The validated value.

        Raises:
            RuntimeError: the iteration has not reached it.
        """
        return self._finished().value

    @property
    def response(self) -> AgentResponse:
        """The whole turn (every attempt's messages).

        Raises:
            RuntimeError: the iteration has not finished.
        """
        response: AgentResponse = self._finished().response
        return response

    def _finished(self) -> Any:
        outcome = self._pipe.outcome
        if outcome is None:
            raise RuntimeError("the structured stream has not finished: iterate it first")
        return outcome
