"""What the agent needs of the objects its turns are given, as protocols the concrete classes
fit by their shape: an agent (:class:`OpenAgent`, for the modules ``Agent`` is built from:
agents as tools, ``run_sync``, streamed turns), a journal (:class:`TurnJournal`:
:class:`~kova.durable.SqliteJournal`, :class:`~kova.durable.PostgresJournal`) and a session
(:class:`TurnSession`: :class:`~kova.sessions.Session`).

Those classes build on the agent, so the agent names them by what it uses of them: imports
point one way (tests/test_layers.py finds no circle, counting ``TYPE_CHECKING`` imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

    from .._models import InferenceConfig, Message
    from ._approvals import PendingApprovals
    from ._config import AgentConfig
    from ._driver_context import DriverContext
    from ._events import AgentEvent, AgentResponse
    from ._input import HistoryInput
    from ._limits import UsageLimits
    from ._steps import StepObserver
    from ._structured import StructuredStream
    from ._turn import Turn

__all__ = ["OpenAgent", "TurnJournal", "TurnSession"]


class OpenAgent(Protocol):
    """A :class:`~kova.agent.Agent`, as the modules it is built from use it."""

    tool_owner: str | None

    @property
    def config(self) -> AgentConfig: ...
    @property
    def is_open(self) -> bool: ...
    def driver_context(self) -> DriverContext: ...
    async def run(
        self, history: HistoryInput, *, config: InferenceConfig | None = None, deps: object = None
    ) -> AgentResponse: ...
    async def __aenter__(self) -> object: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> bool | None: ...


class TurnJournal(Protocol):
    """A turn's ``journal=``: a :class:`~kova.durable.SqliteJournal` or
    :class:`~kova.durable.PostgresJournal`."""

    def open_turn(
        self,
        context: DriverContext,
        history: tuple[Message, ...],
        overrides: InferenceConfig | None,
        limits: UsageLimits | None,
        turn_id: object,
        pending: PendingApprovals | None = None,
    ) -> AbstractAsyncContextManager[tuple[Turn, StepObserver]]:
        """The journal's claim on the turn ``turn_id``, and the turn to drive with the
        journal observing its steps."""
        ...


class TurnSession(Protocol):
    """A turn's ``session=``: a :class:`~kova.sessions.Session`."""

    async def run_turn(
        self,
        prompt: Sequence[Message],
        run: Callable[[tuple[Message, ...]], Awaitable[Any]],
        *,
        structured: bool = False,
    ) -> Any: ...
    async def resume_turn(
        self,
        history: object,
        pending: PendingApprovals | None,
        resume: Callable[[tuple[Message, ...], PendingApprovals], Awaitable[AgentResponse]],
        *,
        journaled: bool = False,
    ) -> AgentResponse: ...
    def stream_turn(
        self,
        prompt: object,
        open_stream: Callable[
            [tuple[Message, ...], PendingApprovals | None],
            AbstractAsyncContextManager[AsyncIterator[AgentEvent]],
        ],
        resume: PendingApprovals | None = None,
        *,
        journaled: bool = False,
    ) -> AbstractAsyncContextManager[AsyncIterator[AgentEvent]]: ...
    def stream_structured_turn(
        self,
        prompt: Sequence[Message],
        open_stream: Callable[
            [tuple[Message, ...]], AbstractAsyncContextManager[StructuredStream[Any]]
        ],
    ) -> AbstractAsyncContextManager[StructuredStream[Any]]: ...
