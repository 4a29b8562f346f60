"""The turns an event server keeps, so that a page that (re)connects sees them again.

Consecutive text (or thinking) deltas of one agent (one ``path``) are kept as one list of
pieces and joined only when replayed, so a turn of 20,000 deltas replays as a handful of
events.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any

__all__ = ["Turn", "TurnLog"]


class _Merged:
    __slots__ = ("kind", "path", "pieces", "turn")

    def __init__(
        self, *, kind: str, turn: int, pieces: list[str], path: list[str] | None = None
    ) -> None:
        self.kind = kind
        self.turn = turn
        self.pieces = pieces
        self.path = path
        """An inner agent's deltas (``agent.as_tool()``): the path of tool-call ids."""


class Turn:
    """One turn as the pages saw it."""

    __slots__ = ("first_delta", "items", "number", "open", "started")

    def __init__(self, *, number: int, started: float) -> None:
        self.number = number
        self.started = started
        self.items: list[dict[str, Any] | _Merged] = []
        self.first_delta: float | None = None
        self.open = True


class TurnLog:
    """The last ``keep`` turns, newest last."""

    __slots__ = ("_numbers", "_turns")

    def __init__(self, *, keep: int) -> None:
        self._turns: deque[Turn] = deque(maxlen=keep)  # a new turn pushes the oldest out
        self._numbers = itertools.count(1)

    def begin(self, started: float) -> Turn:
        turn = Turn(number=next(self._numbers), started=started)
        self._turns.append(turn)
        return turn

    def current(self) -> Turn | None:
        return self._turns[-1] if self._turns else None

    def clear(self) -> None:
        """Forget the kept turns (another conversation was opened); numbers go on."""
        self._turns.clear()

    def remember(self, event: dict[str, Any]) -> None:
        """Keep ``event`` in the current turn (events outside any turn are not kept)."""
        turn = self.current()
        if turn is None or (not turn.open and event.get("turn") is None):
            return
        items = turn.items
        kind = event["type"]
        if kind in ("text", "thinking"):
            last = items[-1] if items else None
            path = event.get("path")
            if isinstance(last, _Merged) and last.kind == kind and last.path == path:
                last.pieces.append(event["text"])
            else:
                items.append(
                    _Merged(kind=kind, turn=event["turn"], pieces=[event["text"]], path=path)
                )
        else:
            items.append(event)

    def replay(self) -> list[dict[str, Any]]:
        """Every kept event, oldest first, with consecutive deltas joined."""
        events: list[dict[str, Any]] = []
        for turn in self._turns:
            for item in turn.items:
                if isinstance(item, _Merged):
                    joined = {"type": item.kind, "turn": item.turn, "text": "".join(item.pieces)}
                    if item.path:
                        joined["path"] = item.path
                    events.append(joined)
                else:
                    events.append(item)
        return events
