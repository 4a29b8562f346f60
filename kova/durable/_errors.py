"""The journal's errors."""

from __future__ import annotations

import time

from .._errors import KovaError

__all__ = ["JournalError", "TurnClaimedError"]


class JournalError(KovaError):
    """The journal could not be read or written (its file, its lock, its version)."""


class TurnClaimedError(JournalError):
    """Another owner holds this turn (its lease is live), or took it over from this one."""

    def __init__(self, turn_id: str, lease_until: float | None = None) -> None:
        self.turn_id = turn_id
        self.lease_until = lease_until
        if lease_until is None:
            message = (
                f"this runner lost its claim on turn {turn_id!r} (no longer claimed by it): "
                "its lease ran out and another runner has taken the turn over, so this one "
                "records nothing more (what it did since is not in the journal)"
            )
        else:
            left = max(0.0, lease_until - time.time())
            message = f"turn {turn_id!r} is being run by another runner (lease for {left:.0f} s)"
        super().__init__(message)
