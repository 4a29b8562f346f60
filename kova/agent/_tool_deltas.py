"""Tool-call arguments as they stream: the provider seam's ``ToolUseStart`` / ``ToolUseDelta``
events of one model call, as :class:`~kova.agent.ToolCallDelta` events for ``agent.stream``.

Kept apart from the accumulator (which builds the final calls) so a turn that is not streamed,
or whose answer calls no tool, pays nothing: the driver makes one only when a call starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._stream_events import ToolUseDelta, ToolUseStart
from ._events import ToolCallDelta

if TYPE_CHECKING:
    from .._models import StreamEvent

__all__ = ["TOOL_STREAM", "ToolArguments"]

TOOL_STREAM = (ToolUseStart, ToolUseDelta)
"""The stream events :meth:`ToolArguments.feed` turns into :class:`ToolCallDelta`."""


class ToolArguments:
    """The calls of one streamed model answer, by index: id, name and the text so far."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[int, list[str]] = {}

    def feed(self, event: StreamEvent) -> ToolCallDelta | None:
        """The delta ``event`` makes (``None`` for a call's start, or a delta of a call that
        never started: the accumulator reports that one)."""
        if isinstance(event, ToolUseStart):
            self._calls[event.index] = [event.id, event.name, ""]
            return None
        assert isinstance(event, ToolUseDelta)
        call = self._calls.get(event.index)
        if call is None or not event.partial_json:
            return None
        call[2] += event.partial_json
        return ToolCallDelta(call_id=call[0], name=call[1], arguments_text=call[2])
