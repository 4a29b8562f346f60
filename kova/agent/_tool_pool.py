"""The tool pool: runs one step's tool calls concurrently under a capacity limit.

An open agent has one :class:`ToolRunner` (built when its ``async with`` block starts): the
agent's :class:`~kova.tools.ToolRegistry` (shared, not owned: the turn reads the tool
definitions from it, and an MCP connection registers its server's tools there), its approval
policy and the limit of ``max_concurrent_tools``. Every step runs in its caller's task (a
streamed step in a task of the turn stream's nursery, its events read from a channel): no
actor, no mailbox. For every call, in this order: lookup, argument parsing and schema
validation, the approval handler, and the tool itself. Every failure of a *call* (unknown
tool, arguments that are not JSON or fail the schema, a denial, a tool that raises or
returns something malformed) becomes an in-band error :class:`~kova.ToolResult` the model
can recover from; only a cancellation stops the step.

A handler may also return :data:`~kova.agent.DEFER`, and a defer predicate
(``AgentBuilder.defer_approvals``) picks calls without a handler: such a call does not run; its
outcome is ``DEFER`` and the turn core pauses the turn once the step's other calls are in.
Calls the step names as ``approved`` (a person approved them on a resumed turn, or their
tool was approved for the rest of the turn) skip both.

User code never stops a step: an approval handler that raises denies that call (the result
says so). Handlers may be sync or async; a sync one runs inline in the step's task, so it
must be quick.

An observed call (the turn has subscribers) is reported on the turn's event stream:
``ToolStarted`` when the runner takes it, ``ToolExecutionStarted`` just before the tool runs
and ``ToolFinished`` when it ends, the last two awaited in the call's task (a lifecycle hook
is a subscriber of them, see ``_lifecycle``).

Streamed turns see every call bracketed: :class:`~kova.agent.ToolCallStarted` first, when the
runner takes the call (before any check), then :class:`~kova.agent.ToolCallFinished` with its
result, whatever the outcome, so a UI can pair them by call id.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import types
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    TypeAlias,
    TypeVar,
    runtime_checkable,
)

import trio

from .._door import asyncio_hint
from .._errors import ToolError
from .._log import get_logger
from .._models import ToolAnnotations, ToolResult, ToolUse
from .._observe import (
    ToolExecutionStarted,
    ToolFinished,
    ToolOutcome,
    ToolStarted,
    TurnEmitter,
    new_span_id,
    stray_cancel,
    tool_scope,
)
from .._record import evolve
from ..tools import FunctionTool, ToolContext, annotations_of
from ..tools._context import serving_call
from ._approvals import DEFER, Deferred, DeferredResult
from ._events import ToolCallDeferred, ToolCallFinished, ToolCallStarted
from ._input import block_problem
from ._nesting import CallSite, ToolCalls, serving_agent_call

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Generator

    from ..tools import Tool, ToolRegistry

__all__ = [
    "ApprovalHandler",
    "Approver",
    "DeferPredicate",
    "ToolRunner",
]

log = get_logger(__name__)
_T = TypeVar("_T")

ApprovalResult: TypeAlias = "bool | str | Deferred"
"""``True`` approves; ``False`` denies; a string denies with that reason for the model;
:data:`~kova.agent.DEFER` leaves the call to a later decision (the turn pauses)."""


@runtime_checkable
class ApprovalHandler(Protocol):
    """Gates every tool call before it runs.

    ``approve`` may be async (it can then wait for a person, e.g. on a channel from a UI,
    while the rest of the application keeps running) or a plain function. If it raises, the
    call is denied with an error result that names the exception; the turn goes on.

    ``approve`` may also take a second positional parameter: it then receives the tool's
    :class:`~kova.ToolAnnotations` with the call (all hints ``None`` when the tool declares
    none), so ``return annotations.is_read_only`` approves exactly the read-only tools. The
    number of parameters decides, once, when the tool pool starts; one-parameter handlers
    keep working unchanged.
    """

    def approve(self, call: ToolUse) -> ApprovalResult | Awaitable[ApprovalResult]: ...


ApprovalFunction: TypeAlias = (
    "Callable[[ToolUse], ApprovalResult | Awaitable[ApprovalResult]] "
    "| Callable[[ToolUse, ToolAnnotations], ApprovalResult | Awaitable[ApprovalResult]]"
)
"""An approval handler as a plain callable, sync or async; with a second parameter it also
gets the tool's annotations (see :class:`ApprovalHandler`)."""

DeferPredicate: TypeAlias = (
    "Callable[[ToolUse], bool | Awaitable[bool]] "
    "| Callable[[ToolUse, ToolAnnotations], bool | Awaitable[bool]]"
)
"""Picks the calls whose approval is deferred to a person (``AgentBuilder.defer_approvals``):
a function of the call, and optionally the tool's annotations, sync or async."""


def defer_unless_read_only(call: ToolUse, annotations: ToolAnnotations) -> bool:
    """The default defer predicate: every tool not annotated read-only."""
    return not annotations.is_read_only


_CODE_EXITS = (SystemExit, GeneratorExit, KeyboardInterrupt)
r"""The ``BaseException``\ s a tool, an approval handler or a hook may raise itself:
``sys.exit()`` (argparse on bad input), a stray ``GeneratorExit``, ``raise
KeyboardInterrupt``. Each ends only that call, in-band; none may stop the runtime."""

_TRIO_KI_FILE = os.path.normcase(inspect.getfile(trio.lowlevel.enable_ki_protection))
"""trio's SIGINT handler lives in this file (with ``enable_ki_protection``)."""


def raised_by_code(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by the code that ran, not by a real Ctrl-C.

    trio delivers SIGINT by raising ``KeyboardInterrupt`` from its signal handler inside
    whatever unprotected code is running, a tool's included: that exception's innermost frame
    is trio's handler. A ``KeyboardInterrupt`` a tool raises itself ends in the tool's frame.
    (A Ctrl-C that arrives while the tool waits is delivered to the main task instead, and
    cancels the turn from there.)
    """
    if not isinstance(exc, KeyboardInterrupt):
        return True
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is None or os.path.normcase(frame.tb_frame.f_code.co_filename) != _TRIO_KI_FILE


def _named(exc: BaseException) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _takes_annotations(approve: Callable[..., object]) -> bool:
    """Whether an approval callable accepts a second positional argument (the annotations)."""
    try:
        parameters = inspect.signature(approve).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return False
    positional = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if parameter.name == "path":  # the keyword of _takes_path
            continue
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional += 1
    return positional >= 2


def _takes_path(function: Callable[..., object]) -> bool:
    """Whether an approval handler or defer predicate takes a ``path`` keyword (the tool-call
    ids that led to a call an inner agent makes: ``agent.as_tool()``)."""
    try:
        parameter = inspect.signature(function).parameters.get("path")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


class Approver:
    """An agent's approval policy: its approval handler and defer predicate (either may be
    ``None``), applied to one call at a time.

    The tool pool asks its own; an agent used as a tool (``agent.as_tool()``) that has
    neither asks the policy of the turn that runs it, with the call's ``path``.
    """

    __slots__ = (
        "_approve",
        "_approve_path",
        "_approve_with_annotations",
        "_defer_path",
        "_defer_with_annotations",
        "approval",
        "defer",
    )

    def __init__(
        self,
        approval: ApprovalHandler | ApprovalFunction | None,
        defer: DeferPredicate | None,
    ) -> None:
        self.approval = approval
        self.defer = defer
        self._defer_with_annotations = defer is not None and _takes_annotations(defer)
        self._defer_path = defer is not None and _takes_path(defer)
        self._approve: Callable[..., object] | None = None
        self._approve_with_annotations = self._approve_path = False
        if approval is not None:
            approve = approval.approve if isinstance(approval, ApprovalHandler) else approval
            self._approve = approve
            self._approve_with_annotations = _takes_annotations(approve)
            self._approve_path = _takes_path(approve)

    @property
    def active(self) -> bool:
        """Whether there is a handler or a defer predicate at all."""
        return self.approval is not None or self.defer is not None

    async def decide(
        self, call: ToolUse, tool: Tool, path: tuple[str, ...] = ()
    ) -> str | Deferred | None:
        """None when approved, DEFER when left to a person, else the denial message for the
        model."""
        defer: Any = self.defer
        if defer is not None:
            try:
                args: tuple[object, ...] = (call,)
                if self._defer_with_annotations:
                    args = (call, annotations_of(tool) or ToolAnnotations())
                picked: object = defer(*args, path=path) if self._defer_path else defer(*args)
                if inspect.isawaitable(picked):
                    picked = await picked
            except Exception as exc:  # user code: deny in-band instead of crashing the pool
                log.warning("tool.defer.failed", tool=call.name, error=repr(exc))
                return f"tool call denied: the defer predicate raised {type(exc).__name__}: {exc}"
            if picked:
                return DEFER
        approve = self._approve
        if approve is None:
            return None
        try:
            args = (call,)
            if self._approve_with_annotations:
                args = (call, annotations_of(tool) or ToolAnnotations())
            decision: object = approve(*args, path=path) if self._approve_path else approve(*args)
            if inspect.isawaitable(decision):
                decision = await decision
        except _CODE_EXITS as exc:
            if not raised_by_code(exc):
                raise
            log.warning("tool.approval.failed", tool=call.name, error=repr(exc))
            return f"tool call denied: the approval handler raised {_named(exc)}"
        except Exception as exc:  # user code: deny in-band instead of crashing the pool
            log.warning("tool.approval.failed", tool=call.name, error=repr(exc))
            return f"tool call denied: the approval handler raised {type(exc).__name__}: {exc}"
        if decision is True:
            return None
        if decision is DEFER:
            return DEFER
        if isinstance(decision, str) and decision:
            return f"tool call denied: {decision}"
        return "tool call denied by the approval handler"


_Checked: TypeAlias = "tuple[DeferredResult, ToolOutcome, bool | None, float | None]"
"""One call's result and how it went: its outcome, whether it was approved (``None``: no
policy asked) and how long the tool ran (when observed)."""


@types.coroutine
def _in_context(
    coroutine: Coroutine[Any, Any, _T], context: contextvars.Context
) -> Generator[Any, Any, _T]:
    """``await _in_context(coroutine, context)``: awaits ``coroutine`` with each of its steps
    run in ``context`` (what a task of its own would give it), in the awaiting task."""
    run = context.run
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                if error is None:
                    yielded = run(coroutine.send, value)
                else:
                    thrown, error = error, None
                    yielded = run(coroutine.throw, thrown)
            except StopIteration as stop:
                result: _T = stop.value
                return result
            try:
                value = yield yielded
            except BaseException as exc:  # thrown in by trio: handed to the coroutine
                value, error = None, exc
    finally:
        coroutine.close()


class ToolRunner:
    """An open agent's tool calls: the registry, the approval policy and the capacity limit
    (``max_concurrent_tools``) every step of the agent runs under, streamed or not. One per
    ``async with agent`` block; a step runs in its caller's task (:meth:`run`) or in a task
    of the turn stream's nursery (:meth:`run_step`), never through a mailbox.

    The limit is a count of free slots and a queue: a call takes a free slot without a
    scheduler pass (the tool's own awaits are its checkpoints), a freed slot goes to the
    first call waiting, if any (first come, first served, as trio's ``CapacityLimiter``).
    A call made inside one of the agent's own calls (a tool that runs its agent again, in its
    task or a task it started) takes no slot of its own when none is free: its caller's slot
    is waiting for it, and waiting for another would wait forever at ``max_concurrent_tools``
    levels deep. In the calling task itself it never takes a second one.
    """

    __slots__ = ("_free", "_holders", "_queue", "approver", "registry")

    def __init__(self, registry: ToolRegistry, approver: Approver, max_concurrent: int) -> None:
        self.registry = registry
        self.approver = approver
        self._free = max_concurrent
        self._queue = trio.lowlevel.ParkingLot()
        self._holders: set[trio.lowlevel.Task] = set()

    async def _slot(self) -> trio.lowlevel.Task | None:
        """Take a slot for a call of this task (the task, to give it back), or None for a
        call inside one of this agent's calls that runs in its caller's slot."""
        task = trio.lowlevel.current_task()
        if task in self._holders:
            return None
        if self._free:  # a free slot: no scheduler pass (the tool's own awaits checkpoint)
            self._free -= 1
        else:
            nursery = task.parent_nursery
            while nursery is not None:  # only when waiting: is a caller's call waiting on us?
                if nursery.parent_task in self._holders:
                    return None
                nursery = nursery.parent_task.parent_nursery
            await self._queue.park()  # until a call that ends hands its slot over
        self._holders.add(task)
        return task

    def run(self, step: ToolCalls) -> Awaitable[tuple[DeferredResult, ...]]:
        """Run ``step`` in the calling task, in a copy of its context: a context variable a
        tool sets does not outlive its call, as if the call had a task of its own."""
        return _in_context(self.run_step(step), contextvars.copy_context())

    async def run_step(self, step: ToolCalls) -> tuple[DeferredResult, ...]:
        """The step's results in call order (``DEFER`` for a call left to a person), its
        calls run concurrently (a lone call in this task)."""
        calls = step.calls
        if len(calls) == 1:  # the usual step: no nursery, no task of its own
            return (await self._run_call(calls[0], step),)
        results: list[DeferredResult | None] = [None] * len(calls)

        async def run_one(index: int, call: ToolUse) -> None:
            results[index] = await self._run_call(call, step)

        try:
            async with trio.open_nursery() as nursery:
                for index, call in enumerate(calls):
                    nursery.start_soon(run_one, index, call)
        except BaseExceptionGroup as group:
            # The calls were cancelled (tools' own failures are results, never raised):
            # leave as one Cancelled, as a single call does, not as a group of them.
            cancelled, rest = group.split(trio.Cancelled)
            if rest is None and cancelled is not None:
                raise _first(cancelled) from None
            raise
        return tuple(result for result in results if result is not None)

    async def _run_call(self, call: ToolUse, step: ToolCalls) -> DeferredResult:
        """One call, bracketed on ``step.on_event`` (and observed, when somebody listens)."""
        if step.telemetry is not None:
            return await self._run_observed(call, step, *step.telemetry)
        on_event = step.on_event
        if on_event is not None:
            await on_event(ToolCallStarted(call=call))
        result = (await self._checked_call(call, step))[0]
        if on_event is not None:
            await on_event(_finished(call, result))
        return result

    async def _run_observed(
        self, call: ToolUse, step: ToolCalls, emitter: TurnEmitter, parent: int
    ) -> DeferredResult:
        """:meth:`_run_call` with ToolStarted / ToolFinished on the turn's event stream (the
        finished one also on cancellation), and this task marked as the call's scope."""
        span_id = new_span_id()
        turn_id = emitter.turn_id
        emitter.emit(
            ToolStarted(
                turn_id=turn_id,
                span_id=span_id,
                parent_id=parent,
                time=trio.current_time(),
                call=call,
            )
        )
        checked: _Checked | None = None
        on_event = step.on_event
        try:
            if on_event is not None:
                await on_event(ToolCallStarted(call=call))
            with tool_scope(emitter, span_id):
                checked = await self._checked_call(call, step, (emitter, span_id))
            result, outcome, approved, duration = checked
            answered = result if isinstance(result, ToolResult) else None
            # Awaited: a subscriber may wait here (an async lifecycle hook's on_tool_end),
            # before the result goes back.
            await emitter.emit_and_wait(
                ToolFinished(
                    turn_id=turn_id,
                    span_id=span_id,
                    time=trio.current_time(),
                    call=call,
                    outcome=outcome.value,
                    approved=approved,
                    duration=duration,
                    error=answered.text if answered is not None and answered.is_error else None,
                    result=answered,
                )
            )
            if on_event is not None:
                await on_event(_finished(call, result))
        finally:
            if checked is None:
                emitter.emit(
                    ToolFinished(
                        turn_id=turn_id,
                        span_id=span_id,
                        time=trio.current_time(),
                        call=call,
                        outcome="cancelled",
                        approved=None,
                        duration=None,
                    )
                )
        return result

    async def _checked_call(
        self, call: ToolUse, step: ToolCalls, scope: tuple[TurnEmitter, int] | None = None
    ) -> _Checked:
        """Lookup, arguments, approval, then the tool in a slot of the limit. ``scope``: the
        call's emitter and span (observed: ToolExecutionStarted, and the duration)."""
        tool = self.registry.get(call.name)
        problem = self._check(call, tool)
        if problem is not None:
            return ToolResult.error(problem, tool_use_id=call.id), ToolOutcome.ERROR, None, None
        assert tool is not None
        approved: bool | None = True
        denial: str | Deferred | None = None
        if call.id not in step.approved:
            approver = step.approver
            if approver is None or not approver.active:
                approved = None
            else:
                denial = await approver.decide(call, tool, step.path)
                approved = denial is None
        if denial is DEFER:
            log.info("tool.call.deferred", tool=call.name, tool_use_id=call.id)
            return DEFER, ToolOutcome.DEFERRED, None, None
        if denial is not None:
            log.info("tool.call.denied", tool=call.name, tool_use_id=call.id)
            return ToolResult.error(denial, tool_use_id=call.id), ToolOutcome.DENIED, approved, None
        holder = await self._slot()
        try:
            started = None
            if scope is not None:
                emitter, span_id = scope
                await emitter.emit_and_wait(
                    ToolExecutionStarted(
                        turn_id=emitter.turn_id,
                        span_id=span_id,
                        time=trio.current_time(),
                        call=call,
                    )
                )
                started = trio.current_time()
            result = await self._execute(tool, call, step)
        finally:
            if holder is not None:
                self._holders.discard(holder)
                if self._queue:
                    self._queue.unpark()  # the slot goes to the first call waiting
                else:
                    self._free += 1
        if result is None:  # an agent tool whose inner turn paused for approvals
            log.info("tool.call.deferred", tool=call.name, tool_use_id=call.id)
            return DEFER, ToolOutcome.DEFERRED, approved, None
        outcome = ToolOutcome.ERROR if result.is_error else ToolOutcome.SUCCESS
        duration = None if started is None else trio.current_time() - started
        return result, outcome, approved, duration

    async def _execute(self, tool: Tool, call: ToolUse, step: ToolCalls) -> ToolResult | None:
        """The tool's result, answering ``call`` (an error result when the tool failed or
        returned something malformed); ``None`` when the call is an agent tool
        (``agent.as_tool()``) whose inner turn paused for approvals (its state is in
        ``step.paused``)."""
        serving = serving_call(
            ToolContext(call_id=call.id, turn_id=step.turn_id, agent=step.agent, deps=step.deps)
        )
        site = serving_agent_call(CallSite(step, call, step.on_event if step.streamed else None))
        try:
            if isinstance(tool, FunctionTool):
                # The registry has just validated the arguments against this very schema.
                result = await tool.execute_validated(call.input, tool_use_id=call.id)
            else:
                result = await tool.execute(call.input)
        except _CODE_EXITS as exc:  # sys.exit() in a tool (argparse does) ends only the call
            if not raised_by_code(exc):
                raise  # a real Ctrl-C: it cancels the turn, as it always has
            log.info("tool.call.failed", tool=call.name, error=repr(exc))
            return ToolResult.error(f"tool {call.name!r} raised {_named(exc)}", tool_use_id=call.id)
        except Exception as exc:  # a tool's failure goes to the model in-band, by design
            # Logged at info: the model reads the failure and the turn's events carry it
            # (ToolCallFinished), so a raising tool is not news for the user's terminal. An
            # asyncio library used from a trio tool is a wiring mistake the host must fix:
            # a warning, and the log line and the model both get the way out (kova.asyncio,
            # runs_on="asyncio").
            hint = asyncio_hint(exc)
            if hint is None:
                log.info("tool.call.failed", tool=call.name, error=repr(exc))
            else:
                log.warning("tool.call.failed", tool=call.name, error=repr(exc), hint=hint)
            suffix = "" if hint is None else f" ({hint})"
            return ToolResult.error(
                f"tool {call.name!r} failed: {exc}{suffix}", tool_use_id=call.id
            )
        except trio.Cancelled as exc:  # a tool's own Cancelled (kept from elsewhere): a fault
            if not stray_cancel(exc):
                raise
            log.warning("tool.call.failed", tool=call.name, error=repr(exc))
            return ToolResult.error(
                f"tool {call.name!r} raised trio.Cancelled uncancelled", tool_use_id=call.id
            )
        finally:
            site.var.reset(site)
            serving.var.reset(serving)
        if call.id in step.paused:
            return None
        if not isinstance(result, ToolResult):  # a Tool written without type checking
            return ToolResult.error(  # type: ignore[unreachable]
                f"tool {call.name!r} returned {type(result).__name__}, not a ToolResult",
                tool_use_id=call.id,
            )
        problem = block_problem(result)
        if problem is not None:  # it would reach the provider in the next request
            return ToolResult.error(
                f"tool {call.name!r} returned a malformed result: {problem}", tool_use_id=call.id
            )
        return result if result.tool_use_id == call.id else evolve(result, tool_use_id=call.id)

    def _check(self, call: ToolUse, tool: Tool | None) -> str | None:
        """Why ``call`` cannot run, or None."""
        if tool is None:
            available = ", ".join(sorted(self.registry.names())) or "none"
            return f"unknown tool {call.name!r}; available tools: {available}"
        if call.raw_arguments is not None:
            return (
                f"the arguments for {call.name!r} are not a JSON object: "
                f"{call.raw_arguments[:200]!r}"
            )
        try:
            self.registry.validate_arguments(call.name, call.input)
        except ToolError as exc:  # invalid arguments, or a tool whose schema is broken
            return str(exc)
        return None


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception inside ``group`` (through nested groups)."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _finished(call: ToolUse, result: DeferredResult) -> ToolCallFinished | ToolCallDeferred:
    """The event that closes a call's ToolCallStarted."""
    if result is DEFER:
        return ToolCallDeferred(call=call)
    return ToolCallFinished(call=call, result=result)
