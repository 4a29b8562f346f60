"""An explicit cancel token: cancel a turn from another task."""

from __future__ import annotations

import trio

__all__ = ["CancelToken"]


class CancelToken:
    """Cancels the turns it is passed to, from any task of the same trio run.

    ``agent.run(history, cancel=token)`` raises :class:`kova.TurnCancelled` once
    ``token.cancel()`` is called; the turn produces no messages and everything it started
    (provider request, tool calls) has stopped before ``run`` returns. A cancelled token stays
    cancelled: later turns given it are cancelled at once. (To stop a turn from the *same*
    task structure, a trio cancel scope is simpler: ``trio.Cancelled`` then propagates
    untouched.)
    """

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str | None = None) -> None:
        """Cancel every turn using this token (idempotent; the first reason is kept)."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    async def wait(self) -> None:
        """Return once the token is cancelled."""
        await self._event.wait()
