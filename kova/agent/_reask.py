"""What a structured turn tells the model when its answer could not be used (pure: the
Temporal workflow, which imports no trio, re-asks with the same words)."""

from __future__ import annotations

from .._messages import Message

__all__ = ["feedback"]

_MAX_FEEDBACK_CHARS = 2000
"""The longest problem description sent back (a validation error can be long)."""


def feedback(problem: str) -> Message:
    """The user message that re-asks the model after an answer with ``problem``."""
    text = problem if len(problem) <= _MAX_FEEDBACK_CHARS else problem[:_MAX_FEEDBACK_CHARS] + "..."
    return Message.user(
        f"Your previous answer could not be used: {text}\n"
        "Answer again with only the JSON value, matching the requested schema."
    )
