"""Streamed turns on a session: ``agent.stream(prompt, session=...)`` and
``agent.stream_structured(prompt, output, session=...)``.

The session's gate is held from entering the block to leaving it; the turn's messages are
appended when it completes, before its last event (TurnCompleted, or the validated value) is
handed to the consumer, so a consumer that has seen it can rely on the session holding the
turn. A turn left early, cancelled or failed appends nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ..agent._events import TurnCompleted
from ..agent._input import coerce_history
from ..agent._needs_async_with import refuse_async_for
from ..agent._structured import StructuredStream
from ._view import working_messages

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._messages import Message
    from ..agent._approvals import PendingApprovals
    from ..agent._events import AgentEvent, AgentResponse
    from ._view import SessionState

__all__ = ["SessionStream", "SessionStructuredStream"]


class _Session(Protocol):
    """What a streamed turn needs of its :class:`~kova.sessions.Session` (whose module
    imports this one, not the reverse)."""

    def _gate(self) -> AbstractAsyncContextManager[None]: ...
    async def _read_free(self, what: str) -> SessionState: ...
    async def _paused(self, pending: PendingApprovals | None) -> tuple[SessionState, Any]: ...
    async def _take_decisions(self, state: SessionState, decided: Any) -> SessionState: ...
    async def _give_back_decisions(self, state: SessionState) -> None: ...
    async def _commit(
        self,
        state: SessionState,
        prompt: Sequence[Message],
        response: AgentResponse,
        *,
        same_turn: bool = False,
    ) -> None: ...


class _Gated:
    """A streamed turn's block on a session: the inner stream, then the session's gate,
    left in that order however the block ends."""

    __slots__ = ("_gate", "_inner")

    _gate: AbstractAsyncContextManager[None] | None
    _inner: AbstractAsyncContextManager[Any] | None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        inner, gate = self._inner, self._gate
        self._inner = self._gate = None
        assert inner is not None, "entered"
        assert gate is not None, "entered"
        try:
            return bool(await inner.__aexit__(exc_type, exc, traceback))
        finally:
            try:
                await self._left()
            finally:
                await gate.__aexit__(None, None, None)

    async def _left(self) -> None:
        """What the turn does once its stream is left, before the gate opens."""


class SessionStream(_Gated):
    """``async with agent.stream(prompt, session=session) as events``."""

    __slots__ = (
        "_committed",
        "_events",
        "_given",
        "_journaled",
        "_open",
        "_prompt",
        "_resume",
        "_session",
        "_state",
    )

    def __init__(
        self,
        session: _Session,
        prompt: object,
        open_stream: Callable[
            [tuple[Message, ...], PendingApprovals | None],
            AbstractAsyncContextManager[AsyncIterator[AgentEvent]],
        ],
        resume: PendingApprovals | None,
        journaled: bool = False,
    ) -> None:
        self._session = session
        self._journaled = journaled
        self._committed = False
        self._given = prompt
        self._prompt: tuple[Message, ...] = ()
        self._open = open_stream
        self._resume = resume
        self._gate = self._inner = None
        self._events: AsyncIterator[AgentEvent] | None = None
        self._state: SessionState | None = None

    async def __aenter__(self) -> AsyncIterator[AgentEvent]:
        session = self._session
        if self._resume is None:
            if self._given is None:
                raise TypeError("agent.stream() needs the prompt (the history after the session's)")
            self._prompt = coerce_history(self._given)
        elif self._given is not None:
            raise TypeError(
                "with session= and resume=, the history comes from the session: leave it out"
            )
        gate = session._gate()
        await gate.__aenter__()
        try:
            decided = None
            if self._resume is None:
                state = await session._read_free("run a turn")
                history = (*working_messages(state), *self._prompt)
            else:
                state, decided = await session._paused(self._resume)
                if not self._journaled:
                    state = await session._take_decisions(state, decided)
                history = working_messages(state)
            try:
                inner = self._open(history, decided)
                self._events = await inner.__aenter__()
            except BaseException:
                if self._resume is not None and not self._journaled:
                    await session._give_back_decisions(state)
                raise
        except BaseException:
            await gate.__aexit__(None, None, None)
            raise
        self._gate, self._inner, self._state = gate, inner, state
        return self

    def __aiter__(self) -> SessionStream:
        if self._events is None:  # not entered: async for without async with
            refuse_async_for(self, "agent.stream(..., session=...)", "events")
        return self

    async def __anext__(self) -> AgentEvent:
        assert self._events is not None, "entered"
        assert self._state is not None, "entered"
        event = await self._events.__anext__()
        if type(event) is TurnCompleted:
            await self._session._commit(
                self._state, self._prompt, event.response, same_turn=self._resume is not None
            )
            self._committed = True
        return event

    async def _left(self) -> None:
        self._events = None
        if self._resume is not None and not self._journaled and not self._committed:
            assert self._state is not None, "entered"
            await self._session._give_back_decisions(self._state)


class _Values(StructuredStream[Any]):
    """The values of a structured stream on a session: the turn is appended before the
    validated value is handed on."""

    def __init__(
        self,
        inner: StructuredStream[Any],
        session: _Session,
        state: SessionState,
        prompt: tuple[Message, ...],
    ) -> None:
        self._inner = inner
        self._session = session
        self._state = state
        self._prompt = prompt

    @property
    def done(self) -> bool:
        return self._inner.done

    @property
    def value(self) -> Any:
        return self._inner.value

    @property
    def response(self) -> AgentResponse:
        return self._inner.response

    async def __anext__(self) -> Any:
        value = await self._inner.__anext__()
        if self._inner.done:
            await self._session._commit(self._state, self._prompt, self._inner.response)
        return value


class SessionStructuredStream(_Gated):
    """``async with agent.stream_structured(prompt, output, session=session) as values``."""

    __slots__ = ("_open", "_prompt", "_session")

    def __init__(
        self,
        session: _Session,
        prompt: Sequence[Message],
        open_stream: Callable[
            [tuple[Message, ...]], AbstractAsyncContextManager[StructuredStream[Any]]
        ],
    ) -> None:
        self._session = session
        self._prompt = tuple(prompt)
        self._open = open_stream
        self._gate = self._inner = None

    def __aiter__(self) -> NoReturn:
        refuse_async_for(self, "agent.stream_structured(..., session=...)", "values")

    async def __aenter__(self) -> StructuredStream[Any]:
        session = self._session
        gate = session._gate()
        await gate.__aenter__()
        try:
            state = await session._read_free("run a turn")
            inner = self._open((*working_messages(state), *self._prompt))
            values = await inner.__aenter__()
        except BaseException:
            await gate.__aexit__(None, None, None)
            raise
        self._gate, self._inner = gate, inner
        return _Values(values, session, state, self._prompt)
