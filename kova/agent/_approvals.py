"""Deferred approvals: :data:`DEFER`, and :class:`PendingApprovals`, the part of a turn that
waits for a person.

An approval handler that returns :data:`DEFER` (or a call picked by
``AgentBuilder.defer_approvals``) does not block the turn: the step's other calls run, then
the turn ends with ``response.pending``. That value is plain data: the calls waiting (id,
name, arguments, annotations, a fingerprint of name and arguments), the results of the calls
that already ran, and what the turn had counted so far (usage, model calls, tool calls, the
tools approved for the rest of the turn, its usage limits). It goes to JSON and back
(:meth:`PendingApprovals.to_json`), so the decision can come from another process, tomorrow.

Decisions make new values (:meth:`~PendingApprovals.approve`, :meth:`~PendingApprovals.deny`);
``agent.resume(history, pending)`` (or :meth:`kova.agent.Turn.resume` for another driver)
checks everything before anything runs and fails closed with
:class:`~kova.errors.ApprovalMismatchError`.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from .._errors import ApprovalMismatchError, SerializationError
from .._json import depth_exceeds, loads
from .._record import Record, evolve
from .._requests import ToolAnnotations
from ._counters import Counters, counters_from_json, counters_to_json
from ._seal import KEYED, approval_keys, seal, unsigned_message, verify
from ._state_json import (
    annotations_from_json,
    annotations_to_json,
    field,
    limits_from_json,
    limits_to_json,
    load_document,
    messages_from_json,
    result_from_json,
    result_to_json,
    usage_from_json,
    usage_to_json,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

    from .._messages import JSONObject, JSONValue, Message, ToolResult, ToolUse
    from .._responses import Usage
    from .._secret import Secret
    from ._limits import UsageLimits

__all__ = [
    "DEFER",
    "ApprovalDecision",
    "InnerPause",
    "Deferred",
    "PendingApprovals",
    "PendingCall",
    "call_fingerprint",
    "check_counters",
    "message_fingerprint",
    "pending_document",
    "read_document",
    "same_pause",
]

PENDING_FORMAT: Final = 3
"""The version of :meth:`PendingApprovals.to_json`'s document (2: signed, with a nonce; 3:
the counters as one record, as the turn's document writes them)."""

MAX_DOCUMENT_DEPTH: Final = 512
"""The deepest nesting a stored pending value or turn may have (a tool's arguments may be
128 deep, inside messages, inside inner agents' turns): deeper is a SerializationError."""


class Deferred(enum.Enum):
    """The type of :data:`DEFER` (its only value)."""

    DEFER = "defer"

    def __repr__(self) -> str:
        return "kova.agent.DEFER"


DEFER: Final = Deferred.DEFER
"""What an approval handler returns to leave a call to a later decision: the turn runs the
step's other calls, then ends with ``response.pending`` (a :class:`PendingApprovals`)."""

DeferredResult: TypeAlias = "ToolResult | Literal[Deferred.DEFER]"
"""One call's outcome in a tool step: its result, or :data:`DEFER`."""


def _canonical(value: JSONValue) -> bytes:
    # A model's text (a call id, an argument) may hold lone surrogates, which UTF-8 refuses:
    # "surrogatepass" writes them as bytes no valid text produces, so every other value keeps
    # its fingerprint and distinct values keep distinct ones.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True
    ).encode("utf-8", "surrogatepass")


def call_fingerprint(name: str, arguments: JSONObject) -> str:
    """A fingerprint of a call's tool name and arguments (SHA-256 of their canonical JSON):
    a decision is only ever applied to the very call it was made for."""
    return hashlib.sha256(_canonical({"name": name, "arguments": arguments})).hexdigest()


def message_fingerprint(message: Message) -> str:
    """A fingerprint of a whole message (SHA-256 of its canonical stored JSON)."""
    return hashlib.sha256(_canonical(message.to_dict())).hexdigest()


class PendingCall(Record):
    """A tool call waiting for a decision."""

    id: str
    """The call id (``ToolUse.id``); decisions name it."""
    name: str
    arguments: JSONObject
    annotations: ToolAnnotations
    """The tool's hints (all ``None`` when it declares none, or is no longer offered)."""
    fingerprint: str
    """:func:`call_fingerprint` of ``name`` and ``arguments``."""
    path: tuple[str, ...] = ()
    """The tool-call ids that led to this call: empty for the paused agent's own calls, the
    call that ran an inner agent (``agent.as_tool()``) for that agent's calls, and so on."""

    @classmethod
    def of(cls, call: ToolUse, annotations: ToolAnnotations | None) -> PendingCall:
        return cls(
            id=call.id,
            name=call.name,
            arguments=call.input,
            annotations=annotations if annotations is not None else ToolAnnotations(),
            fingerprint=call_fingerprint(call.name, call.input),
        )


class ApprovalDecision(Record):
    """A person's decision on one pending call."""

    approved: bool
    always: bool = False
    """Approved, and the same tool is approved for the rest of this turn."""
    reason: str | None = None
    """Why it was denied; the model reads it."""


class InnerPause(Record):
    """An inner agent's paused turn (``agent.as_tool()``), kept in the outer turn's pending
    state: the inner turn's history up to its pause and its own pending calls."""

    agent: str
    """The inner agent's name."""
    history: tuple[Message, ...]
    """The inner turn's history plus what it produced until it paused."""
    pending: PendingApprovals
    fingerprint: str
    """:func:`call_fingerprint` of the outer call that ran the inner agent."""

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "agent": self.agent,
            "history": [message.to_dict() for message in self.history],
            "pending": self.pending.to_dict(),
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(cls, data: object) -> InnerPause:
        if not isinstance(data, Mapping):
            raise SerializationError("a paused inner turn must be a JSON object")
        pending = data.get("pending")
        if not isinstance(pending, Mapping):
            raise SerializationError("a paused inner turn's 'pending' must be a JSON object")
        return cls(
            agent=field(data, "agent", str),
            history=tuple(messages_from_json(data.get("history"), "history")),
            pending=PendingApprovals.from_dict(pending),
            fingerprint=field(data, "fingerprint", str),
        )


class PendingApprovals(Record):
    """Tool calls of a paused turn that wait for a decision (``response.pending``).

    Decide each call with :meth:`approve` or :meth:`deny` (both return a new value), then
    continue the turn with ``await agent.resume(history, pending)``. Store it between the two
    with :meth:`to_json` / :meth:`from_json`.
    """

    turn_id: str
    calls: tuple[PendingCall, ...]
    """The calls waiting, in the order the model made them."""
    decisions: Mapping[str, ApprovalDecision]
    """The decisions made so far, by call id."""
    message: str
    """:func:`message_fingerprint` of the assistant message the calls came from (the last
    message of the paused part's ``new_messages``)."""
    results: tuple[ToolResult, ...]
    """Results of the step's calls that already ran (never run again)."""
    usage: Usage
    """The whole turn's usage so far (usage limits count it)."""
    counters: Counters
    """The model calls and tool calls the turn (and the agents its tools ran) made so far:
    the same record the turn core keeps (:attr:`kova.agent.Turn.counters`)."""
    always: tuple[str, ...]
    """Tools approved for the rest of the turn."""
    limits: UsageLimits | None
    inner: Mapping[str, InnerPause] = MappingProxyType({})
    """The inner turns that paused (an agent used as a tool, ``agent.as_tool()``), by the id
    of the call that ran each: their calls are in :attr:`calls` with a ``path``, and resuming
    continues each inner turn inside this one."""
    nonce: str = ""
    """Names this pause (derived from everything signed): a decided value resumes once."""
    signature: str = ""
    """The agent's signature over everything but the decisions (see ``docs/approvals.md``):
    ``hmac-sha256:...`` under its approval key, ``local:...`` without one (this process
    only), empty for a turn core's own value that no agent sealed."""

    @property
    def requests(self) -> int:
        """Model calls the turn has made so far (``counters.requests``)."""
        return self.counters.requests

    @property
    def tool_calls(self) -> int:
        """Tool calls the turn has started so far (``counters.tool_calls``)."""
        return self.counters.tool_calls

    @property
    def inner_requests(self) -> int:
        """Model calls the agents its tools ran have made (``counters.inner_requests``)."""
        return self.counters.inner_requests

    @property
    def inner_tool_calls(self) -> int:
        """Tool calls those agents have started (``counters.inner_tool_calls``)."""
        return self.counters.inner_tool_calls

    # -- decisions --------------------------------------------------------------------

    def _call(self, call: object) -> PendingCall:
        """The pending call ``call`` names: an id (unique among :attr:`calls`) or one of the
        :class:`PendingCall` values of :attr:`calls` (which also names its path)."""
        if isinstance(call, PendingCall):
            for item in self.calls:
                if item.id == call.id and item.path == call.path:
                    return item
            raise ApprovalMismatchError(
                f"no pending call has id {call.id!r} and path {call.path!r}"
            )
        if not isinstance(call, str):
            raise TypeError(f"call_id must be a str or a PendingCall, got {type(call).__name__}")
        found = [item for item in self.calls if item.id == call]
        if len(found) == 1:
            return found[0]
        if found:
            raise ApprovalMismatchError(
                f"{len(found)} pending calls have id {call!r} (made by different agents): pass "
                "the PendingCall from pending.calls instead of its id"
            )
        known = ", ".join(repr(item.id) for item in self.calls)
        raise ApprovalMismatchError(f"no pending call has id {call!r} (pending: {known})")

    def approve(self, call_id: str | PendingCall, *, always: bool = False) -> PendingApprovals:
        """A copy with this call approved; ``always=True`` also approves its tool for the
        rest of its turn (its other pending calls included).

        ``call_id`` is the call's id, or the :class:`PendingCall` itself (needed when two
        agents' calls share an id: an agent used as a tool numbers its calls on its own).

        Raises:
            ApprovalMismatchError: no pending call has this id, or several do.
            TypeError: ``call_id`` is neither or ``always`` not a bool.
        """
        item = self._call(call_id)
        if not isinstance(always, bool):
            raise TypeError(f"always must be a bool, got {type(always).__name__}")
        return self._with(item, ApprovalDecision(approved=True, always=always))

    def deny(self, call_id: str | PendingCall, reason: str | None = None) -> PendingApprovals:
        """A copy with this call denied; the model is told (with ``reason``, if given).

        Raises:
            ApprovalMismatchError: no pending call has this id, or several do.
            TypeError: ``call_id`` is neither a str nor a PendingCall, or ``reason`` not a
                str.
        """
        item = self._call(call_id)
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str or None, got {type(reason).__name__}")
        return self._with(item, ApprovalDecision(approved=False, reason=reason or None))

    def _with(self, item: PendingCall, decision: ApprovalDecision) -> PendingApprovals:
        if not item.path:
            return evolve(self, decisions={**self.decisions, item.id: decision})
        # An inner agent's call: the decision goes to that agent's own pending state.
        head, rest = item.path[0], item.path[1:]
        pause = self.inner[head]
        inner_item = evolve(item, path=rest)
        pending = pause.pending._with(pause.pending._call(inner_item), decision)
        return evolve(self, inner={**self.inner, head: evolve(pause, pending=pending)})

    def decision(self, call: PendingCall) -> ApprovalDecision | None:
        """The decision that applies to ``call``: its own, else an ``always`` approval of its
        tool (made on this step or earlier in the turn), else ``None``."""
        if call.path:
            pause = self.inner.get(call.path[0])
            if pause is None:
                return None
            return pause.pending.decision(evolve(call, path=call.path[1:]))
        own = self.decisions.get(call.id)
        if own is not None:
            return own
        if call.name in self.always or any(
            decision.always and self._own(other).name == call.name
            for other, decision in self.decisions.items()
        ):
            return ApprovalDecision(approved=True)
        return None

    def _own(self, call_id: str) -> PendingCall:
        for item in self.calls:
            if item.id == call_id and not item.path:
                return item
        raise ApprovalMismatchError(f"a decision names {call_id!r}, which is not pending")

    @property
    def undecided(self) -> tuple[PendingCall, ...]:
        """The calls no decision covers yet."""
        return tuple(call for call in self.calls if self.decision(call) is None)

    def check(self) -> None:
        """Fail closed: every call decided, every decision for a pending call, and every
        call's fingerprint that of its name and arguments (an inner agent's too).

        Raises:
            ApprovalMismatchError: naming the first problem.
        """
        for call_id in self.decisions:
            self._own(call_id)
        for call in self.calls:
            if call_fingerprint(call.name, call.arguments) != call.fingerprint:
                raise ApprovalMismatchError(
                    f"pending call {call.id!r} ({call.name}) does not match its fingerprint: "
                    "its name or arguments were changed"
                )
            if call.path and call.path[0] not in self.inner:
                raise ApprovalMismatchError(
                    f"pending call {call.id!r} ({call.name}) names an inner turn that is not "
                    "paused here"
                )
        for call_id, pause in self.inner.items():
            inner_calls = tuple(
                evolve(call, path=call.path[1:])
                for call in self.calls
                if call.path and call.path[0] == call_id
            )
            if inner_calls != pause.pending.calls:
                raise ApprovalMismatchError(
                    f"the calls of the inner turn run by {call_id!r} do not match its state"
                )
            last = pause.history[-1] if pause.history else None
            if last is None or message_fingerprint(last) != pause.pending.message:
                raise ApprovalMismatchError(
                    f"the history of the inner turn run by {call_id!r} does not end with the "
                    "assistant message its pending calls came from"
                )
            pause.pending.check()
        undecided = self.undecided
        if undecided:
            names = ", ".join(f"{call.id!r} ({call.name})" for call in undecided)
            raise ApprovalMismatchError(f"no decision for {names}: approve or deny every call")

    # -- signing ----------------------------------------------------------------------

    def sign(self, key: Secret | Sequence[Secret]) -> PendingApprovals:
        """A copy with a nonce and a signature under ``key`` (the first, given a list): what
        an agent with ``approval_key`` does to ``response.pending``. For a driver of
        :class:`~kova.agent.Turn` of your own; then :meth:`to_json` can store it.

        Raises:
            BuildError: ``key`` is not a :class:`kova.Secret` (of 16 characters or more).
        """
        bare = evolve(self, nonce="", signature="")
        nonce, signature = seal(bare.to_dict(), approval_keys(key))
        return evolve(bare, nonce=nonce, signature=signature)

    def verify(self, key: Secret | Sequence[Secret]) -> None:
        """Check that this value is exactly what ``key`` (any of a list) signed, decisions
        aside: what ``agent.resume`` does before anything runs.

        Raises:
            ApprovalMismatchError: changed at any level, signed with another key, or not
                signed.
        """
        check_counters(self)
        verify(self.to_dict(), approval_keys(key))

    # -- JSON -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, JSONValue]:
        """Plain JSON (a dict); :meth:`from_dict` reads it back."""
        return {
            "kova": "pending_approvals",
            "version": PENDING_FORMAT,
            "turn_id": self.turn_id,
            "message": self.message,
            "calls": [
                {
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "annotations": annotations_to_json(call.annotations),
                    "fingerprint": call.fingerprint,
                    "path": list(call.path),
                }
                for call in self.calls
            ],
            "decisions": {
                call_id: {
                    "approved": decision.approved,
                    "always": decision.always,
                    "reason": decision.reason,
                }
                for call_id, decision in self.decisions.items()
            },
            "results": [result_to_json(result) for result in self.results],
            "usage": usage_to_json(self.usage),
            "counters": counters_to_json(self.counters),
            "always": list(self.always),
            "limits": None if self.limits is None else limits_to_json(self.limits),
            "inner": {call_id: pause.to_dict() for call_id, pause in self.inner.items()},
            "nonce": self.nonce,
            "signature": self.signature,
        }

    def to_json(self) -> str:
        """This value as JSON text, for storing until the decision comes; signed, so that
        ``agent.resume`` refuses it changed (see ``docs/approvals.md``).

        Raises:
            SerializationError: the agent that paused had no approval key (set one with
                ``AgentBuilder().approval_key(...)`` or ``KOVA_APPROVAL_KEY``): such a value
                resumes only in the process that made it.
        """
        if not self.signature.startswith(KEYED):
            raise SerializationError(unsigned_message())
        return pending_document(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Self:
        """Read :meth:`to_dict` output.

        Raises:
            SerializationError: not a stored PendingApprovals, or one of another version.
            ApprovalMismatchError: a decision names a call that is not pending.
        """
        document = load_document(data, "pending_approvals", PENDING_FORMAT, "pending approvals")
        calls = []
        for item in field(document, "calls", list):
            if not isinstance(item, Mapping):
                raise SerializationError("a pending call must be a JSON object")
            arguments = field(item, "arguments", dict)
            path = field(item, "path", list) if "path" in item else []
            if not all(isinstance(part, str) for part in path):
                raise SerializationError("a pending call's 'path' must list call ids")
            calls.append(
                PendingCall(
                    id=field(item, "id", str),
                    name=field(item, "name", str),
                    arguments=arguments,
                    annotations=annotations_from_json(item.get("annotations")),
                    fingerprint=field(item, "fingerprint", str),
                    path=tuple(path),
                )
            )
        decisions: dict[str, ApprovalDecision] = {}
        for call_id, item in field(document, "decisions", dict).items():
            if not isinstance(item, Mapping):
                raise SerializationError("a decision must be a JSON object")
            reason = item.get("reason")
            if reason is not None and not isinstance(reason, str):
                raise SerializationError("a decision's reason must be a string or null")
            decisions[call_id] = ApprovalDecision(
                approved=field(item, "approved", bool),
                always=field(item, "always", bool),
                reason=reason,
            )
        always = field(document, "always", list)
        if not all(isinstance(name, str) for name in always):
            raise SerializationError("'always' must list tool names")
        limits = document.get("limits")
        pending = cls(
            turn_id=field(document, "turn_id", str),
            calls=tuple(calls),
            decisions=decisions,
            message=field(document, "message", str),
            results=tuple(result_from_json(item) for item in field(document, "results", list)),
            usage=usage_from_json(document.get("usage")),
            counters=counters_from_json(document.get("counters")),
            always=tuple(always),
            limits=None if limits is None else limits_from_json(limits),
            inner=MappingProxyType(
                {
                    call_id: InnerPause.from_dict(pause)
                    for call_id, pause in (
                        field(document, "inner", dict) if "inner" in document else {}
                    ).items()
                }
            ),
            nonce=field(document, "nonce", str),
            signature=field(document, "signature", str),
        )
        for call_id in decisions:
            pending._own(call_id)
        return pending

    @classmethod
    def from_json(cls, data: str | bytes) -> Self:
        """Read :meth:`to_json` output.

        Raises:
            TypeError: ``data`` is not text.
            SerializationError: not JSON, not a stored PendingApprovals, or another version.
            ApprovalMismatchError: a decision names a call that is not pending.
        """
        if not isinstance(data, str | bytes | bytearray):
            raise TypeError(
                f"PendingApprovals.from_json takes JSON text, not {type(data).__name__}"
            )
        parsed = read_document(data, "pending approvals")
        if not isinstance(parsed, Mapping):
            raise SerializationError("stored pending approvals must be a JSON object")
        return cls.from_dict(parsed)


def same_pause(one: PendingApprovals, other: PendingApprovals) -> bool:
    """Whether two pending states are of the same pause: the same turn, assistant message
    and calls, and the same inner turns (by agent and fingerprint). Decisions for another
    pause are refused wherever a paused turn goes on (the turn core, a journal, a Temporal
    workflow, a session)."""
    return (
        one.turn_id == other.turn_id
        and one.message == other.message
        and one.calls == other.calls
        and {key: (pause.agent, pause.fingerprint) for key, pause in one.inner.items()}
        == {key: (pause.agent, pause.fingerprint) for key, pause in other.inner.items()}
    )


def check_counters(pending: PendingApprovals) -> None:
    """Raises :class:`ApprovalMismatchError` unless every usage figure of ``pending`` (and of
    its inner turns) is a non-negative int or ``None`` (the counts are a :class:`Counters`,
    which holds nothing else)."""
    for name in pending.usage.__record_fields__:
        used = getattr(pending.usage, name)
        if used is None or (not isinstance(used, bool) and isinstance(used, int) and used >= 0):
            continue
        if name == "cost" and used >= 0:  # a Decimal
            continue
        raise ApprovalMismatchError(f"pending approvals' usage {name} holds {used!r:.40}")
    for pause in pending.inner.values():
        check_counters(pause.pending)


def pending_document(pending: PendingApprovals) -> str:
    """``pending`` as JSON text whether signed or not: for a store kova trusts (a journal, a
    Temporal workflow's own state, a session store), never for handing out."""
    return json.dumps(pending.to_dict(), ensure_ascii=False, separators=(",", ":"))


def read_document(data: str | bytes | bytearray, what: str) -> object:
    """Stored JSON text parsed, nested at most :data:`MAX_DOCUMENT_DEPTH` deep.

    Raises:
        SerializationError: not JSON, or nested deeper (never a RecursionError).
    """
    try:
        parsed = loads(data)
    except ValueError as exc:
        raise SerializationError(f"{what} are not JSON: {exc}") from None
    if depth_exceeds(parsed, MAX_DOCUMENT_DEPTH):
        raise SerializationError(f"{what} are nested more than {MAX_DOCUMENT_DEPTH} levels deep")
    return parsed
