""":class:`Counters`: what a turn has counted against its limits, one record for the turn
core and its paused state (:class:`~kova.agent.PendingApprovals`), written the same way in
both documents (:func:`counters_to_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._errors import SerializationError
from .._record import Record

if TYPE_CHECKING:
    from .._messages import JSONValue

__all__ = ["Counters", "counters_from_json", "counters_to_json"]

_FIELDS = ("requests", "tool_calls", "inner_requests", "inner_tool_calls")


class Counters(Record):
    """What a turn has counted so far: its model calls and tool calls, and those of the
    agents its tools ran (``agent.as_tool()``). Usage limits and ``max_iterations`` count
    them; every one is a non-negative int."""

    requests: int = 0
    """Model calls the turn has made."""
    tool_calls: int = 0
    """Tool calls the turn has started."""
    inner_requests: int = 0
    """Model calls the agents run by the turn's tools have made."""
    inner_tool_calls: int = 0
    """Tool calls those agents have started."""

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Counters.{name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ValueError(f"Counters.{name} must be 0 or more, got {value}")


def counters_to_json(counters: Counters) -> dict[str, JSONValue]:
    return {name: getattr(counters, name) for name in _FIELDS}


def counters_from_json(data: object) -> Counters:
    """Read :func:`counters_to_json` back (strictly: four non-negative ints)."""
    if not isinstance(data, Mapping):
        raise SerializationError("stored 'counters' must be a JSON object")
    values: dict[str, int] = {}
    for name in _FIELDS:
        value = data.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SerializationError(
                f"stored counter {name!r} must be 0 or more, got {value!r:.60}"
            )
        values[name] = value
    return Counters(**values)
