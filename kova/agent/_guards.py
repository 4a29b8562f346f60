"""Guards: checks that run beside a turn and stop it the moment one trips.

Three kinds, given to ``AgentBuilder().guards(...)`` or ``run(..., guards=...)``:

- :class:`InputGuard` checks the turn's input (the history it was given). It runs
  *concurrently* with the turn's first model call: the turn waits for it before any tool
  runs and before it answers, and a trip cancels the model call through its cancel scope. A
  ``blocking`` input guard runs first instead, so a trip spends no tokens.
- :class:`OutputGuard` checks the answer's text: as it streams (every ``every_chars``
  characters, or at each sentence end when ``every_chars`` is ``None``), and the whole
  answer at the end.
- :class:`ToolGuard` checks each tool call before it runs: pass, :class:`Deny` (the model gets
  the reason in-band, as an error result) or :class:`Trip`.

A check is a sync or async function, or an :class:`~kova.agent.Agent` whose structured answer
(``{"trip": bool, "reason": str}``) decides. It returns ``None`` to pass, :class:`Trip` to
stop the turn (:class:`~kova.errors.GuardrailTripped`), or, for a tool guard,
:class:`Deny`. A check that raises fails the turn with that error: a broken guard never
passes silently.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeAlias

from .._errors import BuildError
from .._messages import Role, ToolResult
from .._record import Record, set_field
from .._requests import ResponseFormat
from ._events import GuardPassed, GuardTripped

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._messages import JSONObject, Message

__all__ = [
    "Deny",
    "Guard",
    "GuardKind",
    "GuardPassed",
    "GuardTripped",
    "InputGuard",
    "OutputGuard",
    "ToolGuard",
    "Trip",
    "VERDICT_SCHEMA",
    "check_outcome",
    "guard_name",
    "input_text",
]

GuardKind: TypeAlias = Literal["input", "output", "tool"]


class Trip(Record):
    """A check's verdict: stop the turn (``GuardrailTripped`` with this reason)."""

    reason: str

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str):
            raise TypeError(f"Trip(reason) must be a str, got {type(reason).__name__}")
        set_field(self, "reason", reason)


class Deny(Record):
    """A tool guard's verdict: don't run the call; the model gets the reason in-band."""

    reason: str

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str):
            raise TypeError(f"Deny(reason) must be a str, got {type(reason).__name__}")
        set_field(self, "reason", reason)


VERDICT_SCHEMA: Final[JSONObject] = {
    "type": "object",
    "properties": {
        "trip": {"type": "boolean", "description": "true to stop: the text breaks the rules"},
        "reason": {"type": "string", "description": "why, in one sentence"},
    },
    "required": ["trip", "reason"],
    "additionalProperties": False,
}
"""The answer an agent used as a check gives (its structured output)."""


def guard_name(check: object, name: str | None) -> str:
    """The guard's name: ``name``, else the check's ``__name__`` (an agent's name)."""
    if name is not None:
        if not isinstance(name, str) or not name:
            raise BuildError(f"a guard's name must be a non-empty str, got {name!r}")
        return name
    if _is_agent(check):
        return str(check.config.name)  # type: ignore[attr-defined]
    found = getattr(check, "__name__", None)
    return found if isinstance(found, str) and found else type(check).__name__


def input_text(history: Sequence[Message]) -> str:
    """What an input guard checks: the text of the last user message of the turn's input
    (pure: a Temporal workflow reads it too)."""
    for message in reversed(history):
        if message.role is Role.USER and not any(
            isinstance(block, ToolResult) for block in message.content
        ):
            return message.text
    return ""


def _is_agent(check: object) -> bool:
    """Whether ``check`` is a kova Agent (told by its API: this module is below the agent's)."""
    return callable(getattr(check, "run_structured", None)) and hasattr(check, "config")


def _check_callable(check: object, what: str) -> None:
    if _is_agent(check) or callable(check):
        return
    raise BuildError(
        f"{what} takes a function (sync or async) or a kova Agent as its check, got "
        f"{type(check).__name__}"
    )


class _Guard:
    __slots__ = ("check", "name")
    kind: ClassVar[GuardKind]

    def __init__(self, check: Callable[..., Any] | object, name: str | None) -> None:
        _check_callable(check, type(self).__name__)
        self.check = check
        self.name = guard_name(check, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class InputGuard(_Guard):
    """Check a turn's input (the history; the check gets the last user message's text).

    Args:
        check: ``check(text) -> None | Trip`` (sync or async), or an Agent.
        blocking: run before the first model call instead of beside it.
        name: the guard's name in errors and events (default: the check's name).
    """

    __slots__ = ("blocking",)
    kind = "input"

    def __init__(
        self, check: Callable[..., Any] | object, *, blocking: bool = False, name: str | None = None
    ) -> None:
        super().__init__(check, name)
        if not isinstance(blocking, bool):
            raise BuildError(f"InputGuard(blocking=...) must be a bool, got {blocking!r}")
        self.blocking = blocking


class OutputGuard(_Guard):
    """Check the answer's text as it streams and when it is complete.

    Args:
        check: ``check(text) -> None | Trip`` with all the text so far.
        every_chars: check after every this many new characters (``None``: at sentence
            ends: ``.``, ``!``, ``?`` or a line break).
        name: the guard's name in errors and events.
    """

    __slots__ = ("every_chars",)
    kind = "output"

    def __init__(
        self,
        check: Callable[..., Any] | object,
        *,
        every_chars: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(check, name)
        if every_chars is not None and (
            isinstance(every_chars, bool) or not isinstance(every_chars, int) or every_chars < 1
        ):
            raise BuildError(
                f"OutputGuard(every_chars=...) must be a positive int, got {every_chars!r}"
            )
        self.every_chars = every_chars


class ToolGuard(_Guard):
    """Check each tool call before it runs: ``check(call) -> None | Deny | Trip`` with the
    :class:`~kova.ToolUse`."""

    __slots__ = ()
    kind = "tool"

    def __init__(self, check: Callable[..., Any] | object, *, name: str | None = None) -> None:
        super().__init__(check, name)


Guard: TypeAlias = InputGuard | OutputGuard | ToolGuard


def check_guards(guards: object) -> tuple[Guard, ...]:
    """``guards`` as a tuple, each an InputGuard, OutputGuard or ToolGuard.

    Raises:
        BuildError: anything else (a bare function names the three wrappers).
    """
    if isinstance(guards, InputGuard | OutputGuard | ToolGuard):
        return (guards,)
    if not isinstance(guards, tuple | list):
        raise BuildError(f"guards must be a sequence of guards, got {type(guards).__name__}")
    checked: list[Guard] = []
    for item in guards:
        if not isinstance(item, InputGuard | OutputGuard | ToolGuard):
            raise BuildError(
                f"a guard must be kova.agent.InputGuard, OutputGuard or ToolGuard (wrapping "
                f"the check), got {type(item).__name__}"
            )
        checked.append(item)
    return tuple(checked)


async def check_outcome(guard: Guard, value: object) -> Trip | Deny | None:
    """Run ``guard``'s check on ``value`` and check what it returned.

    Raises:
        TypeError: the check returned something else (or ``Deny`` from a guard that is not a
            tool guard).
        The check's own exception.
    """
    check: Any = guard.check
    if _is_agent(check):
        text = value if isinstance(value, str) else repr(value)
        verdict, _ = await check.run_structured(
            text, ResponseFormat(name="verdict", schema=VERDICT_SCHEMA)
        )
        if verdict.get("trip") is True:
            reason = verdict.get("reason")
            return Trip(reason=reason if isinstance(reason, str) else "")
        return None
    outcome = check(value)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if outcome is None or isinstance(outcome, Trip):
        return outcome
    if isinstance(outcome, Deny) and isinstance(guard, ToolGuard):
        return outcome
    allowed = "None, Trip or Deny" if isinstance(guard, ToolGuard) else "None or Trip"
    raise TypeError(
        f"guard {guard.name!r} returned {type(outcome).__name__}; a check returns {allowed}"
    )
