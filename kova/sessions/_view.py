"""What the model continues from in a session: its compacted view, then the messages after
it (apart from ``_store`` so that the session's turns use it without an import circle)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._models import Message
    from ._store import SessionState

__all__ = ["working_messages"]


def working_messages(state: SessionState) -> tuple[Message, ...]:
    """What the model continues from: the compacted view and the messages after it."""
    if state.view is None:
        return state.messages
    return (*state.view, *state.messages[state.view_covers :])
