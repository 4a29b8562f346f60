"""``ToolContext``: what a tool may know about the call it serves, without globals.

A ``@tool`` function declares a parameter annotated ``ToolContext`` (or ``ToolContext[MyDeps]``)
and receives it; the model never sees that parameter::

    @tool
    async def orders(ctx: ToolContext[Db], customer: str) -> str:
        \"\"\"The customer's open orders.

        Args:
            customer: the customer's id.
        \"\"\"
        async with ctx.deps.session() as session:     # the object passed to run(..., deps=db)
            return await session.open_orders(customer, request_id=ctx.idempotency_key)

The agent's tool pool sets the context around every call it runs; :func:`current_tool_context`
reads it from anywhere in the call (a helper the tool calls), and the caller's own
``contextvars`` reach the tool too.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from contextvars import Token

__all__ = ["ToolContext", "current_tool_context", "idempotency_key", "serving_call"]

DepsT = TypeVar("DepsT")


class ToolContext(Generic[DepsT]):
    """The call a tool is serving (read-only).

    Attributes:
        call_id: the id of this call in its turn (``ToolUse.id``: the provider's, unless the
            turn had seen it already, see ``docs/tools.md``).
        turn_id: the id of the turn the call belongs to (the same across a paused turn's
            resume, in this process or another).
        agent: the agent's name (``AgentBuilder.name``).
        idempotency_key: a key derived from the turn and the call: the same every time this
            call is run again (a retry, a resumed turn), different for every other call. Pass
            it to the service the tool writes to, so that doing the work twice does it once.
        deps: the object the caller passed as ``run(..., deps=...)`` /
            ``stream(..., deps=...)`` (``None`` when it passed none).
    """

    __slots__ = ("_idempotency_key", "agent", "call_id", "deps", "turn_id")

    call_id: str
    turn_id: str
    agent: str
    deps: DepsT
    _idempotency_key: str | None

    def __init__(
        self,
        *,
        call_id: str,
        turn_id: str,
        agent: str,
        deps: DepsT,
        idempotency_key: str | None = None,
    ) -> None:
        for name, value in (("call_id", call_id), ("turn_id", turn_id), ("agent", agent)):
            if not isinstance(value, str):
                raise TypeError(f"ToolContext {name} must be a str, got {type(value).__name__}")
        object.__setattr__(self, "call_id", call_id)
        object.__setattr__(self, "turn_id", turn_id)
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "_idempotency_key", idempotency_key)
        object.__setattr__(self, "deps", deps)

    @property
    def idempotency_key(self) -> str:
        # Worked out when first read (a SHA-256 per call otherwise; most tools never read it).
        key: str | None = self._idempotency_key
        if key is None:
            key = _key(self.turn_id, self.call_id)
            object.__setattr__(self, "_idempotency_key", key)
        return key

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a ToolContext is read-only")

    def __repr__(self) -> str:
        return (
            f"ToolContext(call_id={self.call_id!r}, turn_id={self.turn_id!r}, "
            f"agent={self.agent!r}, idempotency_key={self.idempotency_key!r}, deps={self.deps!r})"
        )


def _key(turn_id: str, call_id: str) -> str:
    # The call id is the model's text: it may hold lone surrogates, which UTF-8 refuses.
    # "surrogatepass" encodes them as their three-byte forms, which no valid UTF-8 text
    # produces: every other id keeps its key, and distinct ids still get distinct keys.
    text = f"kova-tool-call\x00{turn_id}\x00{call_id}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def idempotency_key(turn_id: str, call_id: str) -> str:
    """The idempotency key of call ``call_id`` in turn ``turn_id`` (what
    :attr:`ToolContext.idempotency_key` holds)."""
    return _key(turn_id, call_id)


_CURRENT: ContextVar[ToolContext[Any] | None] = ContextVar("kova_tool_context", default=None)


def current_tool_context() -> ToolContext[Any] | None:
    """The context of the tool call running in this task (``None`` outside one)."""
    return _CURRENT.get()


def serving_call(context: ToolContext[Any]) -> Token[ToolContext[Any] | None]:
    """Make ``context`` what :func:`current_tool_context` returns in this task, for the tool
    call about to run; reset with the token (``token.var.reset(token)``). The call runs in a
    copy of its caller's context, so the caller's own variables hold their values."""
    return _CURRENT.set(context)
