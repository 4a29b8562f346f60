"""The turn core: one agent turn as a value, with no I/O in it.

:class:`Turn` holds everything a turn knows (the working conversation, the messages it has
produced, usage, model calls made, the current step's tool calls and the results already in,
decisions, limits, its id) and answers one question, :meth:`Turn.next_step`: what now?

- :class:`CallModel`: send ``request`` to the model, then :meth:`Turn.model_replied`;
- :class:`RunTools`: run ``calls``, then :meth:`Turn.tools_finished` with one result per call
  (or :data:`~kova.agent.DEFER` for a call left to a person);
- :class:`AwaitApproval`: calls wait for decisions; :meth:`Turn.decided` with the decided
  :class:`~kova.agent.PendingApprovals` goes on (or stop here: ``response`` is the paused
  turn's answer, and :meth:`Turn.resume` continues it later, anywhere);
- :class:`Finished`: ``response`` is the turn's :class:`~kova.agent.AgentResponse`.

Like a codec (or h11's connection), it does no I/O, reads no clock and needs no event loop:
``Agent.run`` and ``Agent.stream`` drive it on trio with the provider actor and the tool pool;
another driver (a workflow engine, a test, a synchronous script) drives the same value and
gets the same loop. The limits live here: the iteration limit, the context budget and the
usage limits raise from :meth:`next_step` before a call or step starts, and a reply over a
token limit raises from :meth:`model_replied`; a turn that raised stays failed.

:meth:`Turn.to_json` / :meth:`Turn.from_json` save and restore the whole value (versioned:
a turn saved in another format version is refused, never misread).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeGuard

from .._errors import (
    AgentLoopError,
    ApprovalMismatchError,
    ContextBudgetExceededError,
    ContextOverflow,
    KovaError,
    MaxIterationsError,
    SerializationError,
)
from .._estimate import heuristic_count_tokens
from .._messages import (
    HasContent,
    Message,
    Role,
    ToolResult,
    ToolUse,
    block_from_dict,
    block_to_dict,
)
from .._record import Record, evolve
from .._requests import ChatRequest, InferenceConfig, ToolAnnotations, ToolDefinition
from .._responses import ModelResponse, StopKind, StopReason, Usage
from ._approvals import (
    DEFER,
    DeferredResult,
    InnerPause,
    PendingApprovals,
    PendingCall,
    call_fingerprint,
    check_counters,
    message_fingerprint,
    read_document,
    same_pause,
)
from ._call_ids import call_ids_of, unique_call_ids
from ._context import (
    Compact,
    Compaction,
    Compactor,
    ContextCompacted,
    ContextPolicy,
    native_compaction,
)
from ._counters import Counters, counters_from_json, counters_to_json
from ._events import AgentResponse, ToolCallFinished, ToolCallStarted, ToolsAdded, ToolsFound
from ._guard_record import GuardRecord
from ._input import coerce_history
from ._limits import LimitFigures, UsageLimits
from ._state_json import (
    config_from_json,
    config_to_json,
    count,
    field,
    limits_from_json,
    limits_to_json,
    load_document,
    messages_from_json,
    result_from_json,
    result_to_json,
    stop_from_json,
    tool_from_json,
    tool_to_json,
    usage_from_json,
    usage_to_json,
)
from ._tool_search import SEARCH_TOOLS, ToolSearch

if TYPE_CHECKING:
    from .._messages import JSONValue

CoreEvent: TypeAlias = (
    ToolCallStarted | ToolsFound | ToolsAdded | ToolCallFinished | ContextCompacted
)
"""What the core itself did that a driver reports (:meth:`Turn.take_events`): the
``search_tools`` calls it answers, and compactions of its context."""

__all__ = [
    "AwaitApproval",
    "CallModel",
    "CoreEvent",
    "Finished",
    "RunTools",
    "Step",
    "Turn",
    "new_turn_id",
]

TURN_FORMAT: Final = 3
"""The version of :meth:`Turn.to_json`'s document (2: its pending part is signed; 3: the
counters as one record, written as the pending document writes them)."""

_MODEL = "model"
_TOOLS = "tools"
_APPROVAL = "approval"
_DONE = "done"
_FAILED = "failed"

_NO_NAMES: frozenset[str] = frozenset()
"""Shared by every turn that has none (an empty frozenset is not a singleton: 216 bytes)."""
_NO_USAGE = Usage()
"""A turn's usage before its first reply (shared: a value)."""

_TRUNCATED = (StopKind.MAX_TOKENS, StopKind.STOP_SEQUENCE)
"""Stops that can cut a tool call short: such calls are answered, never run."""


class CallModel(Record):
    """Send ``request`` to the model; give the answer to :meth:`Turn.model_replied`."""

    request: ChatRequest
    count_tokens: bool = False
    """First count the request's input tokens (``provider.count_tokens(request)``) and give
    the count to :meth:`Turn.tokens_counted` (the ``count_tokens_before_request`` limit);
    :meth:`Turn.next_step` then returns this call without the flag."""


class RunTools(Record):
    """Run ``calls`` (concurrently, if you like); give their results, in this order, to
    :meth:`Turn.tools_finished`."""

    calls: tuple[ToolUse, ...]
    approved: frozenset[str] = frozenset()
    """Ids of calls already approved (by a person's decision, or a tool approved for the rest
    of the turn): run them without asking the approval handler again."""
    turn_id: str = ""
    """The turn's id: with a call's id, a key that names this call in this turn (for
    idempotent tools)."""
    resumes: Mapping[str, InnerPause] = MappingProxyType({})
    """Calls that ran an inner agent (``agent.as_tool()``) whose turn paused, by call id,
    with that turn's decided state: running such a call again continues the inner turn."""


class AwaitApproval(Record):
    """Calls wait for a decision. Decide them on ``pending`` and pass it to
    :meth:`Turn.decided`, or stop: ``response`` is the paused turn's answer (its ``pending``
    set), and ``Turn.resume`` / ``agent.resume`` continue it later."""

    pending: PendingApprovals
    response: AgentResponse


class Finished(Record):
    """The turn is over: ``response`` is what it produced."""

    response: AgentResponse


Step: TypeAlias = CallModel | Compact | RunTools | AwaitApproval | Finished
"""What :meth:`Turn.next_step` returns."""


def new_turn_id() -> str:
    """A random turn id: 32 hex digits (as ``uuid4().hex``, without importing uuid)."""
    return os.urandom(16).hex()


def _not_run(call: ToolUse, stop: StopReason) -> ToolResult:
    return ToolResult.error(
        f"tool call not run: the model's answer was cut off ({stop}) while it was making its "
        "tool calls, so its arguments may be incomplete; call it again if it is still needed",
        tool_use_id=call.id,
    )


def _denied(call_id: str, reason: str | None) -> ToolResult:
    text = f"tool call denied: {reason}" if reason else "tool call denied by the reviewer"
    return ToolResult.error(text, tool_use_id=call_id)


_EXACT_COUNTERS: Final = frozenset({"anthropic", "gemini", "bedrock", "openai-responses"})
"""Providers (by name) whose ``count_tokens`` asks the API: a context policy counts a request
near the window with them before sending it."""


def _positive_int(name: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def _sequence(value: object) -> TypeGuard[Sequence[Any]]:
    """``value`` is a ``Sequence`` other than text (a tuple or list is answered without the
    ABC check, which costs ~10x an ``isinstance`` of a concrete type: a class registered
    directly, as tuple and str are, is never cached by the ABC machinery)."""
    if isinstance(value, tuple | list):
        return True
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _tool_definitions(tools: object) -> tuple[ToolDefinition, ...]:
    if not _sequence(tools):
        raise TypeError(f"tools must be a sequence of ToolDefinition, got {type(tools).__name__}")
    for index, tool in enumerate(tools):
        if not isinstance(tool, ToolDefinition):
            raise TypeError(
                f"tools[{index}] must be a kova.ToolDefinition, got {type(tool).__name__}"
            )
    return tuple(tools)


def _options(
    config: object, system_prompt: object, limits: object, max_iterations: object, budget: object
) -> None:
    if not isinstance(config, InferenceConfig):
        raise TypeError(f"config must be a kova.InferenceConfig, got {type(config).__name__}")
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str, got {type(system_prompt).__name__}")
    if limits is not None and not isinstance(limits, UsageLimits):
        raise TypeError(f"limits must be a kova.agent.UsageLimits, got {type(limits).__name__}")
    _positive_int("max_iterations", max_iterations)
    _positive_int("context_budget", budget, optional=True)


class Turn:
    """One agent turn as a value (see the module docstring). Build one with :meth:`start`
    (or :meth:`resume`, :meth:`from_json`); then loop on :meth:`next_step`."""

    __slots__ = (
        "_agent",
        "_always",
        "_approved",
        "_base",
        "_budget",
        "_call_ids",
        "_calls",
        "_compactor",
        "_config",
        "_counted",
        "_denials",
        "_events",
        "_failed",
        "_guards",
        "_history",
        "_inner",
        "_inner_requests",
        "_inner_tool_calls",
        "_last_reply",
        "_last_stop",
        "_last_usage",
        "_limits",
        "_llm_calls",
        "_max_iterations",
        "_new",
        "_paused_inner",
        "_pending",
        "_phase",
        "_prefix",
        "_requests",
        "_response",
        "_results",
        "_resumes",
        "_running",
        "_search",
        "_system_prompt",
        "_thinking",
        "_tool_calls",
        "_tools",
        "_turn_id",
        "_usage",
        "_working",
    )

    def __init__(
        self,
        history: tuple[Message, ...],
        *,
        tools: tuple[ToolDefinition, ...],
        config: InferenceConfig,
        system_prompt: str | None,
        limits: UsageLimits | None,
        max_iterations: int,
        context_budget: int | None,
        turn_id: str,
        prefix: tuple[Message, ...] | None = None,
        agent: str = "",
        paused: PendingApprovals | None = None,
        search: ToolSearch | None = None,
    ) -> None:
        # Unchecked: the public ways in are start(), resume() and from_json(). ``prefix``:
        # the system message, prebuilt by a driver that runs many turns. ``paused``: the
        # state of a paused turn whose history ends with the calls it waits for (resume()).
        # ``search``: the deferred tools (a driver's, from a registry that checked them).
        self._turn_id = turn_id
        self._agent = agent
        self._system_prompt = system_prompt
        if prefix is None:
            prefix = (Message.system(system_prompt),) if system_prompt else ()
        self._prefix = prefix
        self._history = history
        self._new: list[Message] = []
        self._working: list[Message] = [*self._prefix, *history]
        self._tools = tools
        self._config = config
        self._limits = limits
        self._max_iterations = max_iterations
        self._budget = context_budget
        self._usage = _NO_USAGE  # this part's (a resumed turn reports what it did)
        self._llm_calls = 0
        self._thinking: list[str] = []
        self._base: Usage | None = None  # a resumed turn's usage before this part
        # What the agents this turn's tools ran (agent.as_tool) used: by agent name, and
        # their model calls and tool calls (usage limits count them).
        self._inner: dict[str, Usage] = {}
        self._inner_requests = 0
        self._inner_tool_calls = 0
        self._requests = 0
        self._tool_calls = 0
        self._always: frozenset[str] = _NO_NAMES  # tools a person approved for good
        self._last_usage: Usage | None = None
        self._last_reply: HasContent | None = None
        self._last_stop = StopReason.END_TURN
        self._phase = _MODEL
        self._counted = False
        self._calls: tuple[ToolUse, ...] = ()
        self._call_ids: set[str] | None = None  # the turn's call ids (built when needed)
        self._results: dict[str, ToolResult] = {}
        self._running: tuple[ToolUse, ...] = ()
        self._approved: frozenset[str] = _NO_NAMES
        self._denials: tuple[tuple[ToolUse, ToolResult], ...] = ()
        self._pending: PendingApprovals | None = None
        # Inner turns (agent.as_tool) of this step that paused, and those the step resumes.
        self._paused_inner: dict[str, InnerPause] = {}
        self._resumes: dict[str, InnerPause] = {}
        self._response: AgentResponse | None = None
        self._failed: KovaError | None = None
        # Deferred tools and what the model found of them (search_tools), if any.
        self._search = search
        self._events: list[CoreEvent] = []
        # The guards' decisions, by (kind, guard, call id): see _guard_record.
        self._guards: dict[tuple[str, str, str], GuardRecord] = {}
        # The context policy at work (ContextPolicy), if any.
        self._compactor: Compactor | None = None
        if paused is not None:
            self._restore_pause(paused)

    def _restore_pause(self, pending: PendingApprovals) -> None:
        """Stand where a paused turn stood: waiting for decisions on ``pending``'s calls,
        with its counts and the results of the calls that ran."""
        last = self._working[-1]
        self._base = pending.usage
        self._restore_counters(pending.counters)
        self._always = frozenset(pending.always)
        self._last_reply = last
        self._last_stop = StopReason.TOOL_USE
        self._calls = last.tool_uses
        self._results = {result.tool_use_id: result for result in pending.results}
        self._phase = _APPROVAL
        self._pending = evolve(pending, decisions={})

    # -- building one -----------------------------------------------------------------

    @classmethod
    def start(
        cls,
        history: str | Message | Sequence[Message],
        *,
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
        system_prompt: str | None = None,
        limits: UsageLimits | None = None,
        max_iterations: int = 10,
        context_budget: int | None = None,
        turn_id: str | None = None,
        deferred: Sequence[ToolDefinition] = (),
        search_limit: int = 5,
        context: ContextPolicy | None = None,
        model: str | None = None,
    ) -> Turn:
        """A new turn over ``history`` (the caller's; never modified).

        Args:
            history: the conversation so far, as :meth:`Agent.run <kova.agent.Agent.run>`
                takes it: a ``str`` is one user message, a :class:`~kova.Message` a
                one-message history.
            tools: the tool definitions offered to the model (:meth:`set_tools` changes them
                between model calls).
            config: the inference config sent with every model call.
            system_prompt: prepended as a system message (not part of ``new_messages``).
            limits: usage limits for the turn.
            max_iterations: tool-loop iterations: at most ``max_iterations + 1`` model calls.
            context_budget: refuse a model call whose prompt is estimated over this many
                tokens (the offline heuristic).
            turn_id: the turn's id (default: a random one). A deterministic driver (a
                workflow engine) passes its own.
            deferred: tools the model is not sent up front: it gets ``search_tools``
                instead, which this turn answers itself, and the tools it finds are offered
                from its next call on (docs/tools.md, "Many tools").
            search_limit: how many tools one search loads when the model does not say.
            context: what to do when a request would overflow the model's context window
                (docs/context.md); without one, such a request fails as today.
            model: the model's name, to look up its window when ``context`` gives none
                (default: ``config.model``).

        Raises:
            TypeError: an argument of the wrong type, naming it.
            ValueError: ``max_iterations`` or ``context_budget`` below 1.
        """
        messages = coerce_history(history)
        definitions = _tool_definitions(tools)
        _options(config, system_prompt, limits, max_iterations, context_budget)
        if turn_id is not None and not isinstance(turn_id, str):
            raise TypeError(f"turn_id must be a str, got {type(turn_id).__name__}")
        hidden = _tool_definitions(deferred)
        _positive_int("search_limit", search_limit)
        turn = cls(
            messages,
            tools=definitions,
            config=config,
            system_prompt=system_prompt,
            limits=limits,
            max_iterations=max_iterations,
            context_budget=context_budget,
            turn_id=turn_id or new_turn_id(),
        )
        if hidden:
            turn.set_tools(definitions, deferred=hidden, search_limit=search_limit)
        if context is not None:
            turn.set_context(context, model=model)
        return turn

    @classmethod
    def resume(
        cls,
        history: Sequence[Message],
        pending: PendingApprovals,
        *,
        tools: Sequence[ToolDefinition],
        config: InferenceConfig,
        system_prompt: str | None = None,
        limits: UsageLimits | None = None,
        max_iterations: int = 10,
        context_budget: int | None = None,
        agent: str = "",
    ) -> Turn:
        """Continue a paused turn with its decisions: ``history`` is the turn's history plus
        the paused part's ``new_messages`` (so it ends with the assistant message that made
        the pending calls), ``pending`` the decided :class:`PendingApprovals`.

        Everything is checked before the turn goes on; the returned turn's :meth:`next_step`
        runs the approved calls (the results of calls that already ran are kept, never run
        again), then the loop continues. Its ``new_messages`` are what the resumed part
        produces, and its usage and model calls those of this part (the limits count the
        whole turn). ``limits`` and ``max_iterations`` are the driver's (an agent passes its
        own): a stored value's limits are never taken on trust. ``agent``: the name its own
        usage is counted under in ``usage_by_agent`` (the agent driving it).

        Raises:
            TypeError: ``history`` or ``pending`` has the wrong type.
            ApprovalMismatchError: the history does not end with the assistant message the
                pending calls came from, a decision names an unknown call, a call's name or
                arguments differ from its fingerprint, or a call has no decision.
        """
        messages = coerce_history(history)
        if not isinstance(pending, PendingApprovals):
            raise TypeError(
                f"pending must be a kova.agent.PendingApprovals, got {type(pending).__name__}"
            )
        definitions = _tool_definitions(tools)
        _options(config, system_prompt, limits, max_iterations, context_budget)
        check_counters(pending)
        if not isinstance(agent, str):
            raise TypeError(f"agent must be a str, got {type(agent).__name__}")
        last = messages[-1] if messages else None
        if (
            last is None
            or last.role is not Role.ASSISTANT
            or message_fingerprint(last) != pending.message
        ):
            raise ApprovalMismatchError(
                "the history does not end with the assistant message the pending calls came "
                "from: pass the paused turn's history plus its response.new_messages"
            )
        calls = last.tool_uses
        by_id = {call.id: call for call in calls}
        covered: set[str] = set()
        for call_id, pause in pending.inner.items():
            call = by_id.get(call_id)
            if call is None or call_fingerprint(call.name, call.input) != pause.fingerprint:
                raise ApprovalMismatchError(
                    f"the paused inner turn of call {call_id!r} does not belong to a call the "
                    "assistant message made: its fingerprint differs"
                )
            covered.add(call_id)
        for item in pending.calls:
            if item.path:
                continue  # an inner agent's call: checked when its turn resumes
            call = by_id.get(item.id)
            if call is None or call_fingerprint(call.name, call.input) != item.fingerprint:
                raise ApprovalMismatchError(
                    f"pending call {item.id!r} ({item.name}) is not the call the assistant "
                    "message made: its fingerprint differs"
                )
            covered.add(item.id)
        for result in pending.results:
            if result.tool_use_id not in by_id or result.tool_use_id in covered:
                raise ApprovalMismatchError(
                    f"a stored result answers {result.tool_use_id!r}, which is not one of the "
                    "step's calls that ran"
                )
            covered.add(result.tool_use_id)
        if covered != set(by_id):
            missing = ", ".join(sorted(set(by_id) - covered))
            raise ApprovalMismatchError(f"the pending state does not cover the calls {missing}")
        turn = cls(
            messages,
            tools=definitions,
            config=config,
            system_prompt=system_prompt,
            limits=limits,
            max_iterations=max_iterations,
            context_budget=context_budget,
            turn_id=pending.turn_id,
            agent=agent,
            paused=pending,
        )
        turn.decided(pending)
        return turn

    # -- what the driver reads --------------------------------------------------------

    @property
    def turn_id(self) -> str:
        return self._turn_id

    @property
    def history(self) -> tuple[Message, ...]:
        """The history the turn began from (the caller's, without the system prompt)."""
        return self._history

    @property
    def new_messages(self) -> tuple[Message, ...]:
        """The messages this turn (or resumed part) has produced so far."""
        return tuple(self._new)

    @property
    def usage(self) -> Usage:
        """Usage of the model calls made so far (by this part, for a resumed turn)."""
        return self._usage

    @property
    def llm_calls(self) -> int:
        """Model calls made so far (by this part, for a resumed turn)."""
        return self._llm_calls

    @property
    def last_usage(self) -> Usage | None:
        """The usage the last model reply reported (``None`` before any, or if none)."""
        return self._last_usage

    @property
    def tools(self) -> tuple[ToolDefinition, ...]:
        """The tool definitions the next model call offers: those offered up front, then
        ``search_tools`` and the deferred tools found so far, when there are deferred tools."""
        search = self._search
        if search is None:
            return self._tools
        return search.offer(self._tools)

    # -- guards -------------------------------------------------------------------------

    def guard_decided(self, record: GuardRecord) -> None:
        """Record a guard's decision (part of the turn's JSON, so a turn run again from its
        record does not run that guard again; the shape is in ``kova.agent._guard_record``).
        A second decision for the same key replaces the first; a trip stays the turn's
        trip."""
        if not isinstance(record, GuardRecord):
            raise TypeError(f"a guard's decision is a GuardRecord, got {type(record).__name__}")
        self._guards[record.key] = record

    def guard_record(self, kind: str, guard: str, call_id: str = "") -> GuardRecord | None:
        """The recorded decision of ``guard`` (on the call ``call_id``), if any."""
        return self._guards.get((kind, guard, call_id))

    def guard_tripped(self) -> GuardRecord | None:
        """The recorded trip that ended the turn, if a guard tripped."""
        for record in self._guards.values():
            if record.verdict == "trip":
                return record
        return None

    @property
    def found_tools(self) -> tuple[str, ...]:
        """The deferred tools the model found with ``search_tools`` in this turn, in order."""
        return () if self._search is None else self._search.found

    def set_tools(
        self,
        tools: Sequence[ToolDefinition],
        *,
        deferred: Sequence[ToolDefinition] | None = None,
        search_limit: int | None = None,
        native_search: bool | None = None,
    ) -> None:
        """Offer these tool definitions from the next model call on (a tool server's list
        changed). A removed tool is no longer offered; a call the model still makes to it is
        answered in-band by whoever runs the tools.

        Args:
            tools: the tools offered up front.
            deferred: the deferred tools (``None``: unchanged). Those already found stay
                offered while they exist.
            search_limit: how many tools one search loads (``None``: unchanged; default 5).
            native_search: the provider searches the deferred tools itself (each request
                carries them as ``ChatRequest.deferred_tools``; ``None``: unchanged).
        """
        if tools is not self._tools:  # the same tuple again (the usual case) was checked
            self._tools = _tool_definitions(tools)
        if search_limit is not None:
            _positive_int("search_limit", search_limit)
        if native_search is not None and not isinstance(native_search, bool):
            raise TypeError(f"native_search must be a bool, got {native_search!r}")
        if deferred is not None:
            self._defer(_tool_definitions(deferred), search_limit)
        elif search_limit is not None and self._search is not None:
            self._search = ToolSearch(
                self._search.deferred,
                limit=search_limit,
                found=self._search.found,
                native=self._search.native,
            )
        if native_search is not None and self._search is not None:
            self._search.native = native_search

    def _defer(self, deferred: tuple[ToolDefinition, ...], search_limit: int | None) -> None:
        search = self._search
        if search is None:
            if deferred:
                self._search = ToolSearch(deferred, limit=search_limit or 5)
        elif search_limit is not None and search_limit != search.limit:
            self._search = ToolSearch(
                deferred, limit=search_limit, found=search.found, native=search.native
            )
        else:
            search.replace(deferred)

    def set_context(
        self,
        context: ContextPolicy | None,
        *,
        model: str | None = None,
        provider: str | None = None,
    ) -> None:
        """Use this context policy from the next model call on (``None``: none).
        ``provider``: the name of the provider the turn calls (``"anthropic"``, ...), for a
        :class:`~kova.agent.ProviderCompaction` in the policy.

        Raises:
            TypeError: not a ContextPolicy.
            BuildError: the policy gives no window and the model is not one kova knows.
        """
        if context is None:
            self._compactor = None
            return
        if not isinstance(context, ContextPolicy):
            raise TypeError(
                f"context must be a kova.agent.ContextPolicy, got {type(context).__name__}"
            )
        config = self._config
        limit = context.limit(model or config.model, config.max_tokens)
        previous = self._compactor
        compactor = Compactor(context, limit, native_compaction(context, provider, limit))
        compactor.count_exactly(provider in _EXACT_COUNTERS)
        if previous is not None:
            compactor.restore(previous.to_dict() | {"limit": limit})
        self._compactor = compactor

    @property
    def compaction(self) -> Compaction | None:
        """What the context policy compacted in this turn, with the compacted history the
        next turn should start from; ``None`` if nothing was."""
        compactor = self._compactor
        if compactor is None or not compactor.compacted:
            return None
        return compactor.compaction(self._working[len(self._prefix) :])

    def compacted(self, response: ModelResponse) -> None:
        """The summarizer's answer to the last :class:`~kova.agent.Compact` step: it
        replaces the older messages it sums up.

        Raises:
            TypeError: ``response`` is not a ModelResponse.
        """
        compactor = self._compactor
        if self._phase != _MODEL or compactor is None or not compactor.pending:
            self._expect(_MODEL, "compacted")
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"response must be a kova.providers.ModelResponse, got {type(response).__name__}"
            )
        assert compactor is not None
        usage = response.usage
        if usage is not None:
            self._usage = self._usage + usage
        self._llm_calls += 1
        working, event = compactor.summarized(
            self._working, len(self._prefix), response.text, self.tools, self._requests
        )
        self._working = working
        self._events.append(event)

    def overflowed(self, error: ContextOverflow) -> None:
        """The provider answered the last :class:`CallModel` with ``error`` (the prompt is
        over its context window). With a context policy the next step compacts and calls
        again, once per model call; without one (or on a second overflow of the same call)
        the turn fails with ``error``, raised here.

        Raises:
            ContextOverflow: ``error``, when the turn cannot compact and retry.
        """
        if self._phase != _MODEL:
            self._expect(_MODEL, "overflowed")
        if not isinstance(error, ContextOverflow):
            raise TypeError(f"error must be a kova.ContextOverflow, got {type(error).__name__}")
        compactor = self._compactor
        if compactor is None or not compactor.overflowed(error, self._requests):
            self._fail(error)
            raise error

    def take_events(self) -> tuple[CoreEvent, ...]:
        """What the core did itself since the last call, for the driver to report (in
        order): a ``search_tools`` call is a :class:`~kova.agent.ToolCallStarted`, a
        :class:`ToolsFound`, a :class:`ToolsAdded` when it loaded tools, and a
        :class:`~kova.agent.ToolCallFinished`. A driver that reports no events may ignore
        it; the list is cleared by each call."""
        events = self._events
        if not events:
            return ()
        self._events = []
        return tuple(events)

    @property
    def limits(self) -> UsageLimits | None:
        """The turn's usage limits."""
        return self._limits

    @property
    def counters(self) -> Counters:
        """What the turn has counted so far (model calls and tool calls, its own and those of
        the agents its tools ran): the record its paused state carries too
        (``PendingApprovals.counters``)."""
        return Counters(
            requests=self._requests,
            tool_calls=self._tool_calls,
            inner_requests=self._inner_requests,
            inner_tool_calls=self._inner_tool_calls,
        )

    def _restore_counters(self, counters: Counters) -> None:
        self._requests = counters.requests
        self._tool_calls = counters.tool_calls
        self._inner_requests = counters.inner_requests
        self._inner_tool_calls = counters.inner_tool_calls

    def limit_figures(self) -> LimitFigures | None:
        """What the usage limits count so far, the turns this turn's tools ran included
        (``None`` without limits): what an inner turn run elsewhere checks them against."""
        limits = self._limits
        if limits is None:
            return None
        return LimitFigures(
            limits=limits,
            requests=self._requests + self._inner_requests,
            tool_calls=self._tool_calls + self._inner_tool_calls,
            usage=self._total,
        )

    def decided_denials(self) -> tuple[tuple[ToolUse, ToolResult], ...]:
        """The calls of the current step a person denied, with the results that answer them
        (for a driver that reports each call: they never reach the tools)."""
        return self._denials

    # -- what next --------------------------------------------------------------------

    def next_step(self) -> Step:
        """What the driver does next (the same answer until a transition is made).

        Raises:
            MaxIterationsError: the model is still calling tools after ``max_iterations``.
            ContextBudgetExceededError: the next prompt is over the context budget.
            UsageLimitExceeded: the next model call or tool step would go over a limit.
            The error a transition raised, again: a turn that failed stays failed.
        """
        phase = self._phase
        try:
            if phase == _MODEL:
                return self._call_model()
            if phase == _TOOLS:
                return self._run_tools()
        except KovaError as exc:
            self._fail(exc)
            raise
        if phase == _FAILED:
            assert self._failed is not None
            raise self._failed
        if phase == _APPROVAL:
            pending = self._pending
            assert pending is not None
            return AwaitApproval(pending=pending, response=self._answer(pending))
        return Finished(response=self._answer(None))

    def _call_model(self) -> CallModel | Compact:
        if self._requests >= self._max_iterations + 1:
            raise MaxIterationsError(self._max_iterations)
        limits = self._limits
        if limits is not None:
            limits.check_request(self._requests + self._inner_requests)
        compactor = self._compactor
        if compactor is not None:
            fitted = compactor.fit(
                self._working, len(self._prefix), self.tools, self._config, self._requests
            )
            if fitted is not None:  # compacted (or a summary is needed first)
                self._working = list(fitted.messages)
                if fitted.event is not None:
                    self._events.append(fitted.event)
                if fitted.compact is not None:
                    return fitted.compact
        search = self._search
        working = self._working
        tools = self._tools if search is None else search.offer(self._tools)
        budget = self._budget
        if budget is not None:
            estimate = heuristic_count_tokens(working, tools)
            if estimate > budget:
                raise ContextBudgetExceededError(estimate, budget)
        request = ChatRequest(
            messages=working,
            tools=tools,
            config=self._config,
            compaction=None if compactor is None else compactor.native,
            deferred_tools=search.deferred if search is not None and search.native else (),
        )
        if limits is not None and limits.counts_tokens_first and not self._counted:
            return CallModel(request=request, count_tokens=True)
        if compactor is not None and compactor.wants_count(self._requests):
            return CallModel(request=request, count_tokens=True)  # near the window
        return CallModel(request=request)

    def _run_tools(self) -> RunTools:
        if self._requests >= self._max_iterations + 1:
            # The results could never reach the model: nothing runs.
            raise MaxIterationsError(self._max_iterations)
        if self._limits is not None:
            self._limits.check_tool_calls(self._tool_calls + self._inner_tool_calls)
        resumes = self._resumes
        return RunTools(
            calls=self._running,
            approved=self._approved,
            turn_id=self._turn_id,
            resumes=MappingProxyType(dict(resumes)) if resumes else MappingProxyType({}),
        )

    def _answer(self, pending: PendingApprovals | None) -> AgentResponse:
        response = self._response
        if response is None or response.pending is not pending:
            usage = self._usage
            by_agent = {self._agent: usage}
            for agent, used in self._inner.items():
                usage = usage + used
                by_agent[agent] = by_agent[agent] + used if agent in by_agent else used
            response = self._response = AgentResponse(
                text="" if self._last_reply is None else self._last_reply.text,
                new_messages=tuple(self._new),
                stop_reason=self._last_stop,
                usage=usage,
                llm_calls=self._llm_calls,
                thinking="\n\n".join(self._thinking) or None if self._thinking else None,
                pending=pending,
                usage_by_agent=MappingProxyType(by_agent),
                compaction=None if self._compactor is None else self.compaction,
            )
        return response

    # -- agents run by this turn's tools (agent.as_tool) ------------------------------

    def inner_request(self) -> None:
        """A turn this turn's tools run (at any depth) is about to call its model: it counts
        against this turn's ``requests`` limit.

        Raises:
            UsageLimitExceeded: the call would take this turn over ``requests`` (the turn
                fails: its driver raises it when the step ends).
            The error this turn failed with, if it failed.
        """
        self._inner_check()
        if self._limits is not None:
            try:
                self._limits.check_request(self._requests + self._inner_requests)
            except KovaError as exc:
                self._fail(exc)
                raise
        self._inner_requests += 1

    def inner_replied(self, agent: str, usage: Usage | None) -> None:
        """That inner call's reply, made by ``agent``: its usage is this turn's too.

        Raises:
            UsageLimitExceeded: this turn's tokens are now over a token limit (it fails).
        """
        if usage is None:
            return
        inner = self._inner
        inner[agent] = inner[agent] + usage if agent in inner else usage
        self._response = None
        if self._limits is not None:
            try:
                self._limits.check_tokens(self._total)
            except KovaError as exc:
                self._fail(exc)
                raise

    def inner_tools(self, count: int) -> None:
        """An inner turn starts a step of ``count`` tool calls (``tool_calls`` limit)."""
        self._inner_check()
        if self._limits is not None:
            try:
                self._limits.check_tool_calls(self._tool_calls + self._inner_tool_calls + count)
            except KovaError as exc:
                self._fail(exc)
                raise
        self._inner_tool_calls += count

    def inner_paused(self, call_id: str, pause: InnerPause) -> None:
        """The inner turn run by call ``call_id`` of the current step paused for approvals
        (its outcome in :meth:`tools_finished` is ``DEFER``): this turn pauses with it."""
        if self._phase != _TOOLS:
            self._expect(_TOOLS, "inner_paused")
        if call_id not in {call.id for call in self._running}:
            raise ValueError(f"call {call_id!r} is not running in this step")
        self._paused_inner[call_id] = pause

    def _inner_check(self) -> None:
        if self._phase == _FAILED:
            assert self._failed is not None
            raise self._failed

    # -- transitions ------------------------------------------------------------------

    def _fail(self, exc: KovaError) -> None:
        self._failed = exc
        self._phase = _FAILED

    @property
    def _total(self) -> Usage:
        """The whole turn's usage (limits count this)."""
        base = self._base
        usage = self._usage if base is None else base + self._usage
        for used in self._inner.values():
            usage = usage + used
        return usage

    def _expect(self, phase: str, transition: str) -> None:
        if self._phase == _FAILED:
            assert self._failed is not None
            raise self._failed
        if self._phase != phase:
            waiting = {
                _MODEL: "a model reply (model_replied)",
                _TOOLS: "tool results (tools_finished)",
                _APPROVAL: "decisions (decided)",
                _DONE: "nothing: it is finished",
            }[self._phase]
            raise AgentLoopError(f"{transition}() does not fit: the turn is waiting for {waiting}")

    def tokens_counted(self, tokens: int) -> None:
        """The input tokens of the request a :class:`CallModel` asked to count.

        Raises:
            UsageLimitExceeded: sending it would take the turn over ``input_tokens``.
        """
        if self._phase != _MODEL:
            self._expect(_MODEL, "tokens_counted")
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise TypeError(f"tokens must be an int, got {type(tokens).__name__}")
        if self._limits is not None:
            try:
                self._limits.check_counted(self._total, tokens)
            except KovaError as exc:
                self._fail(exc)
                raise
        self._counted = True
        if self._compactor is not None:  # over the window by the provider's count: compact
            self._compactor.counted(tokens, self._requests)

    def model_replied(self, response: ModelResponse) -> None:
        """The model's answer to the last :class:`CallModel`.

        Raises:
            UsageLimitExceeded: the turn's tokens are now over a token limit.
        """
        if self._phase != _MODEL:
            self._expect(_MODEL, "model_replied")
        if not isinstance(response, ModelResponse):
            raise TypeError(
                f"response must be a kova.providers.ModelResponse, got {type(response).__name__}"
            )
        calls = response.tool_uses
        if calls:
            # Ids unique within the turn, whatever the provider sent (see _call_ids).
            if self._call_ids is None:
                self._call_ids = call_ids_of(self._working)
            response, calls = unique_call_ids(response, calls, self._call_ids)
        self._requests += 1
        self._llm_calls += 1
        self._counted = False
        self._denials = ()
        usage = response.usage
        if usage is not None:
            # Nothing plus usage is usage: the turn's first reply adds no sum.
            self._usage = usage if self._usage is _NO_USAGE else self._usage + usage
            self._last_usage = usage
            if self._compactor is not None:
                self._compactor.observed(usage.input_tokens)
        if response.thinking:
            self._thinking.append(response.thinking)
        self._last_reply = response
        stop = self._last_stop = response.stop_reason
        assistant = Message(role=Role.ASSISTANT, content=response.content)
        self._working.append(assistant)
        self._new.append(assistant)
        compactor = self._compactor
        if compactor is not None and compactor.native is not None:
            # The provider compacted on its side: what its summary replaces goes here too.
            event = compactor.provider_compacted(self._working, len(self._prefix), self.tools)
            if event is not None:
                self._events.append(event)
        if self._limits is not None and usage is not None:
            try:
                self._limits.check_tokens(self._total)
            except KovaError as exc:
                self._fail(exc)
                raise
        if not calls:
            self._phase = _DONE
        elif stop.kind in _TRUNCATED:
            # Calls cut off mid-way never run; each is answered, so the history the turn
            # returns is valid to send back.
            self._append_results(tuple(_not_run(call, stop) for call in calls))
            self._phase = _DONE
        else:
            # Tool use, or complete calls under a stop reason kova does not know.
            self._calls = self._running = calls
            self._results = {}
            self._tool_calls += len(calls)
            always = self._always
            self._approved = (
                frozenset(call.id for call in calls if call.name in always) if always else _NO_NAMES
            )
            self._phase = _TOOLS
            if self._search is not None:
                self._answer_searches()

    def _answer_searches(self) -> None:
        """Answer this step's ``search_tools`` calls here (the search is pure); the other
        calls run as usual. Found tools are offered from the next model call on."""
        search = self._search
        assert search is not None
        running = []
        for call in self._calls:
            if call.name != SEARCH_TOOLS:
                running.append(call)
                continue
            result, found = search.answer(call)
            self._results[call.id] = result
            self._events.append(ToolCallStarted(call=call))
            if found is not None:
                self._events.append(found)
                if found.names:
                    self._events.append(ToolsAdded(names=found.names))
            self._events.append(ToolCallFinished(call=call, result=result))
        if len(running) != len(self._calls):
            self._running = tuple(running)
            if not running:
                self._end_step()

    def tools_finished(self, results: Sequence[DeferredResult]) -> None:
        """The outcomes of the last :class:`RunTools`, one per call in its order: a
        :class:`~kova.ToolResult` (its ``tool_use_id`` is set when empty), or
        :data:`~kova.agent.DEFER` for a call left to a person.

        Raises:
            TypeError: an item is neither.
            ValueError: the count differs from the calls', or a result answers another call.
        """
        if self._phase != _TOOLS:
            self._expect(_TOOLS, "tools_finished")
        running = self._running
        if not _sequence(results) or len(results) != len(running):
            count = len(results) if _sequence(results) else type(results).__name__
            raise ValueError(f"tools_finished() needs {len(running)} results, got {count}")
        deferred: list[ToolUse] = []
        stored = self._results
        for call, result in zip(running, results, strict=True):
            if result is DEFER:
                deferred.append(call)
                continue
            if not isinstance(result, ToolResult):
                raise TypeError(
                    f"the result for call {call.id!r} must be a ToolResult or DEFER, "
                    f"got {type(result).__name__}"
                )
            if not result.tool_use_id:
                result = evolve(result, tool_use_id=call.id)
            elif result.tool_use_id != call.id:
                raise ValueError(
                    f"the result for call {call.id!r} answers {result.tool_use_id!r}: results "
                    "go in the order of RunTools.calls"
                )
            stored[call.id] = result
        if deferred:
            self._pause(deferred)
        elif len(stored) == len(self._calls):
            self._end_step()
        else:
            # Unreachable while call ids are unique in the turn (model_replied makes them
            # so); a turn restored from a document that repeats one fails clearly.
            missing = ", ".join(repr(call.id) for call in self._calls if call.id not in stored)
            raise AgentLoopError(f"the tool step's calls {missing} have no result")

    def _pause(self, deferred: list[ToolUse]) -> None:
        annotations: dict[str, ToolAnnotations | None] = {
            tool.name: tool.annotations for tool in self.tools
        }
        results = self._results
        paused, self._paused_inner = self._paused_inner, {}
        self._resumes = {}
        waiting: list[PendingCall] = []
        inner: dict[str, InnerPause] = {}
        for call in deferred:
            pause = paused.get(call.id)
            if pause is None:
                waiting.append(PendingCall.of(call, annotations.get(call.name)))
            else:  # an inner agent's pause: its calls wait here, under this call's id
                inner[call.id] = pause
                waiting.extend(
                    evolve(item, path=(call.id, *item.path)) for item in pause.pending.calls
                )
        self._pending = PendingApprovals(
            turn_id=self._turn_id,
            calls=tuple(waiting),
            inner=MappingProxyType(inner),
            decisions={},
            message=message_fingerprint(self._working[-1]),
            results=tuple(results[call.id] for call in self._calls if call.id in results),
            usage=self._total,
            counters=self.counters,
            always=tuple(sorted(self._always)),
            limits=self._limits,
        )
        self._phase = _APPROVAL

    def decided(self, pending: PendingApprovals) -> None:
        """Go on with these decisions (the :class:`AwaitApproval`'s ``pending`` with every
        call approved or denied). Approved calls run next; denied ones are answered in-band.

        Raises:
            TypeError: ``pending`` is not a PendingApprovals.
            ApprovalMismatchError: the decisions are for other calls, one is for an unknown
                call, a call's fingerprint differs, or a call has none.
        """
        if self._phase != _APPROVAL:
            self._expect(_APPROVAL, "decided")
        if not isinstance(pending, PendingApprovals):
            raise TypeError(
                f"pending must be a kova.agent.PendingApprovals, got {type(pending).__name__}"
            )
        own = self._pending
        assert own is not None
        if not same_pause(pending, own):
            raise ApprovalMismatchError(
                "these decisions are for other pending calls than the ones this turn waits for"
            )
        pending.check()
        approved: set[str] = set()
        denied: set[str] = set()
        for item in own.calls:
            if item.path:
                continue  # an inner agent's call: decided in its own turn, resumed below
            decision = pending.decision(item)
            assert decision is not None  # check() made sure
            if decision.approved:
                approved.add(item.id)
                if decision.always:
                    self._always = self._always | {item.name}
            else:
                denied.add(item.id)
                self._results[item.id] = _denied(item.id, decision.reason)
        self._denials = tuple(
            (call, self._results[call.id]) for call in self._calls if call.id in denied
        )
        # A call whose inner turn paused runs again: it continues that turn with its
        # decisions (nothing asks for its approval twice).
        self._resumes = dict(pending.inner)
        approved.update(pending.inner)
        self._pending = None
        self._running = tuple(call for call in self._calls if call.id in approved)
        self._approved = frozenset(approved)
        if self._running:
            self._phase = _TOOLS
        else:
            self._end_step()

    def _end_step(self) -> None:
        """Every call of the step is answered: the tool message, in call order; then the
        model."""
        results = self._results
        self._append_results(tuple([results[call.id] for call in self._calls]))
        self._calls = self._running = ()
        self._results = {}
        self._approved = _NO_NAMES
        self._resumes = {}
        self._paused_inner = {}
        self._phase = _MODEL

    def _append_results(self, results: tuple[ToolResult, ...]) -> None:
        message = Message(role=Role.TOOL, content=results)  # each answers its call by id
        self._working.append(message)
        self._new.append(message)

    # -- JSON -------------------------------------------------------------------------

    def _working_json(self) -> JSONValue:
        """What the model is sent after the system prompt, once compaction changed it (a
        summary, cleared results, a slid window); ``None`` while it is the history plus the
        new messages."""
        compactor = self._compactor
        if compactor is None or not compactor.compacted:
            return None
        return [message.to_dict() for message in self._working[len(self._prefix) :]]

    def to_dict(self) -> dict[str, JSONValue]:
        """The whole turn as plain JSON (a dict); :meth:`from_dict` restores an equal turn."""
        pending = self._pending
        return {
            "kova": "turn",
            "version": TURN_FORMAT,
            "turn_id": self._turn_id,
            "agent": self._agent,
            "system_prompt": self._system_prompt,
            "history": [message.to_dict() for message in self._history],
            "new_messages": [message.to_dict() for message in self._new],
            "tools": [tool_to_json(tool) for tool in self._tools],
            "context": None if self._compactor is None else self._compactor.to_dict(),
            "working": self._working_json(),
            "deferred": None
            if self._search is None
            else {
                "tools": [tool_to_json(tool) for tool in self._search.deferred],
                "found": list(self._search.found),
                "limit": self._search.limit,
                "native": self._search.native,
            },
            "config": config_to_json(self._config),
            "limits": None if self._limits is None else limits_to_json(self._limits),
            "max_iterations": self._max_iterations,
            "context_budget": self._budget,
            "usage": usage_to_json(self._usage),
            "llm_calls": self._llm_calls,
            "thinking": list(self._thinking),
            "base_usage": None if self._base is None else usage_to_json(self._base),
            "counters": counters_to_json(self.counters),
            "inner": {agent: usage_to_json(usage) for agent, usage in self._inner.items()},
            "always": sorted(self._always),
            "last_usage": None if self._last_usage is None else usage_to_json(self._last_usage),
            "last_text": None if self._last_reply is None else self._last_reply.text,
            "last_stop": {"kind": self._last_stop.kind.value, "raw": self._last_stop.raw},
            "phase": self._phase,
            "counted": self._counted,
            "calls": [call.id for call in self._calls],
            "results": [result_to_json(result) for result in self._results.values()],
            "running": [call.id for call in self._running],
            "approved": sorted(self._approved),
            "denials": [
                {"call": block_to_dict(call), "result": result_to_json(result)}
                for call, result in self._denials
            ],
            "pending": None if pending is None else pending.to_dict(),
            "resumes": {key: pause.to_dict() for key, pause in self._resumes.items()},
            "paused_inner": {key: pause.to_dict() for key, pause in self._paused_inner.items()},
            "failed": None if self._failed is None else str(self._failed),
            "guards": [record.to_dict() for record in self._guards.values()],
        }

    def to_json(self) -> str:
        """The whole turn as JSON text (versioned); :meth:`from_json` reads it back."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Turn:
        """Restore a turn from :meth:`to_dict` output.

        Raises:
            SerializationError: not a stored turn, or one saved in another format version
                (refused, never misread).
        """
        document = load_document(data, "turn", TURN_FORMAT, "turn")
        if document.get("failed") is not None:
            raise SerializationError("this turn had failed when it was saved; it cannot go on")
        system_prompt = document.get("system_prompt")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise SerializationError("stored field 'system_prompt' must be a string or null")
        limits = document.get("limits")
        budget = document.get("context_budget")
        if budget is not None:
            budget = field(document, "context_budget", int)
        turn = cls(
            tuple(messages_from_json(document.get("history"), "history")),
            tools=tuple(tool_from_json(item) for item in field(document, "tools", list)),
            config=config_from_json(document.get("config")),
            system_prompt=system_prompt,
            limits=None if limits is None else limits_from_json(limits),
            max_iterations=field(document, "max_iterations", int),
            context_budget=budget,
            turn_id=field(document, "turn_id", str),
            agent=field(document, "agent", str) if "agent" in document else "",
        )
        context = document.get("context")
        if context is not None:
            if not isinstance(context, Mapping):
                raise SerializationError("stored 'context' must be a JSON object or null")
            # The policy comes from the agent (Turn.set_context); the state is the turn's.
            compactor = Compactor(ContextPolicy(), field(context, "limit", int))
            compactor.restore(context)
            turn._compactor = compactor
        deferred = document.get("deferred")
        if deferred is not None:
            if not isinstance(deferred, Mapping):
                raise SerializationError("stored 'deferred' must be a JSON object or null")
            found = field(deferred, "found", list)
            if not all(isinstance(name, str) for name in found):
                raise SerializationError("stored 'deferred.found' must hold tool names")
            limit = field(deferred, "limit", int)
            if limit < 1:
                raise SerializationError("stored 'deferred.limit' must be a positive integer")
            native = deferred.get("native", False)
            if not isinstance(native, bool):
                raise SerializationError("stored 'deferred.native' must be a boolean")
            turn._search = ToolSearch(
                [tool_from_json(item) for item in field(deferred, "tools", list)],
                limit=limit,
                found=found,
                native=native,
            )
        new = messages_from_json(document.get("new_messages"), "new_messages")
        turn._new = new
        working = document.get("working")
        if working is None:
            turn._working.extend(new)
        else:  # compacted: what the next request starts from, as it was
            turn._working[len(turn._prefix) :] = messages_from_json(working, "working")
        turn._usage = usage_from_json(document.get("usage"))
        turn._llm_calls = count(document, "llm_calls")
        thinking = field(document, "thinking", list)
        always = field(document, "always", list)
        if not all(isinstance(item, str) for item in [*thinking, *always]):
            raise SerializationError("stored 'thinking' and 'always' must hold strings")
        turn._thinking = thinking
        turn._always = frozenset(always)
        base = document.get("base_usage")
        turn._base = None if base is None else usage_from_json(base)
        turn._restore_counters(counters_from_json(document.get("counters")))
        # Turns stored before agents could be tools have none of these.
        inner = field(document, "inner", dict) if "inner" in document else {}
        turn._inner = {agent: usage_from_json(usage) for agent, usage in inner.items()}
        last_usage = document.get("last_usage")
        turn._last_usage = None if last_usage is None else usage_from_json(last_usage)
        last_text = document.get("last_text")
        if last_text is not None:
            turn._last_reply = Message.assistant(field(document, "last_text", str))
        turn._last_stop = stop_from_json(document.get("last_stop"))
        phase = field(document, "phase", str)
        if phase not in (_MODEL, _TOOLS, _APPROVAL, _DONE):  # a failed turn was refused above
            raise SerializationError(f"unknown stored turn phase {phase!r}")
        turn._phase = phase
        turn._counted = field(document, "counted", bool)
        turn._restore_step(document, phase)
        # Turns stored before guards were recorded have none.
        guards = field(document, "guards", list) if "guards" in document else []
        for item in guards:
            record = GuardRecord.from_dict(item)
            turn._guards[record.key] = record
        if (phase == _APPROVAL) != (turn._pending is not None):
            raise SerializationError(
                "a stored turn waits for decisions exactly when it has pending calls"
            )
        return turn

    def _restore_step(self, document: Mapping[str, Any], phase: str) -> None:
        """The stored step's state (:meth:`from_dict`): its calls, results, decisions and
        inner turns."""
        last = self._working[-1] if self._working else None
        step_calls = {call.id: call for call in last.tool_uses} if last is not None else {}
        if phase in (_TOOLS, _APPROVAL) and (last is None or last.role is not Role.ASSISTANT):
            raise SerializationError("a stored turn in a tool step must end with its calls")

        def calls(key: str) -> tuple[ToolUse, ...]:
            ids = field(document, key, list)
            if not all(isinstance(item, str) and item in step_calls for item in ids):
                raise SerializationError(f"stored {key!r} names calls the step did not make")
            return tuple(step_calls[item] for item in ids)

        self._calls = calls("calls")
        self._running = calls("running")
        approved = field(document, "approved", list)
        self._approved = frozenset(item for item in approved if isinstance(item, str))
        denials = []
        for item in field(document, "denials", list):
            if not isinstance(item, Mapping):
                raise SerializationError("a stored denial must be a JSON object")
            call = block_from_dict(item.get("call"))
            if not isinstance(call, ToolUse):
                raise SerializationError("a stored denial's call must be a tool_use")
            denials.append((call, result_from_json(item.get("result"))))
        self._denials = tuple(denials)
        results = (result_from_json(item) for item in field(document, "results", list))
        self._results = {result.tool_use_id: result for result in results}
        pending = document.get("pending")
        if pending is not None:
            if not isinstance(pending, Mapping):
                raise SerializationError("stored 'pending' must be a JSON object")
            self._pending = PendingApprovals.from_dict(pending)
        for key, attribute in (("resumes", "_resumes"), ("paused_inner", "_paused_inner")):
            stored = field(document, key, dict) if key in document else {}
            setattr(
                self, attribute, {call: InnerPause.from_dict(item) for call, item in stored.items()}
            )

    @classmethod
    def from_json(cls, data: str | bytes) -> Turn:
        """Restore a turn from :meth:`to_json` output.

        Raises:
            TypeError: ``data`` is not text.
            SerializationError: not JSON, not a stored turn, or one saved in another format
                version (refused with both versions named).
        """
        if not isinstance(data, str | bytes | bytearray):
            raise TypeError(f"Turn.from_json takes JSON text, not {type(data).__name__}")
        parsed = read_document(data, "stored turn")
        if not isinstance(parsed, Mapping):
            raise SerializationError("a stored turn must be a JSON object")
        return cls.from_dict(parsed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Turn):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<Turn {self._turn_id} {self._phase}: {len(self._new)} new messages, "
            f"{self._requests} model calls>"
        )
