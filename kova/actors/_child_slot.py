"""A supervisor's record of its children: the slot that outlives a child's instances, the
exit event each instance reports, and the watch that marks a slot running the moment its
instance has started. Used only by the supervisor (``_supervisor``), from its own tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._record import Record

if TYPE_CHECKING:
    from ._mailbox import Mailbox
    from ._spec import ChildSpec

__all__ = ["ChildExited", "ChildSlot", "StartWatch", "WatchedStatus"]


class ChildSlot:
    """One child: its spec, its mailbox (refs point at it, so they survive restarts) and its
    current instance (``incarnation`` counts them)."""

    __slots__ = (
        "exited",
        "incarnation",
        "mailbox",
        "restarts",
        "running",
        "scope",
        "spec",
        "stopping",
    )

    def __init__(self, spec: ChildSpec, mailbox: Mailbox) -> None:
        self.spec = spec
        self.mailbox = mailbox
        self.incarnation = 0
        self.scope: trio.CancelScope | None = None
        self.exited = trio.Event()
        self.running = False
        self.stopping = False
        self.restarts = 0

    def __repr__(self) -> str:
        return f"ChildSlot(name={self.name!r}, incarnation={self.incarnation})"

    @property
    def name(self) -> str:
        return self.spec.name


class ChildExited(Record):
    """Sent to the supervisor's own task once per instance that exits after starting."""

    slot: ChildSlot
    incarnation: int
    error: Exception | None
    reported: bool = False
    """The error already reached a caller, with its traceback."""
    before_close: bool = True
    """Reported before the supervisor began closing (then a crash still counts)."""


class StartWatch:
    """Forwards ``task_status.started()`` and marks the slot running at that very moment."""

    __slots__ = ("_inner", "_slot", "started")

    def __init__(self, *, inner: trio.TaskStatus[None], slot: ChildSlot) -> None:
        self._inner = inner
        self._slot = slot
        self.started = False

    def _started(self) -> None:
        self.started = True
        self._slot.running = True
        self._inner.started()


class WatchedStatus:
    """The ``task_status`` an instance is given: its ``started()`` goes through the watch."""

    def __init__(self, watch: StartWatch) -> None:
        self._watch = watch

    def started(self, value: None = None) -> None:
        self._watch._started()
