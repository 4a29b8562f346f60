"""Signed pending approvals: a paused turn that leaves the process comes back unchanged, once.

When an agent's turn pauses for approvals, the agent seals ``response.pending``
(:func:`seal`): a **nonce** naming this pause, and a **signature**, an HMAC-SHA256 over
everything a person approves or that decides what runs: every call (an inner agent's calls
too) with its arguments, annotations and fingerprint, the inner turns' histories and states,
the ``always`` list, the results of the calls that already ran, the counters and usage, the
turn id, the assistant message's fingerprint and the nonce. The decisions are not signed:
they are what the person adds.

- With a key (``AgentBuilder().approval_key(kova.Secret(...))``, or the ``KOVA_APPROVAL_KEY``
  environment variable), the signature is ``hmac-sha256:<hex>`` under the first key and the
  value goes to JSON (:meth:`~kova.agent.PendingApprovals.to_json`); ``agent.resume``
  accepts it when any of the agent's keys made it (a list of keys rotates: the first signs,
  every one verifies).
- Without a key, the signature is made with a random key of this process (``local:<hex>``):
  the value resumes in this process, and ``to_json`` refuses it, naming both ways to set a
  key.

:func:`verify` checks a value before ``agent.resume`` runs anything; anything else (a changed
field at any level, a signature of another key, no signature) is
:class:`~kova.errors.ApprovalMismatchError`. The nonce is derived from the signed content, so
the same pause always has the same nonce: :class:`Decisions` lets each one be used once per
agent (the journal records it across processes, see ``kova.durable``).

The HMAC itself is :mod:`._seal`'s (standard library :mod:`hmac` and :mod:`hashlib`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._errors import ApprovalMismatchError
from .._record import evolve
from .._secret import Secret
from ._approvals import PendingApprovals, check_counters
from ._seal import KEY_VARIABLE, approval_keys, seal, verify

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._events import AgentResponse

__all__ = ["Decisions", "Signer"]


class Signer:
    """An agent's approval keys (its own, else the environment's, else none: this process's
    random key seals its values)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Secret]) -> None:
        keys = tuple(keys)
        if not keys:
            value = os.environ.get(KEY_VARIABLE)
            if value:
                keys = approval_keys(Secret(value))
        self._keys = keys

    def __repr__(self) -> str:
        return f"<Signer: {len(self._keys)} keys>"

    def seal(self, pending: PendingApprovals) -> PendingApprovals:
        """``pending`` with its nonce and signature."""
        nonce, signature = seal(pending.to_dict(), self._keys)
        return evolve(pending, nonce=nonce, signature=signature)

    def sealed(self, response: AgentResponse) -> AgentResponse:
        """``response`` with its pending approvals (if any) sealed."""
        pending = response.pending
        if pending is None:
            return response
        return evolve(response, pending=self.seal(pending))

    def verify_pending(self, pending: object) -> None:
        """What ``agent.resume`` checks first: a :class:`PendingApprovals` (else
        ``TypeError``), with sane counters, exactly as signed.

        Raises:
            ApprovalMismatchError: changed at any level, signed with a key this agent does
                not have (or by another process without a key), or not signed.
        """
        if not isinstance(pending, PendingApprovals):
            raise TypeError(
                f"pending must be a kova.agent.PendingApprovals, got {type(pending).__name__}"
            )
        check_counters(pending)
        verify(pending.to_dict(), self._keys)


class Decisions:
    """The pauses an agent has resumed (by nonce), so each decided value runs once in this
    process. Plain state changed only between checkpoints (no lock): a resume takes the
    nonce before its first await and gives it back only if it fails."""

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: set[str] = set()

    def take(self, nonce: str) -> None:
        """Raises :class:`ApprovalMismatchError` if a resume of ``nonce`` ran or runs."""
        if nonce in self._used:
            raise ApprovalMismatchError(
                "these decisions were already used: the paused turn was resumed (or is being "
                "resumed) with them; a decided pause runs once"
            )
        self._used.add(nonce)

    def give_back(self, nonce: str) -> None:
        """A resume that failed produced nothing: its decisions may be used again."""
        self._used.discard(nonce)
