"""An agent given to the worker's agent as a tool (``agent.as_tool()``) on Temporal.

In-process, an inner turn counts in every enclosing turn as it runs: each of its model
calls and tool steps is checked against the outer turn's usage limits, and its usage is
added to the outer turn's ``usage`` and ``usage_by_agent`` (``Turn._inner_request``,
``_inner_replied``, ``_inner_tools``). On Temporal the outer turn is in the workflow and the
inner turn runs inside one tool activity, so the activity stands a copy of the outer turn's
figures in for it (:class:`OuterTurn`, from :func:`outer_figures`: the limits, the model
calls, tool calls and usage so far), which checks the limits as the outer turn would and
writes down, in order, what the inner turn counted in it. That record comes back in the
activity's result, and the workflow counts it in the real turn (:func:`count_inner`): the
same calls, so the same checks, usage and keys as in-process, and the figures are in the
workflow's history, so a replay counts the same.

Pure: no trio, httpx or temporalio (the workflow sandbox passes it through).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import SerializationError
from .._models import InferenceConfig
from ..agent._state_json import (
    field,
    limits_from_json,
    limits_to_json,
    usage_from_json,
    usage_to_json,
)
from ..agent._turn import Turn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._messages import JSONValue
    from .._responses import Usage

__all__ = ["OuterTurn", "count_inner", "outer_figures"]


def outer_figures(turn: Turn) -> dict[str, JSONValue] | None:
    """What an inner turn run by one of ``turn``'s tool calls checks the outer usage limits
    against (``None`` when the turn has no limits: then nothing is checked)."""
    limits = turn._limits
    if limits is None:
        return None
    return {
        "limits": limits_to_json(limits),
        "requests": turn._requests + turn._inner_requests,
        "tool_calls": turn._tool_calls + turn._inner_tool_calls,
        "usage": usage_to_json(turn._total),
    }


class OuterTurn(Turn):
    """The outer turn as a tool activity's inner turns see it: it checks the outer limits
    against the figures it was given, and records what they count (:attr:`counted`)."""

    __slots__ = ("counted",)

    def __init__(self, figures: Mapping[str, Any] | None, turn_id: str) -> None:
        limits = None if figures is None else limits_from_json(figures.get("limits"))
        super().__init__(
            (),
            tools=(),
            config=InferenceConfig(),
            system_prompt=None,
            limits=limits,
            max_iterations=0,
            context_budget=None,
            turn_id=turn_id,
        )
        if figures is not None:
            self._requests = field(figures, "requests", int)
            self._tool_calls = field(figures, "tool_calls", int)
            self._usage = usage_from_json(figures.get("usage"))
        self.counted: list[JSONValue] = []
        """What the inner turns counted, in order (:func:`count_inner` reads it)."""

    # Each is written down before it is checked: a call refused here is refused again when
    # the workflow counts it in the real turn (which fails the turn, as in-process).

    def _inner_request(self) -> None:
        self.counted.append(["request"])
        super()._inner_request()

    def _inner_replied(self, agent: str, usage: Usage | None) -> None:
        if usage is not None:
            self.counted.append(["replied", agent, usage_to_json(usage)])
        super()._inner_replied(agent, usage)

    def _inner_tools(self, count: int) -> None:
        self.counted.append(["tools", count])
        super()._inner_tools(count)


def count_inner(turn: Turn, counted: object) -> None:
    """Count in ``turn`` what its tool call's inner turns counted (:attr:`OuterTurn.counted`
    from the activity's result).

    Raises:
        UsageLimitExceeded: the inner turns took ``turn`` over a limit (``turn`` has failed).
        SerializationError: ``counted`` is not such a record.
    """
    if not isinstance(counted, list):
        raise SerializationError("a tool result's inner usage must be a list")
    for item in counted:
        if not isinstance(item, list) or not item:
            raise SerializationError("an inner turn's count must be a non-empty list")
        kind = item[0]
        if kind == "request" and len(item) == 1:
            turn._inner_request()
        elif kind == "replied" and len(item) == 3 and isinstance(item[1], str):
            turn._inner_replied(item[1], usage_from_json(item[2]))
        elif (
            kind == "tools"
            and len(item) == 2
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        ):
            turn._inner_tools(item[1])
        else:
            raise SerializationError(f"unknown inner turn count {item!r}")
