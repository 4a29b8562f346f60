"""Lifecycle hooks, served from the event stream.

A :class:`LifecycleHook` is not a channel of its own: :class:`LifecycleSubscriber` turns the
tool pool's events into its calls, and ``AgentBuilder.lifecycle_hook(hook)`` subscribes one
to the agent's turns. ``on_tool_start`` runs at :class:`~kova.telemetry.ToolExecutionStarted`
(the call passed its checks and approval and is about to run) and ``on_tool_end`` at the
:class:`~kova.telemetry.ToolFinished` of a call that ran, both in the tool call's task. An
async method's awaitable is returned to the pool, which awaits it before the tool runs (or
before the call's result goes back), so an async hook works as it always has.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._log import get_logger
from .._models import ToolResult
from .._observe import ToolExecutionStarted, ToolFinished, ToolOutcome
from ._tool_pool import _CODE_EXITS as CODE_EXITS
from ._tool_pool import raised_by_code

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .._models import ToolUse
    from .._observe import TelemetryEvent

__all__ = ["LifecycleHook", "LifecycleSubscriber"]

log = get_logger(__name__)


@runtime_checkable
class LifecycleHook(Protocol):
    """Observes tool calls that run (denied, deferred and invalid calls are not seen).

    Both methods may be async or plain functions; the tool call waits for them. A hook that
    raises is logged (``tool.hook.failed``) and changes nothing: the call and the turn go on
    as if it had returned.
    """

    def on_tool_start(self, call: ToolUse) -> Awaitable[None] | None: ...

    def on_tool_end(
        self, call: ToolUse, result: ToolResult, *, duration: float, outcome: ToolOutcome
    ) -> Awaitable[None] | None: ...


class LifecycleSubscriber:
    """The adapter that serves a :class:`LifecycleHook` from the event stream.

    ``AgentBuilder.lifecycle_hook(hook)`` uses one for that agent's turns; subscribe one
    yourself to serve a hook from a shared hub (``hub.subscribe(LifecycleSubscriber(hook))``).
    """

    __slots__ = ("_hook",)

    def __init__(self, hook: LifecycleHook) -> None:
        if not isinstance(hook, LifecycleHook):
            raise TypeError(
                "a lifecycle hook needs on_tool_start and on_tool_end methods, "
                f"got {type(hook).__name__}"
            )
        self._hook = hook

    def on_event(self, event: TelemetryEvent) -> Awaitable[None] | None:
        """Call the hook for the events it observes; an async method's awaitable is
        returned, for the tool pool to await."""
        match event:
            case ToolExecutionStarted(call=call):
                return _call("on_tool_start", self._hook.on_tool_start, call)
            case ToolFinished(
                call=call, outcome="success" | "error", result=ToolResult() as result
            ) if event.duration is not None:
                return _call(
                    "on_tool_end",
                    self._hook.on_tool_end,
                    call,
                    result,
                    duration=event.duration,
                    outcome=ToolOutcome(event.outcome),
                )
            case _:
                return None


def _call(
    name: str, function: Callable[..., object], *args: Any, **kw: Any
) -> Awaitable[None] | None:
    """Run one hook method; its failure is logged, never raised (user code must not crash
    the pool or change the turn)."""
    try:
        value = function(*args, **kw)
    except CODE_EXITS as exc:
        if not raised_by_code(exc):
            raise
        log.warning("tool.hook.failed", hook=name, error=repr(exc))
        return None
    except Exception as exc:
        log.warning("tool.hook.failed", hook=name, error=repr(exc))
        return None
    if inspect.isawaitable(value):
        return _awaited(name, value)
    return None


async def _awaited(name: str, value: Awaitable[object]) -> None:
    try:
        await value
    except CODE_EXITS as exc:
        if not raised_by_code(exc):
            raise
        log.warning("tool.hook.failed", hook=name, error=repr(exc))
    except Exception as exc:
        log.warning("tool.hook.failed", hook=name, error=repr(exc))
