"""An agent given to the worker's agent as a tool (``agent.as_tool()``) on Temporal.

In-process, an inner turn counts in every enclosing turn as it runs: each of its model
calls and tool steps is checked against the outer turn's usage limits, and its usage is
added to the outer turn's ``usage`` and ``usage_by_agent`` (``Turn.inner_request``,
``inner_replied``, ``inner_tools``). On Temporal the outer turn is in the workflow and the
inner turn runs inside one tool activity, so the activity stands the outer turn's figures
(:meth:`Turn.limit_figures <kova.agent.Turn.limit_figures>`, as JSON from
:func:`outer_figures`: the limits, the model calls, tool calls and usage so far) in for it
(:class:`OuterCounter`), which checks the limits as the outer turn would and
writes down, in order, what the inner turn counted in it. That record comes back in the
activity's result, and the workflow counts it in the real turn (:func:`count_inner`): the
same calls, so the same checks, usage and keys as in-process, and the figures are in the
workflow's history, so a replay counts the same.

Pure: no trio, httpx or temporalio (the workflow's code imports it).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from .._errors import KovaError, SerializationError, UsageLimitExceeded
from .._record import evolve
from ..agent._limits import LimitFigures
from ..agent._state_json import (
    field,
    limits_from_json,
    limits_to_json,
    usage_from_json,
    usage_to_json,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from .._messages import JSONValue
    from .._responses import Usage
    from ..agent._turn import Turn

__all__ = ["OuterCounter", "count_inner", "figures_from_json", "outer_figures", "requests_in"]


def outer_figures(turn: Turn) -> dict[str, JSONValue] | None:
    """What an inner turn run by one of ``turn``'s tool calls checks the outer usage limits
    against, as JSON (``None`` when the turn has no limits: then nothing is checked)."""
    figures = turn.limit_figures()
    if figures is None:
        return None
    return {
        "limits": limits_to_json(figures.limits),
        "requests": figures.requests,
        "tool_calls": figures.tool_calls,
        "usage": usage_to_json(figures.usage),
    }


def figures_from_json(data: Mapping[str, Any] | None) -> LimitFigures | None:
    """:func:`outer_figures`' JSON read back (strictly)."""
    if data is None:
        return None
    return LimitFigures(
        limits=limits_from_json(data.get("limits")),
        requests=field(data, "requests", int),
        tool_calls=field(data, "tool_calls", int),
        usage=usage_from_json(data.get("usage")),
    )


class OuterCounter:
    """The outer turn as a tool activity's inner turns see it (an enclosing turn of their
    nest): it checks the outer limits against the figures it was given, as the turn would,
    and records what they count (:attr:`counted`). Once a check failed it stays failed."""

    __slots__ = ("_failed", "_figures", "counted")

    def __init__(self, figures: LimitFigures | None) -> None:
        self._figures = figures
        self._failed: KovaError | None = None
        self.counted: list[JSONValue] = []
        """What the inner turns counted, in order (:func:`count_inner` reads it)."""

    # Each is written down before it is checked: a call refused here is refused again when
    # the workflow counts it in the real turn (which fails the turn, as in-process).

    def inner_request(self) -> None:
        self.counted.append(["request"])
        figures = self._check()
        if figures is not None:
            try:
                self._count(partial(figures.limits.check_request, figures.requests))
            except KovaError:
                self.counted[-1] = ["request", "refused"]  # not sent
                raise
            self._figures = evolve(figures, requests=figures.requests + 1)

    def inner_replied(self, agent: str, usage: Usage | None) -> None:
        if usage is None:
            return
        self.counted.append(["replied", agent, usage_to_json(usage)])
        figures = self._figures
        if figures is not None:
            figures = self._figures = evolve(figures, usage=figures.usage + usage)
            self._count(partial(figures.limits.check_tokens, figures.usage))

    def inner_tools(self, count: int) -> None:
        self.counted.append(["tools", count])
        figures = self._check()
        if figures is not None:
            tool_calls = figures.tool_calls + count
            self._count(partial(figures.limits.check_tool_calls, tool_calls))
            self._figures = evolve(figures, tool_calls=tool_calls)

    def _check(self) -> LimitFigures | None:
        if self._failed is not None:
            raise self._failed
        return self._figures

    def _count(self, check: Callable[[], None]) -> None:
        try:
            check()
        except KovaError as exc:
            self._failed = exc
            raise


def requests_in(counted: object) -> int:
    """The model calls an activity's inner turns made (sent), by their record."""
    if not isinstance(counted, list):
        return 0
    return sum(1 for item in counted if item == ["request"])


def count_inner(turn: Turn, counted: object, *, sent_later: int = 0) -> None:
    """Count in ``turn`` what its tool call's inner turns counted (:attr:`OuterCounter.counted`
    from the activity's result). ``sent_later``: the model calls the step's other activities,
    counted after this one, made.

    Raises:
        UsageLimitExceeded: the inner turns took ``turn`` over a limit (``turn`` has failed).
            Over ``requests``, the error counts the model calls that were sent: parallel
            activities each check the limit against the figures the turn had when the step
            began, so together they can send more than it allows (docs/durable.md).
        SerializationError: ``counted`` is not such a record.
    """
    if not isinstance(counted, list):
        raise SerializationError("a tool result's inner usage must be a list")
    for index, item in enumerate(counted):
        if not isinstance(item, list) or not item:
            raise SerializationError("an inner turn's count must be a non-empty list")
        kind = item[0]
        if kind == "request" and (len(item) == 1 or item[1:] == ["refused"]):
            try:
                turn.inner_request()
            except UsageLimitExceeded as exc:
                if exc.limit != "requests" or not isinstance(exc.figure, int):
                    raise
                # Say how many model calls were sent (by the activities, some in parallel),
                # rather than "model call N was not sent" when they were.
                refused = len(item) == 2
                sent = exc.figure - refused + requests_in(counted[index + 1 :]) + sent_later
                if refused and sent == exc.figure - 1:
                    raise  # nothing past the limit was sent: "model call N was not sent"
                raise UsageLimitExceeded("requests", exc.value, sent, sent=True) from None
        elif kind == "replied" and len(item) == 3 and isinstance(item[1], str):
            turn.inner_replied(item[1], usage_from_json(item[2]))
        elif (
            kind == "tools"
            and len(item) == 2
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        ):
            turn.inner_tools(item[1])
        else:
            raise SerializationError(f"unknown inner turn count {item!r}")
