"""What a session holds now (:class:`SessionState`) and what the model continues from: its
compacted view, then the messages after it (apart from ``_store`` so that the session's
turns use them without an import circle)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._record import Record

if TYPE_CHECKING:
    from .._messages import Message

__all__ = ["SessionState", "working_messages"]


class SessionState(Record):
    """What :meth:`SessionStore.read` returns: one session as it is stored now."""

    version: int
    """Bumped by every write; ``0``: the store holds no such session."""
    messages: tuple[Message, ...] = ()
    turns: tuple[int, ...] = ()
    """The number of the turn that added each message (non-decreasing)."""
    pending: str | None = None
    """The pending state of its paused last turn (``PendingApprovals.to_json()``)."""
    title: str | None = None
    view: tuple[Message, ...] | None = None
    """The compacted history the model continues from (a context policy's
    ``response.compaction.history``), standing for the first :attr:`view_covers` messages;
    ``None``: the model sees every message."""
    view_covers: int = 0
    resumed: str | None = None
    """The nonce of the decisions a resume of the stored pending state runs with (or ran
    with, and did not finish: its process died): they are used (a decided pause runs once).
    ``None``: none."""


def working_messages(state: SessionState) -> tuple[Message, ...]:
    """What the model continues from: the compacted view and the messages after it."""
    if state.view is None:
        return state.messages
    return (*state.view, *state.messages[state.view_covers :])
