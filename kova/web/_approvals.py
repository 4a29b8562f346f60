"""Tool calls waiting for a person's decision on the pages.

The event server owns one :class:`Approvals`. As with the rest of its state, every change
happens in a plain (non-async) method, so no task sees a half-made change; a waiting
:meth:`Approvals.ask` wakes whenever its call is decided or a page comes or goes.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import trio

from . import _schema

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._models import ToolAnnotations, ToolUse

__all__ = ["Approvals"]


class _Pending:
    __slots__ = ("_changed", "call", "deadline", "event", "id", "outcome")

    def __init__(self, *, id: str, call: ToolUse, deadline: float = math.inf) -> None:
        self.id = id
        self.call = call
        self.event: dict[str, Any] = {}
        """The ``approval_requested`` event (replayed to pages that connect while it waits)."""
        self.outcome: bool | str | None = None
        self.deadline = deadline
        """When the call is denied for want of an answer (trio's clock)."""
        self._changed = trio.Event()

    def notify(self) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def wait_changed(self) -> None:
        await self._changed.wait()


class Approvals:
    """The pending approvals of one event server.

    Args:
        emit: sends an event to every page (and remembers it for reconnecting ones).
        has_pages: whether any page is connected now.
        disconnect_grace: seconds a call waits with no page connected before it is denied.
    """

    __slots__ = ("_disconnect_grace", "_emit", "_has_pages", "_numbers", "_pending")

    def __init__(
        self,
        *,
        emit: Callable[[dict[str, Any]], None],
        has_pages: Callable[[], bool],
        disconnect_grace: float,
    ) -> None:
        self._emit = emit
        self._has_pages = has_pages
        self._disconnect_grace = disconnect_grace
        self._pending: dict[str, _Pending] = {}
        self._numbers = itertools.count(1)

    def __len__(self) -> int:
        return len(self._pending)

    async def ask(
        self,
        call: ToolUse,
        annotations: ToolAnnotations | None,
        seconds: float,
        *,
        turn: int | None,
        path: tuple[str, ...] = (),
    ) -> bool | str:
        """Ask the pages about ``call`` and wait: ``True``, or the denial reason."""
        pending = _Pending(
            id=f"a{next(self._numbers)}", call=call, deadline=trio.current_time() + seconds
        )
        self._pending[pending.id] = pending
        pending.event = {
            "type": "approval_requested",
            "turn": turn,
            "id": pending.id,
            "call_id": call.id,
            "tool": call.name,
            "arguments": _schema.tool_started(0, call)["arguments"],
            "annotations": _schema.annotations_json(annotations),
            "timeout_s": seconds,
            "remaining_s": seconds,
        }
        if path:  # an inner agent's call (agent.as_tool())
            pending.event["path"] = list(path)
        self._emit(pending.event)
        try:
            with trio.move_on_at(pending.deadline):
                while pending.outcome is None:
                    if self._has_pages():
                        await pending.wait_changed()
                        continue
                    with trio.move_on_after(self._disconnect_grace):
                        while not self._has_pages() and pending.outcome is None:
                            await pending.wait_changed()
                    if not self._has_pages() and pending.outcome is None:
                        self._decide(pending, "no page is connected to decide", by="disconnect")
            if pending.outcome is None:
                self._decide(pending, f"no decision within {seconds:g} s", by="timeout")
        finally:
            if pending.outcome is None:  # cancelled: nobody is waiting for an answer now
                self._decide(pending, "the turn was cancelled", by="cancelled")
        assert pending.outcome is not None
        return pending.outcome

    def answer(self, identifier: str, *, approve: bool, reason: str | None) -> None:
        """A page's answer; the first one wins, later or unknown ones change nothing."""
        pending = self._pending.get(identifier)
        if pending is None:
            return
        outcome: bool | str = True
        if not approve:
            # What the model reads after "tool call denied: " and the page after "denied: ".
            outcome = (
                f"the person on the web page said: {reason}"
                if reason
                else "no reason given by the person on the web page"
            )
        self._decide(pending, outcome, by="page")

    def pages_changed(self) -> None:
        """A page connected or left: every waiting call looks again."""
        for pending in list(self._pending.values()):
            pending.notify()

    def with_time_left(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events`` for a page connecting now: each request still pending says the time
        left until its deadline (``remaining_s``), so a reload does not restart the clock."""
        now = trio.current_time()
        shown = []
        for event in events:
            pending = (
                self._pending.get(event.get("id", ""))
                if event["type"] == "approval_requested"
                else None
            )
            if pending is not None:
                event = {**event, "remaining_s": round(max(0.0, pending.deadline - now), 3)}
            shown.append(event)
        return shown

    def outside_turns(self) -> list[dict[str, Any]]:
        """The requests still pending that were asked outside any turn (a turn's replay has
        the others)."""
        return [
            pending.event for pending in self._pending.values() if pending.event["turn"] is None
        ]

    def deny_all(self, reason: str, *, by: str) -> None:
        """Deny every pending call (the server is closing)."""
        for pending in list(self._pending.values()):
            self._decide(pending, reason, by=by)

    def _decide(self, pending: _Pending, outcome: bool | str, *, by: str) -> None:
        pending.outcome = outcome
        self._pending.pop(pending.id, None)
        pending.notify()
        self._emit(
            {
                "type": "approval_decided",
                "id": pending.id,
                "approved": outcome is True,
                "reason": None if outcome is True else outcome,
                "by": by,
            }
        )
