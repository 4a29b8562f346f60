"""Decoding shared by the providers whose wire formats send a tool call whole (Gemini,
Ollama)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._models import ToolUseDelta, ToolUseEnd, ToolUseStart

if TYPE_CHECKING:
    from .._models import StreamEvent, ToolUse

__all__ = ["whole_call"]


def whole_call(index: int, call: ToolUse) -> tuple[StreamEvent, ...]:
    """A call that arrived whole, as the events of a streamed one: its start (id, name,
    provider metadata), one delta with all its arguments, its end."""
    return (
        ToolUseStart(
            index=index, id=call.id, name=call.name, provider_metadata=call.provider_metadata
        ),
        ToolUseDelta(
            index=index,
            partial_json=json.dumps(call.input, separators=(",", ":"), ensure_ascii=False),
        ),
        ToolUseEnd(index=index),
    )
