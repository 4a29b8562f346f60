"""Usage limits of a turn: :class:`UsageLimits`, checked by the turn core."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from .._errors import UsageLimitExceeded
from .._record import Record, set_field

if TYPE_CHECKING:
    from .._responses import Usage

__all__ = ["LimitFigures", "UsageLimits"]

_COUNTS = ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens")


class UsageLimits(Record):
    """Caps on what one turn may use (``None``: no cap), enforced by the turn core.

    A model call or a tool step that would go over ``requests`` or ``tool_calls`` is not
    started; a response that takes the turn's summed tokens over ``input_tokens``,
    ``output_tokens`` or ``total_tokens``, or its cost over ``cost``, ends it. Either raises
    :class:`~kova.errors.UsageLimitExceeded`, and the turn produces no messages. A figure
    exactly at its limit is allowed.

    Set them for every turn with ``AgentBuilder.usage_limits(...)`` or for one with
    ``agent.run(..., limits=UsageLimits(...))`` (which replaces the agent's).
    """

    requests: int | None = None
    """Model calls per turn."""
    tool_calls: int | None = None
    """Tool calls per turn (every call the model makes counts once, when its step starts)."""
    input_tokens: int | None = None
    """Input (prompt) tokens summed over the turn's model calls."""
    output_tokens: int | None = None
    """Output tokens summed over the turn's model calls."""
    total_tokens: int | None = None
    """Total tokens summed over the turn's model calls."""
    cost: Decimal | None = None
    """USD summed over the turn's model calls (those of agents its tools run included), as
    priced by the agent (docs/cost.md); a turn whose cost is unknown is not stopped by it.
    Given as a ``Decimal``, ``int``, numeric ``str`` or ``float``; stored as a ``Decimal``."""
    count_tokens_before_request: bool = False
    """With ``input_tokens`` set, count each request's input tokens before sending it (the
    provider's exact counter where it has one: Anthropic, Gemini, Bedrock; the offline
    estimate elsewhere) and refuse a call that would go over."""

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"UsageLimits.{name} must be an int or None, got {value!r}")
            if value < 0:
                raise ValueError(f"UsageLimits.{name} must be at least 0, got {value}")
        cost: object = self.cost
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, Decimal | int | str | float):
                raise TypeError(f"UsageLimits.cost must be a number of USD or None, got {cost!r}")
            if isinstance(cost, float):
                if not math.isfinite(cost):
                    raise ValueError(f"UsageLimits.cost must be finite, got {cost!r}")
                cost = repr(cost)
            try:
                cost = Decimal(cost)
            except InvalidOperation:
                raise ValueError(f"UsageLimits.cost must be a number, got {cost!r}") from None
            if not cost.is_finite() or cost < 0:
                raise ValueError(f"UsageLimits.cost must be at least 0, got {cost}")
            set_field(self, "cost", cost)
        if not isinstance(self.count_tokens_before_request, bool):
            raise TypeError(
                "UsageLimits.count_tokens_before_request must be a bool, got "
                f"{self.count_tokens_before_request!r}"
            )

    @property
    def counts_tokens_first(self) -> bool:
        """Whether each request's input tokens are counted before it is sent."""
        return self.count_tokens_before_request and self.input_tokens is not None

    def check_request(self, requests_made: int) -> None:
        """Before a model call (the turn has made ``requests_made``)."""
        limit = self.requests
        if limit is not None and requests_made + 1 > limit:
            raise UsageLimitExceeded("requests", limit, requests_made + 1, sent=False)

    def check_tool_calls(self, tool_calls: int) -> None:
        """Before a tool step (``tool_calls``: the turn's calls with this step's)."""
        limit = self.tool_calls
        if limit is not None and tool_calls > limit:
            raise UsageLimitExceeded("tool_calls", limit, tool_calls, sent=False)

    def check_counted(self, usage: Usage, counted: int) -> None:
        """Before a model call whose input was counted at ``counted`` tokens."""
        limit = self.input_tokens
        if limit is not None and usage.input_tokens + counted > limit:
            raise UsageLimitExceeded(
                "input_tokens", limit, usage.input_tokens + counted, sent=False
            )

    def check_tokens(self, usage: Usage) -> None:
        """After a model call: the turn's summed usage."""
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            limit = getattr(self, name)
            figure = getattr(usage, name)
            if limit is not None and figure > limit:
                raise UsageLimitExceeded(name, limit, figure, sent=True)
        cost = self.cost
        if cost is not None and usage.cost is not None and usage.cost > cost:
            raise UsageLimitExceeded("cost", cost, usage.cost, sent=True)


class LimitFigures(Record):
    """What a turn's usage limits count so far (:meth:`Turn.limit_figures
    <kova.agent.Turn.limit_figures>`): its model calls and tool calls, those of the turns its
    tools ran included, and its whole usage."""

    limits: UsageLimits
    requests: int
    tool_calls: int
    usage: Usage
