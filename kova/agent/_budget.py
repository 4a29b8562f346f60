"""A budget in money shared by any number of agents: :class:`Budget`, and the :class:`Meter`
an agent prices and reserves its model calls with.

A budget is a capacity limiter measured in USD. Before each model call the agent reserves
the call's worst case (its counted input tokens at the dearest input price plus
``max_tokens`` at the dearest output price); a call whose worst case does not fit in what is
left is refused before it is sent (:class:`~kova.errors.BudgetExceeded`). When the answer
arrives the reservation is settled: the call's real cost is spent and the rest of its
reservation freed. So the calls in flight can never together spend more than the budget had
left when they started, however many agents and tasks share it.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final, Protocol

import trio

from .._errors import BudgetExceeded, BuildError, ProviderError
from ..providers import heuristic_count_tokens
from ._cost import usd

if TYPE_CHECKING:
    from .._models import ChatRequest, ModelResponse
    from ._cost import Pricer
    from ._limits import UsageLimits

__all__ = ["Budget", "Hold", "Ledger", "Meter"]

_ZERO: Final = Decimal(0)


class Budget:
    """``amount`` USD that any number of agents may spend together, given to each with
    ``AgentBuilder().budget(budget)``.

    Args:
        amount: USD (``Decimal``, ``int``, numeric ``str``, or ``float`` read by its
            shortest repr).
        window: ``None``: the amount is for the budget's whole life. A duration (seconds or
            a ``datetime.timedelta``): the amount is per rolling window, so a call's cost
            stops counting ``window`` after it was settled (on trio's clock).

    Before each model call an agent reserves the call's worst case and refuses the call
    (:class:`~kova.errors.BudgetExceeded`, nothing sent) if it does not fit in :attr:`left`;
    after the answer it spends the real cost and frees the rest. A call that fails with a
    provider's error answer frees its reservation (nothing was billed); one cut short after
    it was sent (cancelled, timed out, a broken stream) spends its whole reservation, since
    the provider may have billed up to it.

    A shared object the trio way: its state changes only between checkpoints (every method
    is synchronous), so the agents of one trio run share it without a lock. It serves one
    trio run at a time: another run (``run_sync`` makes one per call) may take it over when
    no call of the last one is in flight, and is refused while one is.
    """

    __slots__ = ("_amount", "_ledger", "_reserved", "_run", "_spends", "_spent", "_window")

    def __init__(self, amount: Decimal | int | str | float, *, window: object = None) -> None:
        self._amount = usd("Budget amount", amount, "USD")
        self._ledger: Ledger | None = None
        """Where a budget shared by processes keeps its figures (``store.budget(...)``)."""
        if window is not None:
            if isinstance(window, timedelta):
                window = window.total_seconds()
            if isinstance(window, bool) or not isinstance(window, int | float):
                raise BuildError(
                    f"Budget window must be seconds or a datetime.timedelta, got {window!r}"
                )
            if not math.isfinite(window) or window <= 0:
                raise BuildError(f"Budget window must be a positive duration, got {window!r}")
            window = float(window)
        self._window: float | None = window
        self._spent = _ZERO
        self._reserved = _ZERO
        # (settled at, cost) of each call, for a window.
        self._spends: deque[tuple[float, Decimal]] = deque()
        self._run: object = None

    def __repr__(self) -> str:
        per = "" if self._window is None else f", window={self._window:g}"
        shared = "" if self._ledger is None else f", store={self._ledger.where}"
        return f"Budget({self._amount}{per}{shared})"

    @property
    def shared(self) -> bool:
        """Whether the budget is kept in a store, shared by every process using it
        (``SqliteSessionStore.budget(...)``). Its :attr:`spent` and :attr:`reserved` are
        then the store's as of this process's last reservation or settlement."""
        return self._ledger is not None

    @property
    def amount(self) -> Decimal:
        """The budget, in USD (per window, with one)."""
        return self._amount

    @property
    def window(self) -> float | None:
        """The rolling window in seconds, or ``None``."""
        return self._window

    @property
    def spent(self) -> Decimal:
        """USD spent by the calls settled so far (within the window, with one)."""
        self._expire()
        return self._spent

    @property
    def reserved(self) -> Decimal:
        """USD held by calls in flight (their worst cases, until they settle)."""
        return self._reserved

    @property
    def left(self) -> Decimal:
        """USD a new call may still reserve: ``amount - spent - reserved`` (may be below 0
        once a call cost more than its worst case, e.g. with an undercounted prompt)."""
        self._expire()
        return self._amount - self._spent - self._reserved

    def _expire(self) -> None:
        window = self._window
        if window is None or not self._spends or self._ledger is not None:
            return
        try:
            if trio.lowlevel.current_trio_token() is not self._run:
                return  # the spends are timed on another run's clock (see _check_run)
            now = trio.current_time()
        except RuntimeError:  # read outside a trio run: as of the last read inside one
            return
        spends = self._spends
        while spends and spends[0][0] <= now - window:
            self._spent -= spends.popleft()[1]

    def _check_run(self) -> None:
        """The budget serves one trio run at a time: another may take it over once no call
        of the last one is in flight (``run_sync`` opens a run per call)."""
        run = trio.lowlevel.current_trio_token()
        if run is self._run:
            return
        if self._run is not None and self._reserved:
            raise BuildError(
                f"{self!r} has calls in flight in another trio run: a budget serves one trio "
                "run at a time (share one across threads or processes through a session "
                "store: store.budget(...))"
            )
        self._run = run
        if self._spends:
            # Timed on the last run's clock, which this run's does not continue: they count
            # from now, a whole window more (never less than they should).
            now = trio.current_time()
            self._spends = deque((now, cost) for _, cost in self._spends)

    def _reserve(self, needed: Decimal) -> None:
        """Hold ``needed`` for a call, or refuse it."""
        self._check_run()
        left = self.left
        if needed > left:
            raise BudgetExceeded(self, needed, left)
        self._reserved += needed

    async def _reserve_shared(self, needed: Decimal) -> int:
        """Hold ``needed`` in the store (one transaction), or refuse; the hold's id."""
        assert self._ledger is not None
        entry, spent, reserved = await self._ledger.reserve(self, needed)
        self._spent, self._reserved = spent, reserved  # as the store had them
        if entry is None:
            raise BudgetExceeded(self, needed, self._amount - spent - reserved)
        return entry

    async def _settle_shared(self, entry: int, held: Decimal, cost: Decimal) -> None:
        assert self._ledger is not None
        with trio.CancelScope(shield=True):  # a settlement is never lost to a cancel
            self._spent, self._reserved = await self._ledger.settle(self, entry, held, cost)

    def _settle(self, held: Decimal, cost: Decimal) -> None:
        """A call that held ``held`` cost ``cost``: spend it, free the reservation."""
        self._reserved -= held
        if cost:
            self._spent += cost
            if self._window is not None:
                self._spends.append((trio.current_time(), cost))


class Ledger(Protocol):
    """Where a shared budget's figures live (a session store): each method is one atomic
    step across every process using the budget."""

    where: str

    async def reserve(self, budget: Budget, needed: Decimal) -> tuple[int | None, Decimal, Decimal]:
        """Hold ``needed`` if it fits: (the hold's id or ``None``, spent, reserved)."""
        ...

    async def settle(
        self, budget: Budget, entry: int, held: Decimal, cost: Decimal
    ) -> tuple[Decimal, Decimal]:
        """Hold ``entry`` cost ``cost``: (spent, reserved) after it."""
        ...


class Meter:
    """An agent's pricing and budget for its model calls (plain state, synchronous)."""

    __slots__ = ("_max_tokens", "budget", "pricer", "prices")

    def __init__(self, pricer: Pricer, budget: Budget | None, provider: object) -> None:
        self.pricer = pricer
        self.budget = budget
        self.prices = pricer.can_price
        """Whether a call may have a cost here (if not, a response is left as it is)."""
        self._max_tokens = _default_max_tokens(provider)

    def wants_sheet(self, limits: UsageLimits | None, reads_costs: bool = False) -> bool:
        """Whether an agent reads costs as it runs (a budget, a cost limit in ``limits``, or
        ``reads_costs``: metrics, telemetry subscribers, a journal or a pause that stores the
        turn) and prices from a sheet not loaded yet: it loads the sheet first, in a worker
        thread (~150 ms), so that no read imports it on the event loop. Otherwise the sheet
        loads when a cost is first read."""
        if not reads_costs and self.budget is None and (limits is None or limits.cost is None):
            return False
        return self.pricer.needs_sheet()

    async def reserve(
        self, request: ChatRequest, model: str | None, counted: int | None = None
    ) -> Hold:
        """Reserve the worst case of sending ``request`` (call with a budget only): its
        prompt as ``counted`` by the provider when the turn counted it
        (``count_tokens_before_request``), else kova's offline estimate.

        Raises:
            BudgetExceeded: it does not fit; the call must not be sent.
            BuildError: the call cannot be bounded: its model has no known price, or no
                ``max_tokens`` is set.
        """
        budget = self.budget
        assert budget is not None
        sheet = self.pricer.sheet(model)
        if sheet is None:
            raise BuildError(
                f"{budget!r} cannot hold a call to model {model!r}: it has no known price "
                "(give it one with AgentBuilder().prices(kova.agent.Prices({...})))"
            )
        max_tokens = request.config.max_tokens or self._max_tokens
        if max_tokens is None:
            raise BuildError(
                f"{budget!r} cannot bound a call without max_tokens: set "
                "InferenceConfig(max_tokens=...) on the agent or the call"
            )
        prompt = (
            heuristic_count_tokens(request.messages, request.tools) if counted is None else counted
        )
        needed = sheet.worst(prompt, max_tokens)
        if budget._ledger is not None:
            with trio.CancelScope(shield=True):  # a hold made is always known
                entry = await budget._reserve_shared(needed)
            try:
                await trio.lowlevel.checkpoint_if_cancelled()
            except BaseException:  # cancelled meanwhile: nothing was sent
                await budget._settle_shared(entry, needed, _ZERO)
                raise
            return Hold(needed, entry)
        budget._reserve(needed)  # no checkpoint: reserved between two others' checkpoints
        return Hold(needed, None)

    def priced(self, response: ModelResponse, model: str | None) -> ModelResponse:
        """``response`` with its cost, worked out when first read (see
        :meth:`Pricer.priced`)."""
        return self.pricer.priced(response, model)

    async def settle(self, held: Hold, response: ModelResponse) -> None:
        """The call that reserved ``held`` answered ``response`` (priced): spend its cost
        (its reservation if its cost is unknown: it reported no usage)."""
        usage = response.usage
        cost = usage.cost if usage is not None else None
        await self._spend(held, held.amount if cost is None else cost)

    async def release(self, held: Hold, exc: BaseException) -> None:
        """The call that reserved ``held`` failed with ``exc``: an error answer from the
        provider was not billed (free it); anything else may have been (spend it)."""
        await self._spend(held, _ZERO if isinstance(exc, ProviderError) else held.amount)

    async def _spend(self, held: Hold, cost: Decimal) -> None:
        budget = self.budget
        assert budget is not None
        if held.entry is None:
            budget._settle(held.amount, cost)
        else:
            await budget._settle_shared(held.entry, held.amount, cost)


class Hold:
    """One call's reservation: its amount, and its row in a store for a shared budget."""

    __slots__ = ("amount", "entry")

    def __init__(self, amount: Decimal, entry: int | None) -> None:
        self.amount = amount
        self.entry = entry


def _default_max_tokens(provider: object) -> int | None:
    """The ``max_tokens`` a provider sends when the request sets none, if it says."""
    for owner in (provider, getattr(provider, "codec", None), getattr(provider, "config", None)):
        value = getattr(owner, "max_tokens", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
