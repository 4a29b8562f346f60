"""A claim's lease, kept alive while its runner works: ``async with claim.kept_alive():``.

A journal's claim is a lease (60 s by default). A step can last longer than that (a slow
tool, a long model answer), and a lease that runs out while its runner is alive lets a second
runner take the turn and run the same step at once. So while the claim's scope is open, a task
beside the step renews the lease every third of it: it lives as long as its runner does, and
runs out (freeing the turn for another runner) only when the runner dies or stops renewing.

If a renewal finds the claim lost (the lease did run out, a stalled machine say, and another
runner took the turn), the work in the scope is cancelled and the scope raises
:class:`~kova.durable.TurnClaimedError`: this runner records nothing more (every write checks
the claim too) and says so, instead of going on with effects the journal will never see.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import trio

from .._errors import KovaError
from .._log import get_logger
from ._errors import TurnClaimedError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["Renewable", "keep_alive"]

_log = get_logger("kova.durable")


class Renewable(Protocol):
    """What a journal's claim offers the keeper."""

    turn_id: str

    async def renew(self) -> None: ...


@asynccontextmanager
async def keep_alive(claim: Renewable, lease: float) -> AsyncIterator[None]:
    """Renew ``claim`` every ``lease / 3`` seconds (trio's clock) while the block runs.

    Raises:
        TurnClaimedError: the claim was lost while the block ran (the block was cancelled).
    """
    lost: list[TurnClaimedError] = []
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_renew_every, claim, lease / 3, lost, nursery.cancel_scope)
        try:
            yield
        except BaseException as exc:  # re-raised outside the nursery: not grouped
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
    if lost:
        raise lost[0] from None
    if failure is not None:
        raise failure


async def _renew_every(
    claim: Renewable, interval: float, lost: list[TurnClaimedError], scope: trio.CancelScope
) -> None:
    while True:
        await trio.sleep(interval)
        try:
            await claim.renew()
        except TurnClaimedError:
            lost.append(
                TurnClaimedError(claim.turn_id)  # the message says this runner lost it
            )
            scope.cancel()
            return
        except KovaError as exc:
            # The journal is busy or briefly unreachable: the lease still has two thirds
            # left; the next renewal (or the next write) tries again.
            _log.warning("journal.renew.failed", turn_id=claim.turn_id, error=str(exc))
