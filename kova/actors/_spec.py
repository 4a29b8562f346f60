"""What a supervisor is told: restart types, strategies, :class:`Backoff` and
:class:`ChildSpec`, checked as they are built.

Plain values: the supervisor that runs children from them is in ``_supervisor``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, TypeAlias, get_args

from .._errors import ConfigError
from .._record import Record
from ._actor import Actor
from ._mailbox import DEFAULT_MAILBOX_SIZE

__all__ = [
    "DEFAULT_SHUTDOWN_GRACE",
    "ActorFactory",
    "Backoff",
    "ChildSpec",
    "RestartType",
    "Strategy",
    "check_supervisor_args",
]

Strategy: TypeAlias = Literal["one_for_one", "one_for_all", "rest_for_one"]
"""Which children restart when one fails."""

RestartType: TypeAlias = Literal["permanent", "transient", "temporary"]
"""When a child is restarted: always, after a crash only, or never."""

ActorFactory: TypeAlias = Callable[[], Actor]

DEFAULT_SHUTDOWN_GRACE = 5.0


_RESTART_TYPES: tuple[str, ...] = get_args(RestartType)


def _non_negative(name: str, value: float) -> float:
    # ``not >= 0`` refuses NaN too (a NaN delay or grace made trio raise a raw ValueError in
    # the supervisor); infinity would be a restart or a stop that never comes.
    if not (value >= 0 and math.isfinite(value)):
        raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
    return value


class Backoff(Record):
    """Delay before a restart: ``min(maximum, initial * factor ** (k - 1))`` for the *k*-th
    restart inside the supervisor's intensity window."""

    initial: float = 0.1
    factor: float = 2.0
    maximum: float = 5.0

    def __post_init__(self) -> None:
        for name in ("initial", "factor", "maximum"):
            _non_negative(name, getattr(self, name))

    @classmethod
    def none(cls) -> Backoff:
        """Restart immediately."""
        return cls(initial=0.0, factor=1.0, maximum=0.0)

    def delay(self, restart_number: int) -> float:
        """Seconds to wait before restart number ``restart_number`` (1-based)."""
        if self.initial == 0:
            return 0.0
        return min(self.maximum, self.initial * self.factor ** max(0, restart_number - 1))


class ChildSpec(Record):
    """How to run one child."""

    factory: ActorFactory
    """Returns a fresh :class:`Actor` for every (re)start."""
    name: str
    restart: RestartType = "permanent"
    mailbox_size: int = DEFAULT_MAILBOX_SIZE
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    """Seconds an orderly stop waits for the child before cancelling it."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a child needs a non-empty name")
        if self.restart not in _RESTART_TYPES:
            raise ValueError(f"restart must be one of {_RESTART_TYPES}, got {self.restart!r}")
        _non_negative("mailbox_size", self.mailbox_size)
        _non_negative("shutdown_grace", self.shutdown_grace)


def check_supervisor_args(strategy: str, max_restarts: int, within: float) -> None:
    """Raise ``ValueError`` for a strategy or a restart intensity a supervisor cannot use."""
    if strategy not in get_args(Strategy):
        raise ValueError(f"strategy must be one of {get_args(Strategy)}, got {strategy!r}")
    if max_restarts < 0 or not (within > 0 and math.isfinite(within)):
        raise ConfigError(
            f"max_restarts must be >= 0 and within a positive, finite number of seconds, "
            f"got {max_restarts!r} and {within!r}"
        )
