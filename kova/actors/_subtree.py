"""Supervisors as children of supervisors: supervision trees.

:func:`supervisor_spec` makes a :class:`~kova.actors.ChildSpec` whose actor runs a whole
supervisor (a *subtree*) in its own task. When the subtree gives up (its restart intensity is
exceeded) it raises :class:`~kova.ActorFailed`; to the parent supervisor that is just a child
crash, so the parent's own strategy, intensity and backoff decide what happens next — the OTP
escalation chain.

A restarted subtree starts fresh children, with fresh mailboxes: refs into the old subtree
raise :class:`~kova.MailboxClosed`. Ask the subtree (``await tree.call(GetChild("name"))``)
for current refs rather than keeping them across failures.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from .._errors import ActorError
from .._record import Record
from ._actor import Actor, ActorRef
from ._messages import Call, UnknownMessage
from ._spec import (
    DEFAULT_SHUTDOWN_GRACE,
    Backoff,
    ChildSpec,
    RestartType,
    Strategy,
)
from ._supervisor import Supervisor, open_supervisor

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence


__all__ = [
    "GetChild",
    "ListChildren",
    "SpawnChild",
    "StopChild",
    "SupervisorActor",
    "supervisor_spec",
]


class GetChild(Record, Call[ActorRef]):
    """Call: the :class:`~kova.actors.ActorRef` of the subtree's child ``name``."""

    name: str


class SpawnChild(Record, Call[ActorRef]):
    """Call: start another child in the subtree; replies with its ref. Children spawned this
    way are not part of the subtree's spec, so a restart of the subtree drops them."""

    spec: ChildSpec


class StopChild(Record, Call[None]):
    """Call: stop the subtree's child ``name`` in an orderly way."""

    name: str


class ListChildren(Record, Call["tuple[str, ...]"]):
    """Call: the names of the subtree's children, in start order."""


class SupervisorActor(Actor):
    """An actor that runs a supervisor over ``children`` (started in order)."""

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        name: str,
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        within: float = 5.0,
        backoff: Backoff | None = None,
    ) -> None:
        self._children = tuple(children)
        self._open_supervisor = partial(
            open_supervisor,
            name=name,
            strategy=strategy,
            max_restarts=max_restarts,
            within=within,
            backoff=backoff,
        )
        self._supervisor: Supervisor | None = None

    @asynccontextmanager
    async def resources(self) -> AsyncIterator[None]:
        async with self._open_supervisor() as supervisor:
            for spec in self._children:
                await supervisor.spawn(spec)
            self._supervisor = supervisor
            yield

    async def handle_call(self, message: Any) -> Any:
        supervisor = self._supervisor
        assert supervisor is not None
        match message:
            case GetChild(name=name):
                try:
                    return supervisor.ref(name)
                except KeyError:
                    raise ActorError(f"subtree {self.name!r} has no child {name!r}") from None
            case SpawnChild(spec=spec):
                return await supervisor.spawn(spec)
            case StopChild(name=name):
                await supervisor.stop_child(name)
                return None
            case ListChildren():
                return supervisor.children
            case _:
                raise UnknownMessage(self.name, message)


def supervisor_spec(
    name: str,
    children: Sequence[ChildSpec],
    *,
    strategy: Strategy = "one_for_one",
    max_restarts: int = 3,
    within: float = 5.0,
    backoff: Backoff | None = None,
    restart: RestartType = "permanent",
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
) -> ChildSpec:
    """A child that is itself a supervisor over ``children``.

    Spawn it like any child (``await runtime.spawn(supervisor_spec("db", [...]))``); the ref
    you get answers :class:`GetChild`, :class:`SpawnChild`, :class:`StopChild` and
    :class:`ListChildren`. Its own children stop, in reverse start order, when it stops.

    Args:
        name: the subtree's name (its child name in the parent, and its supervisor's name).
        children: the subtree's children, started in this order on every (re)start.
        strategy, max_restarts, within, backoff: the subtree's policy, as for
            :func:`~kova.actors.open_supervisor`.
        restart: how the *parent* treats the subtree (default ``"permanent"``).
        shutdown_grace: how long the parent waits for the whole subtree to stop. Make it at
            least the sum of the children's grace periods.
    """
    children = tuple(children)

    def factory() -> SupervisorActor:
        return SupervisorActor(
            children,
            name=name,
            strategy=strategy,
            max_restarts=max_restarts,
            within=within,
            backoff=backoff,
        )

    return ChildSpec(factory=factory, name=name, restart=restart, shutdown_grace=shutdown_grace)
