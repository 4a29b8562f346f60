"""A guard's decision as a turn records it (:class:`GuardRecord`), so that a turn run again
from its record does not run a guard that already decided.

**For every driver that records turns** (the journal; a Temporal workflow): the records live
in the turn core (``Turn.guard_decided(record)`` adds one, ``Turn.guard_record(kind, guard,
call_id)`` finds one, ``Turn.guard_tripped()`` is the trip that ended the turn, if any), and
they are part of the turn's JSON, a list under ``"guards"``, each item::

    {"guard": "topic_check",     # the guard's name (InputGuard(..., name=...))
     "kind": "input",            # "input" | "output" | "tool"
     "verdict": "pass",          # "pass" | "trip" | "deny" (deny: tool guards only)
     "reason": "",               # a trip's or a denial's reason ("" for a pass)
     "call_id": ""}              # the tool call a tool guard decided on ("" otherwise)

A record is keyed by ``(kind, guard, call_id)``: an input guard decides once per turn, an
output guard once for the final answer (its checks of the streamed text are not recorded: a
stream cut off by a crash is asked for again, and its new text is checked again), a tool
guard once per call. A driver restoring a turn hands it to the guard gate as it is: a
recorded pass is not run again, a recorded denial answers its call again, and a recorded
trip ends the turn again with ``GuardrailTripped`` before anything is sent (the turn id names
that turn: a trip stands; run a new turn id to try again).

The in-process gate (``_guard_gate.GuardGate``) adds each record to the turn the moment the
guard decides and has the step observer save the turn then (a trip first stops the turn,
then is saved, shielded, before the turn's error leaves); a Temporal workflow can keep the
same records in its turn, deciding a guard in an activity and adding its record when the
activity returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

from .._errors import SerializationError
from .._record import Record

__all__ = ["GuardRecord", "GuardVerdict"]

GuardVerdict: TypeAlias = Literal["pass", "trip", "deny"]

_KINDS = frozenset({"input", "output", "tool"})
_VERDICTS = frozenset({"pass", "trip", "deny"})


class GuardRecord(Record):
    """One guard's decision in a turn (see the module docstring for its JSON shape)."""

    guard: str
    kind: Literal["input", "output", "tool"]
    verdict: GuardVerdict
    reason: str = ""
    call_id: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """What the record is the decision for: ``(kind, guard, call_id)``."""
        return (self.kind, self.guard, self.call_id)

    def to_dict(self) -> dict[str, str]:
        """The record as plain JSON."""
        return {
            "guard": self.guard,
            "kind": self.kind,
            "verdict": self.verdict,
            "reason": self.reason,
            "call_id": self.call_id,
        }

    @classmethod
    def from_dict(cls, data: object) -> GuardRecord:
        """A record from :meth:`to_dict` output.

        Raises:
            SerializationError: not a guard record.
        """
        if not isinstance(data, Mapping):
            raise SerializationError("a stored guard record must be a JSON object")
        names = ("guard", "kind", "verdict", "reason", "call_id")
        values = {key: data.get(key, "") for key in names}
        if not all(isinstance(value, str) for value in values.values()):
            raise SerializationError("a stored guard record's fields must be strings")
        if not values["guard"]:
            raise SerializationError("a stored guard record must name its guard")
        if values["kind"] not in _KINDS or values["verdict"] not in _VERDICTS:
            raise SerializationError(
                f"a stored guard record has an unknown kind or verdict: {values['kind']!r}, "
                f"{values['verdict']!r}"
            )
        if values["verdict"] == "deny" and values["kind"] != "tool":
            raise SerializationError("only a tool guard's record can deny")
        return cls(
            guard=values["guard"],
            kind=values["kind"],
            verdict=values["verdict"],
            reason=values["reason"],
            call_id=values["call_id"],
        )
