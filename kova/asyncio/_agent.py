"""``open_agent``: a kova agent used from asyncio code, its turns run in the guest run."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections import deque
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

import trio

from .._guest import AsyncioRuntime, Job, ensure_runtime, held_open, run_sync_in
from ..agent import Agent, AgentEvent, GuardTripped
from ..agent._input import check_call_options, coerce_history

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine
    from contextlib import AbstractAsyncContextManager
    from typing import Self

    from typing_extensions import TypeVar as WithDefault  # PEP 696 (typing's in 3.13)

    from ..agent import AgentResponse, StructuredStream

    OutputT = WithDefault("OutputT", default=Any)  # a bare StructuredValueStream is [Any]
else:
    OutputT = TypeVar("OutputT")

__all__ = ["AgentEventStream", "AsyncioAgent", "StructuredValueStream", "open_agent"]

T = TypeVar("T")
R = TypeVar("R")
C = TypeVar("C", bound="Callable[..., object]")
P = ParamSpec("P")


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
    async with held_open(runtime, partial(_opened, agent), "the agent") as bridged._jobs:
        try:
            yield bridged
        finally:
            bridged._jobs = None


def _forwarded(method: Callable[..., object], call: C, returns: str | None = None) -> C:
    """``call`` dressed as the agent's ``method``: help(), ``inspect.signature`` and docs
    tools show the method's own parameters (``returns``: another return annotation). Type
    checkers see them too, overloads included, through the ParamSpec the callers below are
    typed by (a second argument to those callers would lose the overloads: mypy 2.4)."""
    functools.update_wrapper(call, method)
    call.__qualname__ = f"AsyncioAgent.{method.__name__}"
    call.__module__ = __name__
    if returns is not None:
        call.__signature__ = inspect.signature(method).replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
    return call


def _turn(
    method: Callable[Concatenate[Agent, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[AsyncioAgent, P], Coroutine[Any, Any, R]]:
    """An awaited method of the agent, from asyncio: each call a trio task in the guest run."""

    async def turn(self: AsyncioAgent, /, *args: P.args, **kwargs: P.kwargs) -> R:
        call = partial(method, self._agent, *args, **kwargs)
        return await self._runtime.spawn(self._nursery(), call).wait()

    return _forwarded(method, turn)


def _stream(
    method: Callable[Concatenate[Agent, P], AbstractAsyncContextManager[AsyncIterator[AgentEvent]]],
) -> Callable[Concatenate[AsyncioAgent, P], AgentEventStream]:
    """The agent's ``stream``, from asyncio."""
    signature = inspect.signature(method)

    def stream(self: AsyncioAgent, /, *args: P.args, **kwargs: P.kwargs) -> AgentEventStream:
        buffer = _checked(self, signature, args, kwargs)
        return AgentEventStream(self, method(self._agent, *args, **kwargs), buffer)

    return _forwarded(method, stream, "AgentEventStream")


def _structured_stream(
    method: Callable[Concatenate[Agent, P], AbstractAsyncContextManager[StructuredStream[T]]],
) -> Callable[Concatenate[AsyncioAgent, P], StructuredValueStream[T]]:
    """The agent's ``stream_structured``, from asyncio (typed by the output it validates)."""
    signature = inspect.signature(method)

    def stream(
        self: AsyncioAgent, /, *args: P.args, **kwargs: P.kwargs
    ) -> StructuredValueStream[T]:
        buffer = _checked(self, signature, args, kwargs)
        return StructuredValueStream(self, method(self._agent, *args, **kwargs), buffer)

    return _forwarded(method, stream, "StructuredValueStream")


def _checked(
    bridged: AsyncioAgent,
    signature: inspect.Signature,
    args: tuple[object, ...],
    kwargs: dict[str, object],
) -> int:
    """A bridged stream's arguments checked when it is called (the agent's own stream checks
    them on entering, in the trio task: too late for the asyncio caller); its ``buffer``.

    Raises:
        TypeError: an argument is unknown, missing or of the wrong type.
        RuntimeError: the bridged agent is closed.
    """
    arguments = signature.bind(bridged.agent, *args, **kwargs).arguments
    history = arguments.get("history")
    if history is not None or arguments.get("session") is None:
        coerce_history(history)
    check_call_options(arguments.get("config"), arguments.get("cancel"))
    buffer = arguments.get("buffer", 16)
    if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
        raise TypeError(f"buffer must be a positive int, got {buffer!r}")
    bridged._nursery()
    return buffer


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

    __slots__ = ("_agent", "_jobs", "_runtime")

    def __init__(self, agent: Agent, runtime: AsyncioRuntime) -> None:
        self._agent = agent
        self._runtime = runtime
        self._jobs: trio.Nursery | None = None
        """The nursery the turns run in, while the agent is open (see _opened)."""

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

    def _nursery(self) -> trio.Nursery:
        if self._jobs is None:
            raise RuntimeError(
                "this kova.asyncio agent is closed: use it inside its "
                "`async with kova.asyncio.open_agent(agent)` block"
            )
        return self._jobs

    # -- the agent's methods, with its own signatures (see _forwarded) -------------------

    run = _turn(Agent.run)
    run.__doc__ = """One turn over ``history``: :meth:`kova.agent.Agent.run` from asyncio, the same
    parameters, result and errors. A journal's or a session's store work runs in worker
    threads, off the asyncio loop too.

    Raises:
        The agent's own errors, as themselves (``TypeError`` for bad input too).
        TurnCancelled: ``cancel`` was cancelled, or the agent was closed meanwhile.
        CancelledError: this task was cancelled; the turn has stopped (a journaled turn
        keeps what it recorded, and the next run goes on from there).
    """
    resume = _turn(Agent.resume)
    resume.__doc__ = """Continue a turn that paused for approvals: :meth:`kova.agent.Agent.resume`
    from asyncio (``history`` is the paused turn's history plus its ``new_messages``,
    ``pending`` its decided ``response.pending``, in this process or another). Errors and
    cancellation as for :meth:`run`."""
    run_structured = _turn(Agent.run_structured)
    run_structured.__doc__ = """:meth:`kova.agent.Agent.run_structured` from asyncio (errors and
    cancellation as for :meth:`run`, plus ``StructuredOutputError``)."""
    stream = _stream(Agent.stream)
    stream.__doc__ = """Stream one turn: ``async for event in bridged.stream(history):``.

    The parameters and events are :meth:`kova.agent.Agent.stream`'s (``buffer`` also bounds
    the events waiting for the asyncio consumer). The turn starts at the first iteration; the
    agent's errors are raised from the iteration. Also an async context manager (``async with
    bridged.stream(history) as events:``), whose exit stops the turn if it is still running.
    Cancelling the iterating task, or :meth:`AgentEventStream.aclose`, cancels the turn and
    returns once it stopped.

    Raises:
        TypeError: ``history`` or an option has the wrong type (raised here).
    """
    stream_structured = _structured_stream(Agent.stream_structured)
    stream_structured.__doc__ = """:meth:`kova.agent.Agent.stream_structured` from asyncio:
    ``async for value in bridged.stream_structured(history, Model):``.

    The values are the agent's (the best-effort parse of the JSON so far, the last one
    validated); once the iteration has ended, :attr:`StructuredValueStream.value` and
    :attr:`StructuredValueStream.response` hold the outcome. Starting, errors, closing and
    cancellation as for :meth:`stream`.

    Raises:
        TypeError: ``history`` or an option has the wrong type (raised here).
    """


@asynccontextmanager
async def _opened(agent: Agent) -> AsyncIterator[trio.Nursery]:
    """The agent open, and the nursery its turns run in, held by a trio task until the
    asyncio side's block ends (turns still running are cancelled first)."""
    async with agent, trio.open_nursery() as jobs:
        yield jobs
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


async def _produce(opened: AbstractAsyncContextManager[Any], pipe: _Pipe) -> None:
    """The trio side of a stream: iterate the agent's stream into the pipe. What one network
    read decodes arrives without a checkpoint in between, so it crosses in one wake-up."""
    items = pipe.items
    buffer = pipe.buffer
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
        opened: AbstractAsyncContextManager[Any],
        buffer: int,
    ) -> None:
        self._bridged = bridged
        self._pipe = _Pipe(buffer)
        self._turn = partial(_produce, opened, self._pipe)
        self._job: Job[None] | None = None
        self._over = False

    async def __aenter__(self) -> Self:
        self._start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
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


class StructuredValueStream(_BridgedStream[Any], Generic[OutputT]):
    """The values of one streamed structured turn, for asyncio (from
    :meth:`AsyncioAgent.stream_structured`): iterate it, then read :attr:`value` and
    :attr:`response`. Starting, closing and cancellation as :class:`AgentEventStream`."""

    __slots__ = ()

    @property
    def value(self) -> OutputT:
        """The validated value.

        Raises:
            RuntimeError: the iteration has not reached it.
        """
        value: OutputT = self._finished().value
        return value

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
