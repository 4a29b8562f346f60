"""A journaled turn: the agent's own driver, recording each step before it moves on.

``agent.run(history, journal=journal, turn_id="...")`` runs the same driver as every other
turn (``kova.agent._loop.drive`` over the turn core), with a :class:`Journaled` observing
its steps, which records, in the turn's :class:`~kova.durable.SqliteJournal` claim:

- the turn core's JSON after every transition (a model's reply, a tool step's results);
- each tool call as it is handed to the tool pool, and its result as it finishes.

Run again with the same ``turn_id`` (after a crash, a deploy, in another process), the turn
goes on from its last snapshot: a model call whose reply was recorded is not sent again; a
tool call whose result was recorded is not run again; a call that was handed to the pool but
never recorded as finished is run again only if its tool is annotated read-only or
idempotent, and otherwise answered in-band with an error saying it may or may not have taken
effect. A finished turn returns its recorded response again. Only one runner holds a turn at
a time (the journal's claim): a second one gets :class:`~kova.durable.TurnClaimedError`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import trio

from .._errors import ApprovalMismatchError, KovaError
from .._json import dumps, escape_surrogates, loads
from .._messages import block_from_dict, block_to_dict
from .._models import Message, ToolResult
from ..agent._approvals import same_pause
from ..agent._events import ToolCallDeferred, ToolCallFinished
from ..agent._steps import StepObserver
from ..agent._turn import AwaitApproval, Turn
from ._errors import JournalError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence
    from contextlib import AbstractAsyncContextManager
    from typing import Any

    from .._models import InferenceConfig, ToolUse
    from ..agent._approvals import PendingApprovals
    from ..agent._driver_context import DriverContext
    from ..agent._limits import UsageLimits
    from ..agent._turn import RunTools

__all__ = [
    "Journaled",
    "may_run_again",
    "not_known_to_have_run",
    "open_journaled_turn",
    "same_history",
]


# What a journaled turn needs of the journal (``_journal`` imports this module, not the
# reverse): a SqliteJournal or PostgresJournal, its JournalClaim and JournalRecord.


class _Record(Protocol):
    @property
    def snapshot(self) -> str | None: ...
    @property
    def results(self) -> Mapping[str, str]: ...
    @property
    def unfinished(self) -> frozenset[str]: ...


class _Claim(Protocol):
    async def __aenter__(self) -> _Claim: ...
    async def __aexit__(self, *exc_info: object) -> None: ...
    def kept_alive(self) -> AbstractAsyncContextManager[None]: ...
    async def use_decisions(self, nonce: str) -> None: ...
    async def save_snapshot(self, snapshot: str) -> None: ...
    async def tool_started(self, *call_ids: str) -> None: ...
    async def tool_finished(self, call_id: str, result: str) -> None: ...
    async def tool_deferred(self, call_id: str) -> None: ...


class _Journal(Protocol):
    @property
    def rerun_interrupted(self) -> Mapping[str, bool]: ...
    async def claim(self, turn_id: str) -> _Claim: ...
    async def load(self, turn_id: str) -> _Record | None: ...


_NOT_ANNOTATED = "the tool is not annotated read-only or idempotent"
_HOST_SAID = "the journal's rerun_interrupted says its calls may not run again"


def not_known_to_have_run(call: ToolUse, why: str = _NOT_ANNOTATED) -> ToolResult:
    """The in-band answer for a call that was started before a crash and may not run again."""
    return ToolResult.error(
        f"the call to {call.name!r} was interrupted (the process running this turn stopped) "
        f"and may or may not have taken effect; it was not run again because {why}. Check "
        "its effect before calling it again.",
        tool_use_id=call.id,
    )


class Journaled(StepObserver):
    """What a journaled run records, and what it found recorded (one turn, one claim): an
    observer of the turn's steps."""

    __slots__ = ("_claim", "_lock", "_rerun", "_results", "_unfinished")

    def __init__(self, claim: _Claim, record: _Record | None, rerun: Mapping[str, bool]) -> None:
        self._claim = claim
        self._rerun = rerun
        """The journal's ``rerun_interrupted``."""
        # A guard beside the model call saves the turn when it decides, from its own task:
        # one save at a time, each of the turn as it is when its turn comes (never an older
        # snapshot over a newer one).
        self._lock = trio.Lock()
        self._results: dict[str, str] = dict(record.results) if record is not None else {}
        self._unfinished: frozenset[str] = record.unfinished if record is not None else frozenset()

    async def saved(self, turn: Turn) -> None:
        """Record the turn core after a transition."""
        async with self._lock:
            # A lone surrogate (a caller's, or half an emoji a model streamed) goes in as its
            # JSON escape: SQLite stores UTF-8, and the escape reads back as the same text.
            await self._claim.save_snapshot(escape_surrogates(turn.to_json()))

    def answered(
        self, step: RunTools, turn: Turn
    ) -> tuple[dict[str, ToolResult], tuple[ToolUse, ...]]:
        """The step's calls already answered (recorded results, interrupted calls that may
        not run again), and the calls to run now, in the step's order."""
        annotations = {tool.name: tool.annotations for tool in turn.tools}
        rerun = self._rerun
        answered: dict[str, ToolResult] = {}
        to_run: list[ToolUse] = []
        for call in step.calls:
            recorded = self._results.get(_key(call.id))
            if recorded is not None:
                answered[call.id] = _result_from_json(recorded)
                continue
            if _key(call.id) in self._unfinished:
                # The host's word for this tool, else its annotations.
                said = rerun.get(call.name)
                if said is False:
                    answered[call.id] = not_known_to_have_run(call, _HOST_SAID)
                    continue
                if said is None and not may_run_again(annotations.get(call.name)):
                    answered[call.id] = not_known_to_have_run(call)
                    continue
            to_run.append(call)
        return answered, tuple(to_run)

    async def started(self, calls: Sequence[ToolUse]) -> None:
        """Record that ``calls`` are handed to the tool pool (before they run)."""
        if calls:
            await self._claim.tool_started(*(_key(call.id) for call in calls))

    async def finished(self, event: ToolCallFinished | ToolCallDeferred) -> None:
        """Record what the tool pool reports of a call: its result as it finishes, or that it
        was left to a person (it did not run: no longer started)."""
        if isinstance(event, ToolCallFinished):
            text = dumps(block_to_dict(event.result))
            key = _key(event.call.id)
            self._results[key] = text
            await self._claim.tool_finished(key, text)
        elif isinstance(event, ToolCallDeferred):
            await self._claim.tool_deferred(_key(event.call.id))


def _key(call_id: str) -> str:
    """A call id as the journal stores it: as it is, or, for an id UTF-8 cannot hold (a lone
    surrogate, half an emoji a model streamed), its JSON literal with the surrogate escaped
    (quoted, so it reads back as the same key and never as a plain id's)."""
    try:
        call_id.encode("utf-8")
    except UnicodeEncodeError:
        return dumps(call_id)
    return call_id


def may_run_again(annotations: object) -> bool:
    """Whether a call interrupted before it finished may run again: its tool's annotations
    say it is read-only or idempotent."""
    return bool(
        annotations is not None
        and (getattr(annotations, "read_only", None) or getattr(annotations, "idempotent", None))
    )


def _result_from_json(text: str) -> ToolResult:
    try:
        block = block_from_dict(loads(text))
    except (KovaError, ValueError, TypeError) as exc:
        raise JournalError(f"a recorded tool result cannot be read: {exc}") from None
    if not isinstance(block, ToolResult):
        raise JournalError(f"a recorded tool result is a {type(block).__name__}")
    return block


def same_history(turn: Turn, history: Sequence[Message]) -> bool:
    """Whether a recorded turn began from ``history`` (a turn id names one turn)."""
    recorded: Mapping[str, object] = turn.to_dict()
    return recorded.get("history") == [message.to_dict() for message in history]


def _waiting_for(turn: Turn) -> PendingApprovals | None:
    """The calls ``turn`` waits for decisions on (``None``: it does not wait)."""
    if turn.to_dict()["pending"] is None:
        return None
    step = turn.next_step()  # a paused turn answers without checking (or failing) anything
    assert isinstance(step, AwaitApproval)
    return step.pending


def _paused_at(turn: Turn, history: Sequence[Message]) -> bool:
    """Whether ``turn`` waits for decisions and ``history`` is its history plus what it
    produced (what a caller passes to resume it)."""
    if _waiting_for(turn) is None:
        return False
    recorded: Mapping[str, Any] = turn.to_dict()
    produced = [*recorded["history"], *recorded["new_messages"]]
    return produced == [message.to_dict() for message in history]


@asynccontextmanager
async def open_journaled_turn(
    context: DriverContext,
    journal: _Journal,
    history: tuple[Message, ...],
    overrides: InferenceConfig | None,
    limits: UsageLimits | None,
    turn_id: object,
    pending: PendingApprovals | None = None,
) -> AsyncIterator[tuple[Turn, Journaled]]:
    """The turn named ``turn_id`` in ``journal``, claimed for this runner while the block
    runs: a new one recorded from ``history``, or the one recorded, to continue.

    With ``pending`` (``agent.resume``): the journal's paused turn goes on with these
    decisions, recorded as the resumed part (a turn whose history is ``history``, the paused
    turn's plus what it produced, exactly as a resume without a journal), so that running
    again after a crash continues that part; a turn the journal does not hold is resumed and
    recorded from here on."""
    if not isinstance(turn_id, str) or not turn_id:
        raise TypeError("a journaled turn needs turn_id=, a non-empty str naming it")
    async with await journal.claim(turn_id) as claim, claim.kept_alive():
        if pending is not None:
            # Decisions are used once across processes: their nonce is this turn's now.
            await claim.use_decisions(pending.nonce)
        record = await journal.load(turn_id)
        journaled = Journaled(claim, record, journal.rerun_interrupted)
        recorded = None
        if record is not None and record.snapshot is not None:
            recorded = Turn.from_json(record.snapshot)
        if recorded is not None and same_history(recorded, history):
            # The turn, or the resumed part, recorded: it goes on from its last snapshot (or
            # answers again). The decisions it was resumed with stand.
            if pending is not None and _waiting_for(recorded) is not None:
                raise ApprovalMismatchError(
                    "the history does not end with the assistant message the pending calls "
                    "came from: pass the paused turn's history plus its response.new_messages"
                )
            turn = recorded
            # The context policy is the agent's (the turn recorded only what it did).
            context.use_context(turn, None, overrides)
        elif pending is not None and (recorded is None or _paused_at(recorded, history)):
            if recorded is not None:
                waiting = _waiting_for(recorded)
                assert waiting is not None
                if not same_pause(waiting, pending):
                    raise ApprovalMismatchError(
                        "these decisions are for other pending calls than the ones the "
                        "journaled turn waits for"
                    )
            turn = context.resume_turn(history, pending, overrides, limits=limits)
            await journaled.saved(turn)
        elif recorded is None:
            turn = context.start_turn(history, overrides, limits, turn_id)
            await journaled.saved(turn)
        else:
            raise JournalError(
                f"turn {turn_id!r} in the journal began from another history; a turn id names "
                "one turn (a resumed turn: pass the history given to resume)"
                if pending is None
                else f"turn {turn_id!r} in the journal is not paused at this history: resume "
                "it with the paused turn's history plus its response.new_messages"
            )
        yield turn, journaled
