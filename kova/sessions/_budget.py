"""A :class:`~kova.agent.Budget` shared by processes, kept in a
:class:`SqliteSessionStore`'s file: ``store.budget(amount, window=None, name="default")``.

Every process (and every agent of each) that makes the same budget from the same file and
name shares its figures: each reservation and settlement is one write transaction
(``BEGIN IMMEDIATE``, which SQLite serializes across processes), so calls in flight in any
process never together hold more than the budget has left.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from .._errors import BuildError
from ..agent import Budget

if TYPE_CHECKING:
    import sqlite3

    from ._sqlite import SqliteSessionStore

__all__ = ["shared_budget"]

_ZERO: Final = Decimal(0)

_HOLD_SECONDS: Final = 3_600.0
"""A hold not settled this long after it was made (its process died mid-call) counts as
spent: the call may have been billed up to it."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kova_budget_holds ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, budget TEXT NOT NULL, amount TEXT NOT NULL,"
    " spent INTEGER NOT NULL, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kova_budget_holds_by_budget ON kova_budget_holds (budget)",
    "CREATE TABLE IF NOT EXISTS kova_budgets (name TEXT PRIMARY KEY, spent TEXT NOT NULL)",
)


class _SqliteLedger:
    """A budget's figures in a :class:`~kova.sessions.SqliteSessionStore`'s file, shared by
    every process using it: each reservation and settlement is one write transaction
    (``BEGIN IMMEDIATE``: SQLite serializes them across processes).

    Rows of ``kova_budget_holds`` are the calls in flight (``spent = 0``, ``at``: when the
    hold was made) and, for a budget with a window, the settled calls (``spent = 1``, ``at``:
    when settled). A budget without one keeps its settled total in ``kova_budgets``. Times
    are the machine's wall clock (``time.time()``), the one clock processes share.
    """

    __slots__ = ("_name", "_store", "where")

    def __init__(self, store: SqliteSessionStore, name: str) -> None:
        self._store = store
        self._name = name
        self.where = f"{str(store.path)!r}:{name}"

    async def reserve(self, budget: Budget, needed: Decimal) -> tuple[int | None, Decimal, Decimal]:
        return await self._store._run(
            _reserve, self._name, budget._amount, budget._window, needed, time.time()
        )

    async def settle(
        self, budget: Budget, entry: int, held: Decimal, cost: Decimal
    ) -> tuple[Decimal, Decimal]:
        return await self._store._run(_settle, self._name, budget._window, entry, cost, time.time())


def _begin(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:  # in the transaction: one write lock, and cheap once made
        connection.execute(statement)


def _figures(
    connection: sqlite3.Connection, name: str, window: float | None, now: float
) -> tuple[Decimal, Decimal]:
    """(spent, reserved) of budget ``name`` now, inside the caller's transaction."""
    spent = _ZERO
    reserved = _ZERO
    if window is None:
        row = connection.execute(
            "SELECT spent FROM kova_budgets WHERE name = ?", (name,)
        ).fetchone()
        if row is not None:
            spent = Decimal(row[0])
    else:
        connection.execute(
            "DELETE FROM kova_budget_holds WHERE budget = ? AND at <= ? AND (spent = 1 OR at <= ?)",
            (name, now - window, now - window - _HOLD_SECONDS),
        )
    rows = connection.execute(
        "SELECT amount, spent, at FROM kova_budget_holds WHERE budget = ?", (name,)
    ).fetchall()
    for amount, settled, at in rows:
        if settled:
            spent += Decimal(amount)
        elif at + _HOLD_SECONDS <= now:
            spent += Decimal(amount)  # its process died mid-call: counted as spent
        else:
            reserved += Decimal(amount)
    return spent, reserved


def _reserve(
    connection: sqlite3.Connection,
    name: str,
    amount: Decimal,
    window: float | None,
    needed: Decimal,
    now: float,
) -> tuple[int | None, Decimal, Decimal]:
    _begin(connection)
    try:
        spent, reserved = _figures(connection, name, window, now)
        if needed > amount - spent - reserved:
            connection.execute("COMMIT")
            return None, spent, reserved
        cursor = connection.execute(
            "INSERT INTO kova_budget_holds (budget, amount, spent, at) VALUES (?, ?, 0, ?)",
            (name, str(needed), now),
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    entry = cursor.lastrowid
    assert entry is not None
    return entry, spent, reserved + needed


def _settle(
    connection: sqlite3.Connection,
    name: str,
    window: float | None,
    entry: int,
    cost: Decimal,
    now: float,
) -> tuple[Decimal, Decimal]:
    _begin(connection)
    try:
        if window is None:
            connection.execute("DELETE FROM kova_budget_holds WHERE id = ?", (entry,))
            if cost:
                row = connection.execute(
                    "SELECT spent FROM kova_budgets WHERE name = ?", (name,)
                ).fetchone()
                total = cost + (Decimal(row[0]) if row is not None else _ZERO)
                connection.execute(
                    "INSERT OR REPLACE INTO kova_budgets (name, spent) VALUES (?, ?)",
                    (name, str(total)),
                )
        elif cost:
            connection.execute(
                "UPDATE kova_budget_holds SET amount = ?, spent = 1, at = ? WHERE id = ?",
                (str(cost), now, entry),
            )
        else:
            connection.execute("DELETE FROM kova_budget_holds WHERE id = ?", (entry,))
        figures = _figures(connection, name, window, now)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return figures


def shared_budget(
    store: SqliteSessionStore,
    amount: Decimal | int | str | float,
    *,
    window: object = None,
    name: str = "default",
) -> Budget:
    """A :class:`~kova.agent.Budget` of ``amount`` kept in ``store`` under ``name``."""
    if not isinstance(name, str) or not name:
        raise BuildError(f"a budget's name must be a non-empty str, got {name!r}")
    budget = Budget(amount, window=window)
    budget._ledger = _SqliteLedger(store, name)
    return budget
