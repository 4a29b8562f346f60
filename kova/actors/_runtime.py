"""The runtime: a root supervisor that a whole trio application shares."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from ._supervisor import Supervisor, open_supervisor

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from .._observe import TelemetryHub
    from ._actor import ActorRef
    from ._spec import ActorFactory, Backoff, ChildSpec, RestartType, Strategy

__all__ = ["Runtime", "open_runtime"]


class Runtime:
    """Where kova's actors live: a thin face over the root :class:`Supervisor`.

    Get one from :func:`open_runtime`. Pass it to the components that spawn actors (the
    agent, MCP clients, providers) so they share one supervision tree.
    """

    __slots__ = ("supervisor",)

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        """The root supervisor (``one_for_one`` unless :func:`open_runtime` said otherwise)."""

    def __repr__(self) -> str:
        return f"Runtime(supervisor={self.supervisor!r})"

    @property
    def name(self) -> str:
        return self.supervisor.name

    async def spawn(
        self,
        child: ChildSpec | ActorFactory,
        *,
        name: str | None = None,
        restart: RestartType | None = None,
        mailbox_size: int | None = None,
        shutdown_grace: float | None = None,
    ) -> ActorRef:
        """Start an actor under the root supervisor; see :meth:`Supervisor.spawn`."""
        return await self.supervisor.spawn(
            child,
            name=name,
            restart=restart,
            mailbox_size=mailbox_size,
            shutdown_grace=shutdown_grace,
        )

    async def stop(self, child: ActorRef | str) -> None:
        """Stop one actor in an orderly way; see :meth:`Supervisor.stop_child`."""
        await self.supervisor.stop_child(child)


@asynccontextmanager
async def open_runtime(
    *,
    name: str = "kova",
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    within: float = 5.0,
    backoff: Backoff | None = None,
    telemetry: TelemetryHub | None = None,
) -> AsyncIterator[Runtime]:
    """``async with open_runtime() as runtime:`` a root supervisor for the block.

    Every actor spawned through it stops (in reverse start order, each within its grace
    period) when the block ends; none outlives it. Arguments are those of
    :func:`open_supervisor`.

    Raises:
        ActorFailed: (inside an ``ExceptionGroup``) a child kept crashing beyond the restart
            intensity; the block was cancelled. Also when the block was already ending as
            the supervisor gave up: a give-up is never lost.
    """
    async with open_supervisor(
        name=name,
        strategy=strategy,
        max_restarts=max_restarts,
        within=within,
        backoff=backoff,
        telemetry=telemetry,
    ) as supervisor:
        yield Runtime(supervisor=supervisor)
